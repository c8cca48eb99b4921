package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// metallbSpeaker stands in for MetalLB's L2 speaker on a node, and for kube-proxy's rules for
// the address it announces: it answers ARP for the VIP from user space with the node's MAC (as
// the speaker does: the address is on no interface) and the node DNATs VIP:80 to the backend,
// masqueraded.
type metallbSpeaker struct {
	d       *l2Lab
	node    string
	rules   [][]string
	stopARP func()
}

func startMetalLBSpeaker(t *testing.T, d *l2Lab, node, vip, backend string) *metallbSpeaker {
	t.Helper()
	s := &metallbSpeaker{d: d, node: node, rules: [][]string{
		{"-t", "nat", "PREROUTING", "-d", vip + "/32", "-p", "tcp", "--dport", "80", "-m", "comment", "--comment", "metallb stand-in", "-j", "DNAT", "--to-destination", backend},
		{"-t", "nat", "POSTROUTING", "-d", strings.Split(backend, ":")[0] + "/32", "-m", "comment", "--comment", "metallb stand-in", "-j", "MASQUERADE"},
	}}
	d.in(node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	for _, r := range s.rules {
		d.in(node, append([]string{"iptables", r[0], r[1], "-A"}, r[2:]...)...)
	}
	target := netip.MustParseAddr(vip)
	var c *arp.Client
	if err := d.inNetns(node, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		c, err = arp.Dial(ifi)
		return err
	}); err != nil {
		t.Fatalf("the MetalLB stand-in's ARP socket on %s: %v", node, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			p, _, err := c.Read()
			if err != nil {
				return // closed
			}
			if p.Operation == arp.OperationRequest && p.TargetIP == target {
				_ = c.Reply(p, c.HardwareAddr(), target)
			}
		}
	}()
	s.stopARP = func() { c.Close(); <-done }
	t.Cleanup(s.stop)
	return s
}

// stop is MetalLB's removal: the speaker stops answering and kube-proxy's rules go.
func (s *metallbSpeaker) stop() {
	if s.stopARP == nil {
		return
	}
	s.stopARP()
	s.stopARP = nil
	for _, r := range s.rules {
		s.d.in(s.node, append([]string{"iptables", r[0], r[1], "-D"}, r[2:]...)...)
	}
}

// TestMetalLBHandOverL2: a Service MetalLB served (its address in the status, no ledger object,
// MetalLB's speaker answering ARP on node1) is taken over by the operator and the agents while
// a client curls it 20 times a second: the operator adopts the address, the owner agent sends
// its gratuitous ARP while the stand-in still answers (a node's MAC: a hand-over, not a
// conflict), then MetalLB is removed. No request fails but at most the one whose connection was
// open at the switch (noneFailedButTheSwitch), no ARPConflict is reported, and afterwards only
// the owner answers for the VIP.
func TestMetalLBHandOverL2(t *testing.T) {
	d := setupL2(t)
	ctx := context.Background()
	k8s := d.env.Admin
	// MetalLB's time: the operator is not installed yet.
	d.stopOperator()
	const vip = "192.0.2.40"
	web := d.lanService(t, "web", false)
	writeStatusAsMetalLB(t, k8s, web, vip)
	speaker := startMetalLBSpeaker(t, d, "node1", vip, "198.51.100.11:8080")
	eventually(t, "MetalLB's stand-in serves the VIP", func() error { _, err := d.curl("http://" + vip); return err })

	loop, start := switchFromMetalLB(t, d.dataLab, "http://"+vip, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"},
		Spec: paasv1.IPGroupSpec{Addresses: []string{"192.0.2.32-192.0.2.63"}}})
	owner := ""
	eventually(t, "an agent announces the adopted VIP", func() error {
		if owner = d.announcer(vip); owner == "" {
			return errNotYet("no announcer in the ledger")
		}
		return nil
	})
	announcedAfter := time.Since(start)
	svc := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(web), svc); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionIPAllocated); len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != vip || c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("after the switch web shows %v, condition %v; want %s kept, IPAllocated=True", svc.Status.LoadBalancer.Ingress, c, vip)
	}
	announced := time.Now()
	time.Sleep(2 * time.Second) // both answer: the stand-in and the owner
	speaker.stop()
	time.Sleep(3 * time.Second) // the agents alone
	total, rate := noneFailedButTheSwitch(t, loop, start, announced)
	t.Logf("%s adopted and announced by %s %s after the operator started; %d requests at %.1f per second, %d failed",
		vip, owner, announcedAfter.Round(time.Millisecond), total, rate, len(loop.failures))
	// Only the owner answers now, and the ledger names it.
	t.Logf("after MetalLB's removal %s answers for %s (node MACs %v)", d.owner(t, vip, ""), vip, d.macs)
	ledger := &paasv1.IP{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: vip}, ledger); err != nil || !ledger.HandOverExpected(time.Now()) {
		t.Fatalf("ledger %s: %v, annotations %v; want it marked adopted (the agents expect MetalLB's answers)", vip, err, ledger.Annotations)
	}
	var events corev1.EventList
	if err := k8s.List(ctx, &events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == nodeagent.EventARPConflict {
			t.Fatalf("the hand-over was reported as a conflict: %s", e.Message)
		}
	}
}

type errNotYet string

func (e errNotYet) Error() string { return string(e) }

// TestMetalLBHandOverBGP: a Service MetalLB served over BGP (a speaker stand-in, an FRR on the
// LAN announcing the VIP to the router and forwarding it to the backend as kube-proxy would) is
// taken over: the operator adopts the address, the agents advertise it, and the router has
// their routes before the stand-in withdraws its own. A client curls through the router at
// 20 Hz throughout: not one request fails.
func TestMetalLBHandOverBGP(t *testing.T) {
	d := setupBGP(t)
	k8s := d.env.Admin
	d.stopOperator()
	const vip, speakerIP = "203.0.113.140", "198.51.100.20"
	web := d.bgpService(t, "web", false)
	writeStatusAsMetalLB(t, k8s, web, vip)

	// MetalLB's speaker: on the LAN, in the cluster's AS, announcing the VIP; it forwards the
	// VIP to the backend through node1, masqueraded.
	d.addNS("speaker")
	d.plug("speaker", "eth0", "lan", speakerIP+"/24")
	d.in("speaker", "sysctl", "-qw", "net.ipv4.ip_forward=1")
	d.in("speaker", "ip", "route", "add", "default", "via", "198.51.100.1")
	d.in("speaker", "ip", "route", "add", "192.0.2.0/25", "via", bgpNodeIP["node1"])
	d.in("speaker", "ip", "route", "add", "blackhole", vip+"/32")
	d.in("speaker", "iptables", "-t", "nat", "-A", "PREROUTING", "-d", vip+"/32", "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", "192.0.2.11:8080")
	d.in("speaker", "iptables", "-t", "nat", "-A", "POSTROUTING", "-d", "192.0.2.11/32", "-j", "MASQUERADE")
	d.in("node1", "sysctl", "-qw", "net.ipv4.ip_forward=1")
	speaker := startFRR(t, d.lab, "speaker", `hostname speaker
router bgp 64513
 bgp router-id `+speakerIP+`
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor 198.51.100.1 remote-as 64512
 neighbor 198.51.100.1 timers 1 3
 address-family ipv4 unicast
  neighbor 198.51.100.1 activate
  network `+vip+`/32
 exit-address-family
`)
	eventually(t, "the router routes the VIP to MetalLB's speaker", func() error {
		hops, err := d.router.nextHops(vip + "/32")
		if err != nil || !slices.Equal(hops, []string{speakerIP}) {
			return fmt.Errorf("next hops %v, %v", hops, err)
		}
		return nil
	})
	eventually(t, "MetalLB's path serves the VIP", func() error { _, err := d.curl("http://" + vip); return err })

	loop, start := switchFromMetalLB(t, d.dataLab, "http://"+vip,
		&paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513}},
		&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp-vips"}, Spec: paasv1.IPGroupSpec{Addresses: []string{"203.0.113.130-203.0.113.150"},
			Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}})
	eventually(t, "the router has the agents' routes next to the speaker's", func() error {
		hops, err := d.router.nextHops(vip + "/32")
		want := []string{bgpNodeIP["node1"], bgpNodeIP["node2"], bgpNodeIP["node3"], speakerIP}
		slices.Sort(want)
		if err != nil || !slices.Equal(hops, want) {
			return fmt.Errorf("next hops %v, %v", hops, err)
		}
		return nil
	})
	ours := time.Since(start)
	// MetalLB's withdrawal, as its speaker does when it stops: the route first, then the rest.
	if _, err := speaker.vtysh("configure terminal", "router bgp 64513", "address-family ipv4 unicast", "no network "+vip+"/32"); err != nil {
		t.Fatal(err)
	}
	d.waitNextHops(t, vip, "node1", "node2", "node3")
	time.Sleep(2 * time.Second) // flows already on the speaker's path finish there
	speaker.stop()
	time.Sleep(2 * time.Second)
	total, rate := noneFailed(t, loop)
	t.Logf("the router had the agents' routes to %s %s after the operator started, before the speaker's withdrawal; %d requests at %.1f per second, 0 failed",
		vip, ours.Round(time.Millisecond), total, rate)
}

// switchFromMetalLB is the switch as a user makes it: the converted objects
// (what 'migrate metallb apply' writes), a client curling url at 20 Hz from
// then on, the three agents, then the operator. It returns the loop and when
// the operator started.
func switchFromMetalLB(t *testing.T, d *dataLab, url string, converted ...client.Object) (*curlLoop, time.Time) {
	t.Helper()
	for _, o := range converted {
		if err := d.env.Admin.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	loop := d.startCurlLoop(url)
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n)
	}
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

// noneFailedButTheSwitch is noneFailed, except that one request may fail if
// the server side reset its connection and it began between from and to, while
// the owner's gratuitous ARP moved the client from MetalLB's node to the owner.
// A connection open at that instant sends its next segments to a node that never
// saw its SYN, and the endpoint resets it. Between agents the new owner hands
// such segments on to the previous one (docs/announcement.md, "Open connections
// survive a planned move"); MetalLB's speaker is not an agent, so the one
// connection in flight at the switch is not handed on (docs/migration.md).
func noneFailedButTheSwitch(t *testing.T, loop *curlLoop, from, to time.Time) (total int, perSecond float64) {
	t.Helper()
	total, failures, perSecond := loop.finish()
	if len(failures) == 1 && len(loop.resets) == 1 && !loop.resets[0].Before(from.Add(-time.Second)) && !loop.resets[0].After(to) {
		t.Logf("the connection in flight when the client moved from MetalLB's node to the owner was reset: %s", failures[0])
	} else if len(failures) > 0 {
		t.Fatalf("%d of %d requests failed during the hand-over from MetalLB (the switch: %s to %s):\n%s", len(failures), total,
			from.Format("15:04:05.000"), to.Format("15:04:05.000"), strings.Join(failures, "\n"))
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
	eventually(t, "MetalLB writes the Service's address", func() error {
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
