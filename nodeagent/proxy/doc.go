// Package proxy is the agent's data path, as kube-proxy's proxier is: it
// turns the Services the operator gave VIPs (ipMode Proxy) and their ready
// endpoints into dataplane.Service values and hands them to one
// dataplane.Plane per family, so traffic to VIP:port reaches an endpoint on
// every node whatever kube-proxy mode or CNI the cluster runs.
//
// The Syncer keeps the desired state from events (desired.go: an event marks
// what it made stale, package changes; a sync derives only that), carries only
// the addresses the trust rule lets this node carry (package trust), and
// tells on each Service what it refused: the condition vip.paas.org/Programmed,
// which every agent computes alike, and this node's Events (report.go). It also
// carries the addresses the operator adopted and hands over from kube-proxy
// (their ledger object awaits the data path), and, where this node announces
// one, records this node in its ledger status.programmedBy once the rules are
// written (programmed.go). Those are the only writes it makes to the API server.
//
// It does not decide which node answers for a VIP (package announce), nor how
// rules are written (package dataplane), nor when rules are removed on the
// way out (the agent's root package).
package proxy
