package migration

import (
	"bytes"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// The plan names exactly what apply touches, and the look-alikes it leaves: the password of a
// peer is copied from MetalLB's namespace only, the one Deployment labelled as MetalLB's
// controller is the one scaled down, and an IPGroup of a pool's name is kept only if identical.
func TestConvertMetalLBTouchesOnlyWhatItNames(t *testing.T) {
	deployment := func(name string, labels map[string]string) appsv1.Deployment {
		return appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: name, UID: types.UID("uid-" + name), Labels: labels}}
	}
	st := MetalLBState{Namespace: "metallb-system",
		Pools: []unstructured.Unstructured{
			mlb(t, "v1beta1", "IPAddressPool", "web", `{addresses: ["192.0.2.0/28"]}`),
			mlb(t, "v1beta1", "IPAddressPool", "same", `{addresses: ["192.0.2.16/28"], autoAssign: false}`),
		},
		L2Ads: []unstructured.Unstructured{mlb(t, "v1beta1", "L2Advertisement", "l2", `{}`)},
		Peers: []unstructured.Unstructured{
			mlb(t, "v1beta2", "BGPPeer", "tor", `{myASN: 64512, peerASN: 64513, peerAddress: 198.51.100.254, passwordSecret: {name: tor-password}}`),
			mlb(t, "v1beta2", "BGPPeer", "stolen", `{myASN: 64512, peerASN: 64513, peerAddress: 198.51.100.253, passwordSecret: {name: db-password, namespace: shop}}`),
		},
		Deployments: []appsv1.Deployment{
			deployment("controller", map[string]string{"app": "metallb", "component": "controller"}),
			deployment("ingress-controller", map[string]string{"app.kubernetes.io/name": "ingress-nginx", "app.kubernetes.io/component": "controller"}),
			deployment("speaker-helper", map[string]string{"app": "metallb", "component": "speaker"}),
		},
		Groups: []paasv1.IPGroup{
			{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: paasv1.IPGroupSpec{Segment: "10.0.0.0/24"}},
			// As the API server stores the conversion of "same": its defaults filled in.
			{ObjectMeta: metav1.ObjectMeta{Name: "same"}, Spec: paasv1.IPGroupSpec{Addresses: []string{"192.0.2.16/28"}, AutoAssign: new(bool),
				Announce: &paasv1.Announce{Mode: paasv1.AnnounceL2}}},
		},
	}
	p := ConvertMetalLB(st)
	if p.Controller == nil || p.Controller.Name != "controller" || p.Controller.UID != "uid-controller" {
		t.Errorf("controller %+v, want Deployment metallb-system/controller by its uid", p.Controller)
	}
	if web := groupNamed(p, "web"); web.Exists || !strings.Contains(web.Conflict, "IPGroup web exists and differs from the conversion in spec.addresses, spec.segment") {
		t.Errorf("web: exists %t, conflict %q", web.Exists, web.Conflict)
	}
	if same := groupNamed(p, "same"); !same.Exists || same.Conflict != "" {
		t.Errorf("same: exists %t, conflict %q", same.Exists, same.Conflict)
	}
	for _, pc := range p.Peers {
		switch {
		case pc.Name == "stolen" && (pc.Peer != nil || pc.PasswordFrom.Name != ""):
			t.Errorf("the peer whose password is in namespace shop is converted: %+v", pc)
		case pc.Name == "tor" && pc.PasswordFrom != (types.NamespacedName{Namespace: "metallb-system", Name: "tor-password"}):
			t.Errorf("tor's password from %s", pc.PasswordFrom)
		}
	}
	var out bytes.Buffer
	PrintMetalLBPlan(&out, p)
	for _, want := range []string{
		"IPGroup web exists already and differs: apply refuses the pool (see problems)",
		"IPGroup same exists already, identical: apply leaves it",
		"BGPPeer stolen (v1beta2): not converted",
		"BGPPeer stolen: its passwordSecret shop/db-password is outside MetalLB's namespace metallb-system",
		"MetalLB's controller: Deployment metallb-system/controller (uid uid-controller); --scale-down-controller scales it, and nothing else, to 0",
		"not touched:\n  Deployment metallb-system/ingress-controller: labelled a controller, but not MetalLB's",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the plan does not say %q:\n%s", want, out.String())
		}
	}
	if len(p.Problems) != 2 {
		t.Errorf("problems %q, want the differing IPGroup and the peer's password", p.Problems)
	}

	// Two Deployments labelled as MetalLB's controller: neither is scaled.
	st.Deployments = append(st.Deployments, deployment("metallb-controller",
		map[string]string{"app.kubernetes.io/name": "metallb", "app.kubernetes.io/component": "controller"}))
	if p := ConvertMetalLB(st); p.Controller != nil || !strings.Contains(strings.Join(p.Problems, "\n"), "are all labelled as MetalLB's controller") {
		t.Errorf("two controllers: controller %+v, problems %q", p.Controller, p.Problems)
	}
}
