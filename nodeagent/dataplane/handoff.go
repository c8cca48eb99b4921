package dataplane

import "net/netip"

// Connection handoff: a planned move of a VIP (cordon, drain, agent restart) switches the
// clients' neighbour entries to the new owner at one instant, and a TCP connection open at that
// instant sends its next segments to a node that never saw its SYN. That node's conntrack would
// pick it up mid-stream, DNAT it to some endpoint under a new masquerade port, and the endpoint
// would answer with a reset. So the new owner sends such segments (TCP, not a SYN, no
// connection of its own: conntrack state NEW or INVALID) unchanged, still addressed to the VIP,
// to the previous owner's address on the LAN, which still holds the connection's conntrack
// entry and its NAT, and drops its own copy. Nothing is tracked for them here (the dropped
// packet never confirms a conntrack entry), no route or sysctl is touched, and the kernel's
// TEE target sends the copy straight to the neighbour, without a forwarding decision that could
// answer the client with an ICMP redirect. New connections (SYN) are served by the new owner.
//
// Both planes write it the same way, in iptables (iptables_handoff.go): TEE has been proven
// there, and the nftables plane's reject-vips chain lets the untracked copies out.

// Handoffs maps a VIP this node took over in a planned move to the previous owner's address on
// the VIP's LAN.
type Handoffs map[netip.Addr]netip.Addr
