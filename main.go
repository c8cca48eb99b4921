// Command vip-allocator is the whole product in one binary:
//
//	vip-allocator operator   the manager: allocates IPs to LoadBalancer Services
//
// Later subcommands (agent, agent cleanup) share the same image.
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
