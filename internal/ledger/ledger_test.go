package ledger

import (
	"maps"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// The ledger objects as each writer leaves them.
var (
	web = paasv1.IPOwner{Namespace: "shop", Name: "web", UID: "uid-web"}
	dns = paasv1.IPOwner{Namespace: "shop", Name: "dns", UID: "uid-dns"}

	ours = func(holders ...paasv1.IPOwner) *paasv1.IP {
		ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.7", Labels: map[string]string{paasv1.IPGroupLabel: "g"},
			Annotations: map[string]string{paasv1.OwnerAnnotation: holders[0].Namespace + "/" + holders[0].Name}}}
		ip.Spec.Owner, ip.Spec.SharedWith = &holders[0], holders[1:]
		return ip
	}
	original = func(annotation string) *paasv1.IP { // as the original's Service controller writes it
		return &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.2", Labels: map[string]string{paasv1.IPGroupLabel: "g"},
			Annotations: map[string]string{paasv1.OwnerAnnotation: annotation}}}
	}
	legacy = func() *paasv1.IP { // a 0.3 VirtualIP's
		return &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.3", Labels: map[string]string{paasv1.LegacyGSMLabel: "gsm"},
			Annotations: map[string]string{paasv1.OwnerAnnotation: "shop/api-vip"}}}
	}
	lanRecord = func() *paasv1.IP {
		ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.4", Labels: map[string]string{paasv1.IPGroupLabel: "g"}}}
		ip.Status.Conditions = []metav1.Condition{{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionTrue}}
		return ip
	}
	unowned = func() *paasv1.IP { return &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.5"}} }
)

// Each kind of object, and what each holder rule reads of it: the operator's
// rules (ServiceNames, keys) read the original operator's annotation, the
// agents' (HolderUIDs) only what names a uid.
func TestHolderRules(t *testing.T) {
	shopAPI := types.NamespacedName{Namespace: "shop", Name: "api"}
	for _, tc := range []struct {
		desc     string
		ip       *paasv1.IP
		kind     Kind
		names    []types.NamespacedName
		uids     []types.UID
		ownerKey string
		keys     []string
	}{
		{"ours, one holder", ours(web), Service,
			[]types.NamespacedName{{Namespace: "shop", Name: "web"}}, []types.UID{"uid-web"}, "shop/web", []string{"shop/web"}},
		{"ours, shared", ours(web, dns), Service,
			[]types.NamespacedName{{Namespace: "shop", Name: "web"}, {Namespace: "shop", Name: "dns"}}, []types.UID{"uid-web", "uid-dns"}, "shop/web", []string{"shop/web", "shop/dns"}},
		{"ours, a holder without uid is no agent's", ours(paasv1.IPOwner{Namespace: "shop", Name: "web"}), Service,
			[]types.NamespacedName{{Namespace: "shop", Name: "web"}}, nil, "shop/web", []string{"shop/web"}},
		{"the original operator's: the operator's by name, trusted by no agent", original("shop/api"), Original,
			[]types.NamespacedName{shopAPI}, nil, "shop/api", []string{"shop/api"}},
		{"the original's with a bad annotation reads as a VirtualIP's", original("shop/"), LegacyVirtualIP,
			nil, nil, "VirtualIP shop/", nil},
		{"a legacy VirtualIP's", legacy(), LegacyVirtualIP, nil, nil, "VirtualIP shop/api-vip", nil},
		{"a record of an address in use on the LAN", lanRecord(), LANRecord, nil, nil, "unowned 192.0.2.4", nil},
		{"nothing to read", unowned(), Unowned, nil, nil, "unowned 192.0.2.5", nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := KindOf(tc.ip); got != tc.kind {
				t.Errorf("KindOf = %s, want %s", got, tc.kind)
			}
			if got := IsLANRecord(tc.ip); got != (tc.kind == LANRecord) {
				t.Errorf("IsLANRecord = %t", got)
			}
			if got := ServiceNames(tc.ip); !slices.Equal(got, tc.names) {
				t.Errorf("ServiceNames = %v, want %v", got, tc.names)
			}
			if got := HolderUIDs(tc.ip); !slices.Equal(got, tc.uids) {
				t.Errorf("HolderUIDs = %v, want %v", got, tc.uids)
			}
			if got := OwnerKey(tc.ip); got != tc.ownerKey {
				t.Errorf("OwnerKey = %q, want %q", got, tc.ownerKey)
			}
			if got := HolderKeys(tc.ip); !slices.Equal(got, tc.keys) {
				t.Errorf("HolderKeys = %v, want %v", got, tc.keys)
			}
			for _, uid := range tc.uids {
				if !HeldBy(tc.ip, uid) {
					t.Errorf("not HeldBy %s", uid)
				}
			}
			if HeldBy(tc.ip, "") {
				t.Error("HeldBy the empty uid")
			}
		})
	}
	if HolderUIDs(nil) != nil {
		t.Error("HolderUIDs(nil) names someone")
	}
}

func TestOriginalOwner(t *testing.T) {
	svc := types.NamespacedName{Namespace: "shop", Name: "api"}
	for _, c := range []struct {
		desc   string
		labels map[string]string
		annot  map[string]string
		owner  *paasv1.IPOwner
		want   bool
	}{
		{"as the original's Service controller writes it", map[string]string{paasv1.IPGroupLabel: "g"}, map[string]string{paasv1.OwnerAnnotation: "shop/api"}, nil, true},
		{"ours: spec.owner set", map[string]string{paasv1.IPGroupLabel: "g"}, map[string]string{paasv1.OwnerAnnotation: "shop/api"}, &paasv1.IPOwner{Namespace: "shop", Name: "api", UID: "u"}, false},
		{"a 0.3 VirtualIP's: label gsm", map[string]string{paasv1.LegacyGSMLabel: "gsm"}, map[string]string{paasv1.OwnerAnnotation: "shop/api"}, nil, false},
		{"both labels: a VirtualIP's half relabelled", map[string]string{paasv1.IPGroupLabel: "g", paasv1.LegacyGSMLabel: "gsm"}, map[string]string{paasv1.OwnerAnnotation: "shop/api"}, nil, false},
		{"no annotation", map[string]string{paasv1.IPGroupLabel: "g"}, nil, nil, false},
		{"annotation is no namespace/name", map[string]string{paasv1.IPGroupLabel: "g"}, map[string]string{paasv1.OwnerAnnotation: "api"}, nil, false},
		{"annotation with an empty half", map[string]string{paasv1.IPGroupLabel: "g"}, map[string]string{paasv1.OwnerAnnotation: "shop/"}, nil, false},
	} {
		ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.2", Labels: c.labels, Annotations: c.annot}, Spec: paasv1.IPSpec{Owner: c.owner}}
		got, ok := OriginalOwner(ip)
		if ok != c.want || (ok && got != svc) {
			t.Errorf("%s: got %v %v, want %v", c.desc, got, ok, c.want)
		}
	}
}

// A key names what it was made from, and a VirtualIP's is never a Service's.
func TestKeys(t *testing.T) {
	svc := types.NamespacedName{Namespace: "shop", Name: "web"}
	if got, ok := ServiceOfKey(ServiceKey(svc)); !ok || got != svc {
		t.Errorf("ServiceOfKey(ServiceKey) = %v %t", got, ok)
	}
	for _, key := range []string{LegacyKey("shop", "web"), "unowned 192.0.2.5", "web"} {
		if got, ok := ServiceOfKey(key); ok {
			t.Errorf("ServiceOfKey(%q) = %v, want none", key, got)
		}
	}
	if got, ok := VirtualIPOfKey(LegacyKey("shop", "web")); !ok || got != "shop/web" {
		t.Errorf("VirtualIPOfKey = %q %t", got, ok)
	}
	if _, ok := VirtualIPOfKey(ServiceKey(svc)); ok {
		t.Error("a Service's key reads as a VirtualIP's")
	}
}

// Of the addresses the ledger gives out, only those of Services that exist
// (same uid) count, each with its live holders.
func TestLiveHolderKeys(t *testing.T) {
	svc := func(ns, name, uid string) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	}
	ip := func(name string, owner *paasv1.IPOwner) paasv1.IP {
		return paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: paasv1.IPSpec{Owner: owner}}
	}
	shared := func(name string, owner paasv1.IPOwner, with ...paasv1.IPOwner) paasv1.IP {
		return paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: paasv1.IPSpec{Owner: &owner, SharingKey: "k", SharedWith: with}}
	}
	got := LiveHolderKeys(
		[]corev1.Service{svc("a", "live", "u1"), svc("a", "recreated", "u3")},
		[]paasv1.IP{
			ip("192.0.2.1", &paasv1.IPOwner{Namespace: "a", Name: "live", UID: "u1"}),
			ip("192.0.2.2", &paasv1.IPOwner{Namespace: "a", Name: "gone", UID: "u2"}),           // its Service is gone
			ip("192.0.2.3", &paasv1.IPOwner{Namespace: "a", Name: "recreated", UID: "old-uid"}), // an earlier Service of that name
			ip("192.0.2.4", nil), // legacy: names a VirtualIP
			ip("garbage", &paasv1.IPOwner{Namespace: "a", Name: "live", UID: "u1"}),
			shared("192.0.2.5", paasv1.IPOwner{Namespace: "a", Name: "gone", UID: "u2"}, paasv1.IPOwner{Namespace: "a", Name: "live", UID: "u1"}),
		})
	want := map[netip.Addr][]string{netip.MustParseAddr("192.0.2.1"): {"a/live"}, netip.MustParseAddr("192.0.2.5"): {"a/live"}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// The agents' rule: spec.owner and, for a shared address, spec.sharedWith,
// each with a uid, give an address to Services; nothing else does.
func TestHolderUIDs(t *testing.T) {
	for _, tc := range []struct {
		desc string
		ip   *paasv1.IP
		want []types.UID
	}{
		{desc: "none", ip: nil},
		{desc: "no owner (legacy or the original operator's, not adopted yet)", ip: &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{paasv1.OwnerAnnotation: "ns/web"}}}},
		{desc: "owner without uid", ip: &paasv1.IP{Spec: paasv1.IPSpec{Owner: &paasv1.IPOwner{Namespace: "ns", Name: "web"}}}},
		{desc: "owner", ip: &paasv1.IP{Spec: paasv1.IPSpec{Owner: &paasv1.IPOwner{Namespace: "ns", Name: "web", UID: "u"}}}, want: []types.UID{"u"}},
		{desc: "shared", ip: &paasv1.IP{Spec: paasv1.IPSpec{Owner: &paasv1.IPOwner{Namespace: "ns", Name: "tcp", UID: "u1"}, SharingKey: "dns",
			SharedWith: []paasv1.IPOwner{{Namespace: "ns", Name: "udp", UID: "u2"}, {Namespace: "ns", Name: "nouid"}}}}, want: []types.UID{"u1", "u2"}},
		{desc: "sharedWith without an owner names nobody", ip: &paasv1.IP{Spec: paasv1.IPSpec{SharedWith: []paasv1.IPOwner{{Namespace: "ns", Name: "udp", UID: "u2"}}}}},
	} {
		if got := HolderUIDs(tc.ip); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q", tc.desc, got)
		}
	}
}
