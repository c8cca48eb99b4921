// Package bgppeer is the BGPPeer reconciler: it reports whether each peer is
// used (Accepted), whether every node that peers with it has its session up
// (Established) and its BFD session up, from the session entries the agents
// write, and copies the peers' passwords into the one Secret the agents read.
//
// It writes the peers' status and that Secret; it must never open a BGP
// session nor write a session entry (the agents do).
package bgppeer
