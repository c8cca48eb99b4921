// Command vip-allocator is the whole product in one binary:
//
//	vip-allocator operator        the manager: allocates IPs to LoadBalancer Services
//	vip-allocator agent           the node agent: nftables (the default, when the kernel
//	                              takes it) or iptables from VIP:port to ready endpoints
//	vip-allocator agent cleanup   removes every rule, chain and table the agent wrote
//	vip-allocator migrate         moves a cluster onto vip-allocator: legacy VirtualIPs
//	                              (plan, all), the original operator (upgrade) and
//	                              MetalLB (metallb plan, metallb apply)
//	vip-allocator explain         why an address answers or not, step by step
//
// Linked (or copied) as kubectl-vip on the PATH it is also the kubectl plugin
// "kubectl vip": kubectl runs it with the words after "vip", so
// `kubectl vip explain svc/web` is `vip-allocator explain svc/web`.
//
// One image holds it; the operator deploys the agent as a DaemonSet of that image.
package main

import (
	"fmt"
	"os"

	"github.com/paas-org/vip-allocator-operator/cmd"
)

func main() {
	if err := cmd.Run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "vip-allocator:", err)
		os.Exit(1)
	}
}
