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
// docs/failover.md) are set for failover within 2 s at 3-50 nodes:
// memberlist's LAN defaults need about 5 s to declare a dead member dead.
package membership
