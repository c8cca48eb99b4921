package service

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// An address changes hands only from a VirtualIP that migrates to exactly this
// Service and still holds exactly this address.
func TestMigratingTo(t *testing.T) {
	svc := types.NamespacedName{Namespace: "shop", Name: "web"}
	addr := netip.MustParseAddr("192.0.2.10")
	base := func() *paasv1.VirtualIP {
		return &paasv1.VirtualIP{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-vip", Annotations: map[string]string{paasv1.MigrateAnnotation: ""}},
			Spec:       paasv1.VirtualIPSpec{Service: "web"},
			Status:     paasv1.VirtualIPStatus{State: "Migrating: converting Service", IP: "192.0.2.10"},
		}
	}
	for _, c := range []struct {
		desc   string
		change func(*paasv1.VirtualIP)
		want   bool
	}{
		{"migrating to this Service", func(*paasv1.VirtualIP) {}, true},
		{"not annotated", func(v *paasv1.VirtualIP) { v.Annotations = nil }, false},
		{"another Service", func(v *paasv1.VirtualIP) { v.Spec.Service = "api" }, false},
		{"another namespace", func(v *paasv1.VirtualIP) { v.Namespace = "other" }, false},
		{"another address", func(v *paasv1.VirtualIP) { v.Status.IP = "192.0.2.11" }, false},
		{"no address", func(v *paasv1.VirtualIP) { v.Status.IP = "" }, false},
		{"already migrated", func(v *paasv1.VirtualIP) { v.Status.State = paasv1.VirtualIPMigrated }, false},
	} {
		vip := base()
		c.change(vip)
		if got := migratingTo(vip, svc, addr); got != c.want {
			t.Errorf("%s: got %v, want %v", c.desc, got, c.want)
		}
	}
}
