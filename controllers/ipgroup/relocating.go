package ipgroup

import (
	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// countRelocating counts the holders of ledger objects labelled with the group
// whose addresses the group (g, nil when its spec is unusable) no longer allows.
func countRelocating(name string, g *allocator.Group, ips []paasv1.IP) int64 {
	holders := map[string]bool{}
	for i := range ips {
		ip := &ips[i]
		addr, ok := ip.Addr()
		if !ok || ip.Labels[paasv1.IPGroupLabel] != name || (g != nil && g.Usable(addr)) {
			continue
		}
		holders[ledger.OwnerKey(ip)] = true
		for _, key := range ledger.HolderKeys(ip) { // every Service sharing it moves
			holders[key] = true
		}
	}
	return int64(len(holders))
}
