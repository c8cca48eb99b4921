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
//	vip-allocator version         the version of the binary
//	vip-allocator completion      the shell's completion script
//
// Linked (or copied) as kubectl-vip on the PATH it is also the kubectl plugin
// "kubectl vip": kubectl runs it with the words after "vip", so
// `kubectl vip explain svc/web` is `vip-allocator explain svc/web`. Linked as
// kubectl_complete-vip it answers kubectl's completion of "kubectl vip".
//
// One image holds it; the operator deploys the agent as a DaemonSet of that image.
package main

import (
	"os"

	"github.com/paas-org/vip-allocator-operator/cmd"
)

func main() {
	os.Exit(cmd.Main(os.Args[0], os.Args[1:]))
}
