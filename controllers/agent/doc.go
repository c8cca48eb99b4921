// Package agent is the reconciler of the node agents' DaemonSet: it applies
// it (server-side apply, owned by the agents' ServiceAccount so that an
// uninstall removes it), puts back what was changed, recreates it when
// deleted, creates the agents' gossip key once and labels its namespace for
// Pod Security. It also reads the options the agents run with (ParseArgs,
// OwnImage).
//
// It must never write what the agents program (rules, routes, announcements)
// nor replace a gossip key that exists.
package agent
