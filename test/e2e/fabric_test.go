//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestBGPFabricRacks: a leaf router that names no node (frrFabricConfig: a
// listen range, remote-as external, BFD) and two racks, each with its own
// ASN, given by the Nodes' annotations; node3 also peers from an address and
// with a router ID of its own. The router gets the VIP from every node with
// that node's rack in the AS path, spreads over both racks, and the client
// reaches the VIP. A node whose annotation is wrong (another node's address)
// peers with nobody and says why, and no other node's session notices.
func TestBGPFabricRacks(t *testing.T) {
	d := setupFabric(t)
	ctx := context.Background()
	d.in("node3", "ip", "addr", "add", "198.51.100.23/24", "dev", "eth0")
	d.annotate(t, "node1", paasv1.NodeBGPASNAnnotation, "64601")
	d.annotate(t, "node2", paasv1.NodeBGPASNAnnotation, "64602")
	d.annotate(t, "node3", paasv1.NodeBGPASNAnnotation, "64602", paasv1.NodeBGPRouterIDAnnotation, "192.0.2.103",
		paasv1.NodeBGPSourceAddressAnnotation, "198.51.100.23")
	// myASN is the cluster's default; every node here overrides it.
	peer := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "leaf"},
		Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513, BFD: &paasv1.BFDSettings{}}}
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp-vips"}, Spec: paasv1.IPGroupSpec{
		Segment: "203.0.113.128/25", Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}}
	for _, o := range []client.Object{peer, group} {
		if err := d.env.Admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n)
	}
	vip := d.vipOf(t, d.bgpService(t, "web", false))

	want := map[string]string{"198.51.100.11": "64601", "198.51.100.12": "64602", "198.51.100.23": "64602"}
	testenv.Eventually(t, settle, "the router has the VIP from both racks, each with its AS path, all three in ECMP", func() error {
		got, err := d.router.pathsBy(hostRoute(vip))
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("installed paths by next hop and AS path %v, want %v", got, want)
		}
		if hops := d.router.kernelNextHops(vip); len(hops) != 3 {
			return fmt.Errorf("the kernel routes through %v", hops)
		}
		return nil
	})
	testenv.Eventually(t, settle, "curl through the router", func() error {
		body, err := d.curl("http://" + vip + "/")
		if err == nil && !strings.HasPrefix(body, "backend1 ") {
			err = fmt.Errorf("answer %q", body)
		}
		return err
	})
	testenv.Eventually(t, settle, "the router sees each node as its annotations say, BFD up", func() error {
		nbrs, err := d.router.neighbors()
		if err != nil {
			return err
		}
		wantNbr := map[string]neighbor{
			"198.51.100.11": {RemoteAs: 64601, RemoteRouterID: "198.51.100.11", State: "Established"},
			"198.51.100.12": {RemoteAs: 64602, RemoteRouterID: "198.51.100.12", State: "Established"},
			"198.51.100.23": {RemoteAs: 64602, RemoteRouterID: "192.0.2.103", State: "Established"},
		}
		for a, n := range nbrs {
			n.sessionAge = sessionAge{}
			nbrs[a] = n
		}
		if !maps.Equal(nbrs, wantNbr) {
			return fmt.Errorf("neighbours %+v, want %+v", nbrs, wantNbr)
		}
		bfd, err := d.router.bfdPeers()
		if err != nil {
			return err
		}
		for addr := range wantNbr {
			if bfd[addr] != "up" {
				return fmt.Errorf("BFD peers %v: want %s up", bfd, addr)
			}
		}
		return nil
	})
	testenv.Eventually(t, settle, "each session's status names what its node peers as", func() error {
		got := map[string]string{}
		for _, s := range d.sessions(t, "leaf") {
			got[s.Node] = fmt.Sprintf("%s AS%d %s %s BFD %s", s.State, s.LocalASN, s.RouterID, s.SourceAddress, s.BFD)
		}
		wantStatus := map[string]string{
			"node1": "Established AS64601 198.51.100.11  BFD Up",
			"node2": "Established AS64602 198.51.100.12  BFD Up",
			"node3": "Established AS64602 192.0.2.103 198.51.100.23 BFD Up",
		}
		if !maps.Equal(got, wantStatus) {
			return fmt.Errorf("sessions %q, want %q", got, wantStatus)
		}
		return nil
	})

	t.Run("a node naming an address not its own peers with nobody, says why, and the others do not notice", func(t *testing.T) {
		before, err := d.router.neighbors()
		if err != nil {
			t.Fatal(err)
		}
		read := time.Now()
		d.annotate(t, "node3", paasv1.NodeBGPSourceAddressAnnotation, "198.51.100.12") // node2's
		delete(want, "198.51.100.23")
		testenv.Eventually(t, settle, "node3's routes leave the router", func() error {
			got, err := d.router.pathsBy(hostRoute(vip))
			if err == nil && !maps.Equal(got, want) {
				err = fmt.Errorf("paths %v, want %v", got, want)
			}
			return err
		})
		testenv.Eventually(t, settle, "node3's session says why", func() error {
			for _, s := range d.sessions(t, "leaf") {
				if s.Node == "node3" && s.State == "Idle" && strings.Contains(s.Message, "198.51.100.12 is not an address of this node's interfaces") {
					return nil
				}
			}
			return fmt.Errorf("sessions %+v", d.sessions(t, "leaf"))
		})
		elapsed := time.Since(read)
		after, err := d.router.neighbors()
		if err != nil {
			t.Fatal(err)
		}
		for _, addr := range []string{"198.51.100.11", "198.51.100.12"} {
			b, a := before[addr], after[addr]
			if err := a.kept(b, elapsed); err != nil {
				t.Errorf("%s's session was reset: %v (%+v, then %+v)", addr, err, b, a)
			}
			a.sessionAge, b.sessionAge = sessionAge{}, sessionAge{}
			if a != b {
				t.Errorf("%s's neighbour changed: %+v, then %+v", addr, b, a)
			}
		}

		d.annotate(t, "node3", paasv1.NodeBGPSourceAddressAnnotation, "")
		want["198.51.100.13"] = "64602"
		testenv.Eventually(t, settle, "node3 peers again, from the kernel's choice", func() error {
			got, err := d.router.pathsBy(hostRoute(vip))
			if err == nil && !maps.Equal(got, want) {
				err = fmt.Errorf("paths %v, want %v", got, want)
			}
			return err
		})
	})
}

// sessions are the status.sessions of BGPPeer name.
func (d *dataLab) sessions(t testing.TB, name string) []paasv1.BGPSession {
	t.Helper()
	var p paasv1.BGPPeer
	if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return p.Status.Sessions
}
