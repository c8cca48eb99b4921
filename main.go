// Command vip-allocator is the whole product in one binary:
//
//	vip-allocator operator        the manager: allocates IPs to LoadBalancer Services
//	vip-allocator agent           the node agent: iptables from VIP:port to endpoints
//	vip-allocator agent cleanup   removes every rule the agent wrote
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
