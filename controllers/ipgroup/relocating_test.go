package ipgroup

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
)

func TestCountRelocating(t *testing.T) {
	ledgerIP := func(addr, group, owner string) paasv1.IP {
		ip := paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(netip.MustParseAddr(addr)), Labels: map[string]string{}}}
		if group != "" {
			ip.Labels[paasv1.IPGroupLabel] = group
		}
		ip.Spec.Owner = &paasv1.IPOwner{Namespace: "ns", Name: owner}
		return ip
	}
	moved, err := k8salloc.Group(&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec: paasv1.IPGroupSpec{Segment: "198.51.100.0/24", ExcludedIPs: []string{"198.51.100.9"}}})
	if err != nil {
		t.Fatal(err)
	}
	ledger := []paasv1.IP{
		ledgerIP("192.0.2.10", "ext", "api"),       // left behind by the segment edit
		ledgerIP("198.51.100.1", "ext", "api"),     // api's new address: the move is half done
		ledgerIP("198.51.100.2", "ext", "web"),     // moved
		ledgerIP("198.51.100.9", "ext", "db"),      // excluded since
		ledgerIP("2001:db8::9", "ext", "dual"),     // another family: not the group's
		ledgerIP("192.0.2.11", "other", "ingress"), // another group's
		ledgerIP("192.0.2.12", "", "imported"),     // no group recorded
	}
	shared := ledgerIP("192.0.2.13", "ext", "dns-tcp") // shared: both holders move
	shared.Spec.SharingKey, shared.Spec.SharedWith = "dns", []paasv1.IPOwner{{Namespace: "ns", Name: "dns-udp"}}
	ledger = append(ledger, shared)
	if got := countRelocating("ext", moved, ledger); got != 5 {
		t.Errorf("relocating %d, want 5 (api, db, dual, dns-tcp, dns-udp)", got)
	}
	if got := countRelocating("ext", nil, ledger); got != 6 {
		t.Errorf("an unusable group allows nothing: relocating %d, want 6", got)
	}
	if got := countRelocating("gone", moved, ledger); got != 0 {
		t.Errorf("relocating %d for a group the ledger does not name, want 0", got)
	}
}
