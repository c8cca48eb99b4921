// Package gossip is the agents' liveness gossip (package membership) as the
// running agent uses it: its shared keys from the operator's Secret and their
// rotation, this node's address, joining the agents of the other Nodes, and
// when this agent's view of the others is settled enough to act on.
//
// It says only which agents are alive and which of them drain (Liveness); it
// decides nothing about VIPs (package announce does, from that), and whom it
// admits as a member is the node index's to say (nodes.Index.AdmitMember).
package gossip
