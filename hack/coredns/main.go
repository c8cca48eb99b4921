// Command coredns is CoreDNS with only the plugins a test cluster's DNS
// needs: the cluster's names (kubernetes), a cache, and the health and
// readiness endpoints its Deployment probes. The full plugin set builds for
// five minutes and reaches for upstream resolvers this machine does not have.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order in which a query passes the plugins, whatever the Corefile's order.
func init() {
	dnsserver.Directives = []string{"errors", "health", "ready", "cache", "kubernetes"}
}

func main() { coremain.Run() }
