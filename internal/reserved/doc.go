// Package reserved reads the addresses the cluster reserves from the
// informer cache: the Nodes' status.addresses, pod CIDRs and published
// interfaces, the Service CIDRs (ServiceCIDR objects and --service-cidrs)
// and the BGPPeers' addresses. The Service reconciler hands them to the
// allocator, which never gives one out; the IPGroup reconciler counts them
// in status.reserved. Both share one Source, and Changed says which Node or
// peer update changes them.
//
// It only reads: what a Service holding a reserved address is told, and
// what its ledger object is marked with, is the Service reconciler's.
package reserved
