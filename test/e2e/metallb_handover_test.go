//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/announce"
	"github.com/paas-org/vip-allocator-operator/test/metallb"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestMetalLBHandOverL2: a Service MetalLB served (its address in the status, no ledger object,
// MetalLB's real speakers running in the three nodes, the one they elected answering ARP, real
// kube-proxies forwarding it) is taken over by the operator and the agents while a client curls
// it 20 times a second: the operator adopts the address (kube-proxy lets go of it), the owner
// agent sends its gratuitous ARP while MetalLB's speaker still answers (a node's MAC: a
// hand-over, not a conflict), then MetalLB is removed. The agents elect the node MetalLB's
// speaker answers from (its ServiceL2Status, recorded on the ledger at the adoption), so the
// client's neighbour entry never moves: not one request fails, no ARPConflict is reported, and
// afterwards only the owner answers for the VIP. The VIP is one MetalLB's hash gives to another
// node than the agents' (node1, not node3), so only the recorded node makes the owner MetalLB's.
func TestMetalLBHandOverL2(t *testing.T) {
	handOverL2(t, setupL2(t), "192.0.2.40", "192.0.2.32-192.0.2.63", map[string]string{"198.51.100.11": "node1"})
}

// TestMetalLBHandOverL2IPv6 is the same hand-over for an IPv6 Service on the dual-stack lab:
// MetalLB's speaker answers NDP (a solicited Neighbor Advertisement) from its node, the owner
// agent sends its unsolicited one, and the client's neighbour entry stays on that node. Here too
// the hashes differ: MetalLB's gives the VIP to node3, the agents' to node1.
func TestMetalLBHandOverL2IPv6(t *testing.T) {
	handOverL2(t, setupL2DualStack(t), "2001:db8::146", "2001:db8::100-2001:db8::1ff", map[string]string{"2001:db8:100::11": "node1"})
}

// handOverL2 is the L2 hand-over from MetalLB of vip, in MetalLB's pool and then the group's
// (pool: a range start-end), for a Service "web" of backends (address → node), whose family
// is vip's: ARP for IPv4, NDP for IPv6.
func handOverL2(t *testing.T, d *l2Lab, vip, pool string, backends map[string]string) {
	ctx := context.Background()
	k8s := d.env.Admin
	// MetalLB's time: the operator is not installed yet.
	d.stopOperator()
	web := d.createService(t, "web", false, backends)
	writeStatusAsMetalLB(t, k8s, web, vip)
	kubeProxies := startKubeProxies(t, d.dataLab, vip, "node1", "node2", "node3")
	speakers := startMetalLBSpeakers(t, d.dataLab, lanIP, fmt.Sprintf(`
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lan}
spec: {addresses: [%s]}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: lan}
`, pool))
	answers, protocol := d.neighbourAnswers(vip)
	metallbNode := ""
	speakers.waitFor(t, "one MetalLB speaker answers "+protocol+" for "+vip, func() error {
		macs := answers(vip)
		for n, mac := range d.macs {
			if len(macs) == 1 && macs[0] == mac {
				metallbNode = n
				return nil
			}
		}
		return fmt.Errorf("%s answers from %v, want one node's (node MACs %v)", protocol, macs, d.macs)
	})
	speakers.waitFor(t, "MetalLB's path serves the VIP", func() error { _, err := d.curl(vipURL(vip)); return err })

	loop, start := switchFromMetalLB(t, d.dataLab, vipURL(vip), &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"},
		Spec: paasv1.IPGroupSpec{Addresses: []string{pool}}})
	owner := ""
	testenv.Eventually(t, settle, "an agent announces the adopted VIP", func() error {
		if owner = d.announcer(vip); owner == "" {
			return errNotYet("no announcer in the ledger")
		}
		return nil
	})
	announcedAfter := time.Since(start)
	if owner != metallbNode {
		t.Errorf("the agents elected %s, MetalLB's speaker answers from %s: the client's neighbour entry moves at the switch", owner, metallbNode)
	}
	svc := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(web), svc); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionIPAllocated); len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != vip || c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("after the switch web shows %v, condition %v; want %s kept, IPAllocated=True", svc.Status.LoadBalancer.Ingress, c, vip)
	}
	time.Sleep(2 * time.Second) // both answer: MetalLB's speaker and the owner
	speakers.stop()
	// The operator's status says ipMode Proxy: kube-proxy has let go of the address, and the
	// agents alone carry it from here on.
	kubeProxies.wait(t, d.dataLab, vip, false)
	time.Sleep(3 * time.Second) // the agents alone
	total, rate := noneFailed(t, loop)
	t.Logf("%s: MetalLB's speaker on %s answered %s; adopted and announced by %s %s after the operator started; %d requests at %.1f per second, %d failed",
		vip, metallbNode, protocol, owner, announcedAfter.Round(time.Millisecond), total, rate, len(loop.failures))
	// Only the owner answers now, and the ledger names it.
	t.Logf("after MetalLB's removal %s answers for %s (node MACs %v)", d.owner(t, vip, ""), vip, d.macs)
	adoptionChecked(t, k8s, vip, metallbNode)
}

// adoptionChecked fails t unless vip's ledger object is marked adopted (the agents expect
// MetalLB's answers) from MetalLB's node, and no agent reported the hand-over as a conflict.
func adoptionChecked(t *testing.T, k8s client.Client, vip, metallbNode string) {
	t.Helper()
	ctx := context.Background()
	ledger := &paasv1.IP{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(netip.MustParseAddr(vip))}, ledger); err != nil || !ledger.HandOverExpected(time.Now()) {
		t.Fatalf("ledger %s: %v, annotations %v; want it marked adopted (the agents expect MetalLB's answers)", vip, err, ledger.Annotations)
	}
	if ledger.Spec.AdoptedFromNode != metallbNode {
		t.Errorf("ledger %s: adoptedFromNode %q, want MetalLB's node %s (its ServiceL2Status)", vip, ledger.Spec.AdoptedFromNode, metallbNode)
	}
	var events corev1.EventList
	if err := k8s.List(ctx, &events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == announce.EventARPConflict {
			t.Fatalf("the hand-over was reported as a conflict: %s", e.Message)
		}
	}
}

type errNotYet string

func (e errNotYet) Error() string { return string(e) }

// metallbBGPSource are the addresses MetalLB's speakers peer from, a second one on each node's
// LAN interface: the agents peer with the same router from the nodes' addresses, and a router
// takes a second session from an address it already has one with for a collision and closes
// one of them.
var metallbBGPSource = map[string]string{"node1": "198.51.100.21", "node2": "198.51.100.22", "node3": "198.51.100.23"}

// TestMetalLBHandOverBGP: a Service MetalLB served over BGP (its real speakers in the three
// nodes, in the cluster's AS, each advertising the VIP to the router with itself as the next
// hop; a real kube-proxy on every node forwarding it to the backend) is taken over: the
// operator adopts the address (kube-proxy lets go of it), the agents advertise it, and the
// router has their routes before MetalLB withdraws its own. A client curls through the router at 20 Hz throughout: not one
// request fails.
func TestMetalLBHandOverBGP(t *testing.T) {
	d := setupBGP(t)
	ctx := context.Background()
	k8s := d.env.Admin
	d.stopOperator()
	const vip = "203.0.113.140"
	web := d.bgpService(t, "web", false)
	writeStatusAsMetalLB(t, k8s, web, vip)
	nodes := []string{"node1", "node2", "node3"}
	kubeProxies := startKubeProxies(t, d.dataLab, vip, nodes...)
	config := `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: bgp-vips}
spec: {addresses: [203.0.113.130-203.0.113.150]}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: bgp-vips}
spec: {ipAddressPools: [bgp-vips]}
`
	for _, n := range nodes {
		d.in(n, "ip", "addr", "add", metallbBGPSource[n]+"/24", "dev", "eth0")
		// The kubelet's label, which a peer's node selector picks the node by.
		d.setNodeLabel(t, n, "kubernetes.io/hostname", n)
		config += fmt.Sprintf(`---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router-%[1]s}
spec:
  myASN: 64513
  peerASN: 64512
  peerAddress: 198.51.100.1
  sourceAddress: %[2]s
  nodeSelectors: [{matchLabels: {kubernetes.io/hostname: %[1]s}}]
`, n, metallbBGPSource[n])
	}
	speakers := startMetalLBSpeakers(t, d.dataLab, bgpNodeIP, config)
	metallbHops := slices.Sorted(maps.Values(metallbBGPSource))
	speakers.waitFor(t, "the router routes the VIP to MetalLB's speakers", func() error {
		hops, err := d.router.nextHops(vip + "/32")
		if err != nil || !slices.Equal(hops, metallbHops) {
			return fmt.Errorf("next hops %v, %v; want %v", hops, err, metallbHops)
		}
		return nil
	})
	speakers.waitFor(t, "MetalLB's path serves the VIP", func() error { _, err := d.curl("http://" + vip); return err })

	loop, start := switchFromMetalLB(t, d.dataLab, "http://"+vip,
		&paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513}},
		&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp-vips"}, Spec: paasv1.IPGroupSpec{Addresses: []string{"203.0.113.130-203.0.113.150"},
			Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}})
	testenv.Eventually(t, settle, "the router has the agents' routes next to MetalLB's", func() error {
		hops, err := d.router.nextHops(vip + "/32")
		want := slices.Sorted(slices.Values(append([]string{bgpNodeIP["node1"], bgpNodeIP["node2"], bgpNodeIP["node3"]}, metallbHops...)))
		if err != nil || !slices.Equal(hops, want) {
			return fmt.Errorf("next hops %v, %v; want %v", hops, err, want)
		}
		return nil
	})
	ours := time.Since(start)
	// MetalLB's withdrawal, the route first: its advertisement is deleted and the speakers
	// withdraw the VIP while their sessions stay up, so flows move over before anything ends.
	adv := &unstructured.Unstructured{}
	adv.SetAPIVersion("metallb.io/v1beta1")
	adv.SetKind("BGPAdvertisement")
	adv.SetNamespace(metallb.Namespace)
	adv.SetName("bgp-vips")
	if err := k8s.Delete(ctx, adv); err != nil {
		t.Fatal(err)
	}
	d.waitNextHops(t, vip, nodes...)
	time.Sleep(2 * time.Second) // flows already on MetalLB's paths finish there
	speakers.stop()
	// The operator's status says ipMode Proxy: kube-proxy has let go of the address, and the
	// agents alone carry it from here on.
	kubeProxies.wait(t, d.dataLab, vip, false)
	time.Sleep(2 * time.Second)
	total, rate := noneFailed(t, loop)
	t.Logf("the router had the agents' routes to %s %s after the operator started, before MetalLB's withdrawal; %d requests at %.1f per second, 0 failed",
		vip, ours.Round(time.Millisecond), total, rate)
}

// switchFromMetalLB is the switch as a user makes it: the converted objects
// (what 'migrate metallb apply' writes), a client curling url at 20 Hz from
// then on, the three agents, then, once they run, the operator. It returns the
// loop and when the operator started.
//
// The agents run before the operator adopts anything, as they do when the
// bundle is installed before 'migrate metallb apply' (docs/migration.md): the
// operator writes ipMode Proxy, and kube-proxy lets go of the address on every
// node, once the nodes announcing it report it programmed; an agent still
// starting on another node then would leave that node's share to nobody.
func switchFromMetalLB(t *testing.T, d *dataLab, url string, converted ...client.Object) (*curlLoop, time.Time) {
	t.Helper()
	for _, o := range converted {
		if err := d.env.Admin.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	loop := d.startCurlLoop(url)
	nodes := []string{"node1", "node2", "node3"}
	for _, n := range nodes {
		d.startAgent(t, n)
	}
	d.waitDataPlanes(t, nodes...)
	d.runOperator(t)
	return loop, time.Now()
}

// noneFailed ends loop and fails t unless every request of the hand-over
// passed, at about 20 a second.
func noneFailed(t *testing.T, loop *curlLoop) (total int, perSecond float64) {
	t.Helper()
	total, failures, perSecond := loop.finish()
	if len(failures) > 0 {
		t.Fatalf("%d of %d requests failed during the hand-over from MetalLB:\n%s", len(failures), total, strings.Join(failures, "\n"))
	}
	if perSecond < 18 {
		t.Fatalf("the loop ran at %.1f requests per second, not 20", perSecond)
	}
	return total, perSecond
}

// writeStatusAsMetalLB writes vip into svc's status as MetalLB's controller did before this
// project was installed: the status policy's binding is lifted for the write and put back.
func writeStatusAsMetalLB(t *testing.T, k8s client.Client, svc *corev1.Service, vip string) {
	t.Helper()
	ctx := context.Background()
	restore, err := testenv.WithoutStatusPolicy(ctx, k8s)
	if err != nil {
		t.Fatal(err)
	}
	// The API server enforces the binding's removal once its informer has seen it.
	testenv.Eventually(t, settle, "MetalLB writes the Service's address", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: vip}}
		return k8s.Status().Update(ctx, svc)
	})
	if err := restore(); err != nil {
		t.Fatal(err)
	}
}
