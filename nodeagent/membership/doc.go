// Package membership owns the answer to "which agents are alive, and which
// of them are draining": every agent runs one member of a hashicorp/memberlist
// cluster (SWIM gossip, UDP probes with indirect and TCP fallback, every
// message AES-GCM encrypted and authenticated with the shared key), and the
// announcer elects VIP owners among the members it reports.
//
// It must never decide ownership itself, talk to the API server, or touch
// the network beyond its own UDP and TCP port.
//
// Timers (see TunedTimers; measured by `make bench-membership`, figures in
// docs/performance.md) are set for failover within 2 s at 3-50 nodes:
// memberlist's LAN defaults need about 5 s to declare a dead member dead.
//
// # A member speaks only for the address it sends from
//
// Every agent holds the key, so the key says only "one of the agents"; it
// cannot say which. Two checks bind a member to its node:
//
//   - Config.Admit (memberlist's alive delegate) counts a member named
//     after node N only when the address it advertises is one of N's
//     InternalIPs, as kubelet wrote them on the Node: a node cannot name its
//     own address after another node.
//   - The transport (sourceBound) stops a node advertising another node's
//     address. memberlist probes the advertised address, so when the real
//     node dies nobody answers there and the prober suspects the member; what
//     used to keep it alive is its refutation, an alive message with a higher
//     incarnation, which memberlist believes from anyone. So an alive claim
//     about member M at address X is handed to memberlist at once only when
//     the packet comes from X (M refuting for itself), or when M is alive
//     and unsuspected here already (a relayed state change such as Draining:
//     it revives nothing). Any other alive claim (a join or a refutation
//     relayed by a third member, or sent by an impostor) is held until M
//     answers a ping from us at X; the members listed alive in a push/pull
//     are checked the same way, the stream's peer standing for the source.
//     Relaying stays possible, at the cost of one ping per receiver, and only
//     a member that answers at X can refute for X. Acks, which end a probe,
//     count only from the address the ping or the indirect ping request went
//     to.
//
// What a key holder can still do: forge suspect and dead messages (memberlist
// believes them from anyone; the victim refutes from its own address as soon
// as it hears them, so a forged dead costs a live node its VIPs for about a
// gossip round trip, and is repeatable); bump the incarnation of a live
// member so that others' suspicions of it arrive stale (each member then
// finds the dead node by its own probe: detection takes up to members ×
// ProbeInterval plus the suspicion timeout instead of the bound); and, when
// chosen to ping a dead member indirectly, ack for it (SWIM's indirect probe
// trusts the intermediary). Only the last keeps a dead node alive, and only
// for the probes that go through the compromised node: with three nodes,
// that is every probe of the dead one, so there the guarantee holds against
// a stock memberlist member, not against a node running its own gossip code.
// Compressed messages are dropped: no agent compresses.
package membership
