// Package trust is the agent's trust rule: which addresses in a Service's
// status this node may program and announce. The status is not the
// authority: anyone with services/status could write it. An address is
// carried only when the ledger gives it to the Service (by uid), it is no
// Node's address and not reserved in the cluster, and it is not on one of
// this node's own interfaces; otherwise the agent leaves it alone, and
// RefusalOf says why.
//
// The data path (nodeagent/proxy) and the announcer (nodeagent/announce)
// both decide with View.RefusalOf, so a node never announces what it would
// not forward, nor the reverse. The rule itself (trust.go) is pure; read.go
// reads its View from the cache. It writes nothing: telling a Service what
// was refused is the data path's (its Programmed condition), and which node
// announces an address the announcer's.
package trust
