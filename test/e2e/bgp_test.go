//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

func TestBGPAnnouncement(t *testing.T) {
	d := setupBGP(t)
	lab := t
	ctx := context.Background()
	peer := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"},
		Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513}}
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp-vips"}, Spec: paasv1.IPGroupSpec{
		Segment: "203.0.113.128/25",
		Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP, BGP: &paasv1.BGPAnnounce{
			Communities: []string{"65000:100", "65000:1:2"}}},
	}}
	for _, o := range []client.Object{peer, group} {
		if err := d.env.Admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n)
	}
	d.peerCondition(t, paasv1.BGPPeerEstablished, metav1.ConditionTrue, "3 of 3 sessions established")

	web := d.bgpService(t, "web", false)
	webVIP := d.vipOf(t, web)
	st := &bgpAnnouncement{d: d, lab: lab, peer: peer, web: web, webVIP: webVIP}
	st.serving(t)
	st.leaving(t)
	st.md5(t)
	st.routers(t)
	st.peerChanges(t)
}

// bgpAnnouncement is TestBGPAnnouncement's lab and what its steps share.
type bgpAnnouncement struct {
	d      *bgpLab
	lab    *testing.T
	peer   *paasv1.BGPPeer
	web    *corev1.Service
	webVIP string
}

// serving: a Cluster Service from every node, a Local one from its endpoint's.
func (st *bgpAnnouncement) serving(t *testing.T) {
	d, web, webVIP := st.d, st.web, st.webVIP
	ctx := context.Background()
	t.Run("Cluster: every node advertises, with the group's communities, and the router spreads over them", func(t *testing.T) {
		took := d.waitNextHops(t, webVIP, "node1", "node2", "node3")
		t.Logf("%s routed through 3 nodes %s after its IP was read", webVIP, took)
		paths, err := d.router.paths(webVIP + "/32")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if p.Community == nil || p.Community.String != "65000:100" || p.LargeCommunity == nil || p.LargeCommunity.String != "65000:1:2" {
				t.Errorf("path %+v: want community 65000:100 and large community 65000:1:2", p)
			}
		}
		testenv.Eventually(t, settle, "curl through the router", func() error {
			body, err := d.curl("http://" + webVIP + "/")
			if err == nil && !strings.HasPrefix(body, "backend1 ") {
				err = fmt.Errorf("answer %q", body)
			}
			return err
		})
		testenv.Eventually(t, settle, "the Service says who advertises it", func() error {
			var s corev1.Service
			if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(web), &s); err != nil {
				return err
			}
			c := meta.FindStatusCondition(s.Status.Conditions, paasv1.ConditionAnnounced)
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "advertised by node1, node2, node3 (BGP)") {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
		// What a user sees (the docs show it).
		kc, _ := d.env.KubeconfigFile(t.TempDir())
		kubectl := filepath.Join(d.root, "bin", "k8s", "kubectl")
		testenv.Eventually(t, settle, "every session reports its prefix", func() error {
			out := d.run(kubectl, "--kubeconfig", kc, "get", "bgppeer", "router", "-o", `jsonpath={.status.sessions[*].prefixesSent}`)
			if out != "1 1 1" {
				return fmt.Errorf("prefixes sent: %q", out)
			}
			return nil
		})
		t.Logf("kubectl get bgppeers,ips -o wide:\n%s", d.run(kubectl, "--kubeconfig", kc, "get", "bgppeers,ips", "-o", "wide"))
		t.Logf("sessions:\n%s", d.run(kubectl, "--kubeconfig", kc, "get", "bgppeer", "router", "-o",
			`jsonpath={range .status.sessions[*]}{.node}{"\t"}{.state}{"\t"}{.since}{"\t"}{.prefixesSent}{"\n"}{end}`))
	})

	t.Run("Local: only the node with the endpoint advertises, and withdraws when it goes", func(t *testing.T) {
		api := d.bgpService(t, "api", true)
		vip := d.vipOf(t, api)
		d.waitNextHops(t, vip, "node1")
		body, err := d.curl("http://" + vip + "/")
		if err != nil || body != "backend1 203.0.113.10\n" {
			t.Fatalf("curl: %q, %v; want backend1 to see the client's own address", body, err)
		}
		var slice discoveryv1.EndpointSlice
		if err := d.env.Admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "api-1"}, &slice); err != nil {
			t.Fatal(err)
		}
		slice.Endpoints[0].Conditions.Ready = ptr.To(false)
		if err := d.env.Admin.Update(ctx, &slice); err != nil {
			t.Fatal(err)
		}
		t.Logf("withdrawn %s after the last local endpoint went", d.waitNextHops(t, vip))
		testenv.Eventually(t, settle, "the Service says nobody advertises it", func() error {
			var s corev1.Service
			if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(api), &s); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(s.Status.Conditions, paasv1.ConditionAnnounced); c == nil || c.Reason != paasv1.ReasonNoAnnouncer {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
		if err := d.env.Admin.Delete(ctx, api); err != nil {
			t.Fatal(err)
		}
	})
}

// leaving: a node drained, excluded, restarted or hung stops advertising, no new connection failing.
func (st *bgpAnnouncement) leaving(t *testing.T) {
	d, lab, webVIP := st.d, st.lab, st.webVIP
	t.Run("drain: the node withdraws before its agent stops, no new connection fails", func(t *testing.T) {
		node := d.clientPath(t, webVIP)
		loop := d.curlLoop("http://" + webVIP + "/")
		time.Sleep(500 * time.Millisecond)
		move := pathMove{from: time.Now()}
		d.cordon(t, node, true)
		rest := slices.DeleteFunc([]string{"node1", "node2", "node3"}, func(n string) bool { return n == node })
		took := d.waitNextHops(t, webVIP, rest...)
		move.to = time.Now()
		d.stopAgent(node) // the drain evicts the agent last
		time.Sleep(time.Second)
		ok, failed := endAcrossMoves(t, loop, move)
		t.Logf("cordoned %s, the client's path: withdrawn after %s; %d requests, %d failed", node, took, ok+failed, failed)
		d.cordon(t, node, false)
		d.startAgent(lab, node) // runs on after this subtest
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
	})

	t.Run("exclusion label: the node withdraws, no new connection fails, and advertises again once the label goes", func(t *testing.T) {
		node := d.clientPath(t, webVIP)
		loop := d.curlLoop("http://" + webVIP + "/")
		time.Sleep(500 * time.Millisecond)
		move := pathMove{from: time.Now()}
		d.setNodeLabel(t, node, corev1.LabelNodeExcludeBalancers, "true")
		rest := slices.DeleteFunc([]string{"node1", "node2", "node3"}, func(n string) bool { return n == node })
		took := d.waitNextHops(t, webVIP, rest...)
		move.to = time.Now()
		time.Sleep(time.Second)
		loop.atLeast(t, 20)
		ok, failed := endAcrossMoves(t, loop, move)
		t.Logf("excluded %s: withdrawn after %s; %d requests, %d failed", node, took, ok+failed, failed)
		d.setNodeLabel(t, node, corev1.LabelNodeExcludeBalancers, "")
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
	})

	t.Run("agent restart: it withdraws before it stops, no new connection fails", func(t *testing.T) {
		node := d.clientPath(t, webVIP)
		loop := d.curlLoop("http://" + webVIP + "/")
		time.Sleep(500 * time.Millisecond)
		away := pathMove{from: time.Now()}
		d.stopAgent(node) // SIGTERM, as a rolling update does
		rest := slices.DeleteFunc([]string{"node1", "node2", "node3"}, func(n string) bool { return n == node })
		d.waitNextHops(t, webVIP, rest...)
		away.to = time.Now()
		back := pathMove{from: time.Now()}
		d.startAgent(lab, node)
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
		back.to = time.Now()
		time.Sleep(500 * time.Millisecond)
		ok, failed := endAcrossMoves(t, loop, away, back)
		t.Logf("restarted %s's agent, the client's path: %d requests, %d failed", node, ok+failed, failed)
	})

	t.Run("a hung node's routes go when the router's hold timer fires", func(t *testing.T) {
		// A hung node: its agent stops sending keepalives, nothing closes the
		// session, only the router's hold timer (3 s) can tell.
		cmd := d.agents["node2"]
		if cmd == nil {
			t.Fatal("node2's agent is not running: an earlier subtest failed before restarting it")
		}
		agent := cmd.Process
		if err := agent.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// Resumed also when a wait below fails: a stopped agent never handles the
		// lab's SIGTERM, and the cleanup would wait for it forever.
		defer func() { _ = agent.Signal(syscall.SIGCONT) }()
		took := d.waitNextHops(t, webVIP, "node1", "node3")
		t.Logf("node2's agent frozen: its route withdrawn by the router after %s (hold time 3 s)", took)
		if took < 1500*time.Millisecond || took > 5*time.Second {
			t.Errorf("withdrawn after %s, want when the hold time (3 s) runs out", took)
		}
		if err := agent.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
	})
}

// md5: sessions with a password, also while the API server is out of reach.
func (st *bgpAnnouncement) md5(t *testing.T) {
	d, lab, peer, webVIP := st.d, st.lab, st.peer, st.webVIP
	ctx := context.Background()
	t.Run("MD5: a wrong password keeps the sessions down and says so, the right one brings them up", func(t *testing.T) {
		if _, err := d.router.vtysh("configure terminal", "router bgp 64512", "neighbor nodes password s3cret"); err != nil {
			t.Fatal(err)
		}
		d.waitNextHops(t, webVIP)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: paasv1.DefaultNamespace, Name: "router-md5",
			Labels: map[string]string{paasv1.BGPPasswordLabel: "true"}},
			StringData: map[string]string{"password": "wrong"}}
		if err := d.env.Admin.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(peer), peer); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(peer.DeepCopy())
		peer.Spec.PasswordSecret = &paasv1.SecretKeyRef{Name: "router-md5", Key: "password"}
		if err := d.env.Admin.Patch(ctx, peer, patch); err != nil {
			t.Fatal(err)
		}
		d.peerCondition(t, paasv1.BGPPeerEstablished, metav1.ConditionFalse, "0 of 3 sessions established", "node1: ")
		time.Sleep(3 * time.Second) // time for a session to come up, if it wrongly could
		d.peerCondition(t, paasv1.BGPPeerEstablished, metav1.ConditionFalse, "0 of 3 sessions established")
		if hops, _ := d.router.nextHops(webVIP + "/32"); len(hops) > 0 {
			t.Fatalf("routes through %v with a wrong password", hops)
		}
		secret.StringData = map[string]string{"password": "s3cret"}
		if err := d.env.Admin.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		d.peerCondition(t, paasv1.BGPPeerEstablished, metav1.ConditionTrue, "3 of 3 sessions established")
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
	})

	t.Run("MD5 and an API server the agents cannot reach for 30s: every session stays up, also through a node lost meanwhile", func(t *testing.T) {
		d.peerCondition(t, paasv1.BGPPeerEstablished, metav1.ConditionTrue, "3 of 3 sessions established")
		if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(peer), peer); err != nil {
			t.Fatal(err)
		}
		if peer.Spec.PasswordSecret == nil {
			t.Fatal("runs after the MD5 subtest: the router's sessions must have a password")
		}
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
		d.forwardersDown()
		defer d.forwardersUp()
		// node3's agent stops 10 s in: the others see it leave (a pass with
		// the API server away, which must not cost them their passwords).
		want := []string{"node1", "node2", "node3"}
		for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(time.Second) {
			if len(want) == 3 && time.Since(start) > 10*time.Second {
				d.stopAgent("node3")
				want = want[:2]
				d.waitNextHops(t, webVIP, want...)
			}
			hops, err := d.router.nextHops(webVIP + "/32")
			if err != nil {
				t.Fatal(err)
			}
			if nodes := nodesOf(hops); !slices.Equal(nodes, want) {
				t.Fatalf("%s into the outage: the router routes %s through %v, want %v: a session or its route dropped", time.Since(start).Round(time.Second), webVIP, nodes, want)
			}
		}
		d.forwardersUp()
		d.startAgent(lab, "node3")
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
		d.peerCondition(t, paasv1.BGPPeerEstablished, metav1.ConditionTrue, "3 of 3 sessions established")
		before := peer.DeepCopy()
		before.Status.Sessions = slices.DeleteFunc(before.Status.Sessions, func(s paasv1.BGPSession) bool { return s.Node == "node3" })
		d.noFlap(t, before)
	})
}

// routers: an IPv6 peer, a group for one router only, and nothing imported.
func (st *bgpAnnouncement) routers(t *testing.T) {
	d, peer, webVIP := st.d, st.peer, st.webVIP
	ctx := context.Background()
	t.Run("IPv6: /128 routes to an IPv6 peer, with the nodes' own IPv6 next hops", func(t *testing.T) {
		peer6 := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router6"},
			Spec: paasv1.BGPPeerSpec{PeerAddress: "2001:db8:1::1", PeerASN: 64512, MyASN: 64513}}
		group6 := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp-vips6"}, Spec: paasv1.IPGroupSpec{
			Segment: "2001:db8:100::/112", Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web6", Annotations: map[string]string{"vip.paas.org/ipgroup": "bgp-vips6"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}}, AllocateLoadBalancerNodePorts: ptr.To(false)}}
		for _, o := range []client.Object{peer6, group6, svc} {
			if err := d.env.Admin.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		vip := d.vipOf(t, svc)
		d.waitNextHops(t, vip, "node1", "node2", "node3")
		if hops, _ := d.router.nextHops(hostRoute(vip)); !slices.Equal(hops, []string{"2001:db8:1::11", "2001:db8:1::12", "2001:db8:1::13"}) {
			t.Errorf("next hops %v, want the nodes' IPv6 addresses", hops)
		}
	})

	t.Run("announce.bgp.peers and localPref: a group for an iBGP router only; no other session flaps", func(t *testing.T) {
		router2 := d.addRouter(t, "router2", "198.51.100.2", 64513)
		var before paasv1.BGPPeer
		if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(peer), &before); err != nil {
			t.Fatal(err)
		}
		ibgp := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router2"},
			Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.2", PeerASN: 64513, MyASN: 64513}}
		internal := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "internal-vips"}, Spec: paasv1.IPGroupSpec{
			Segment: "192.0.2.192/27", AutoAssign: ptr.To(false),
			Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP, BGP: &paasv1.BGPAnnounce{Peers: []string{"router2"}, LocalPref: ptr.To[uint32](200)}}}}
		for _, o := range []client.Object{ibgp, internal} {
			if err := d.env.Admin.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		svc := d.createService(t, "internal", false, map[string]string{"192.0.2.11": "node1"}, "vip.paas.org/ipgroup", "internal-vips")
		vip := d.vipOf(t, svc)
		router2.waitNextHops(t, vip, "node1", "node2", "node3")
		paths, err := router2.paths(hostRoute(vip))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if p.LocPrf != 200 {
				t.Errorf("path %+v: want local preference 200", p)
			}
		}
		// Routes of groups that name no peer go to every peer, the new one too.
		router2.waitNextHops(t, webVIP, "node1", "node2", "node3")
		time.Sleep(time.Second)
		if hops, _ := d.router.nextHops(hostRoute(vip)); len(hops) > 0 {
			t.Errorf("the eBGP router got %s through %v: the group advertises to router2 only", vip, hops)
		}
		d.noFlap(t, &before)
	})

	t.Run("import nothing: a route the first router announces never reaches a second router through the nodes", func(t *testing.T) {
		router3 := d.addRouter(t, "router3", "198.51.100.3", 64514)
		other := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router3"},
			Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.3", PeerASN: 64514, MyASN: 64513}}
		if err := d.env.Admin.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := d.env.Admin.Delete(ctx, other); err != nil {
				t.Error(err)
			}
		}()
		// The second router gets the VIPs: the sessions are up, export works.
		router3.waitNextHops(t, webVIP, "node1", "node2", "node3")
		learned := "198.51.100.0/24"
		if _, err := d.router.vtysh("configure terminal", "router bgp 64512", "address-family ipv4 unicast", "network "+learned); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := d.router.vtysh("configure terminal", "router bgp 64512", "address-family ipv4 unicast", "no network "+learned); err != nil {
				t.Error(err)
			}
		}()
		// The first router sends it to every node...
		for _, n := range []string{"node1", "node2", "node3"} {
			testenv.Eventually(t, settle, "router announces "+learned+" to "+n, func() error {
				out, err := d.router.vtysh("show bgp ipv4 unicast neighbors " + bgpNodeIP[n] + " advertised-routes json")
				if err != nil {
					return err
				}
				if !strings.Contains(out, `"`+learned+`"`) {
					return fmt.Errorf("advertised: %s", out)
				}
				return nil
			})
		}
		// ... and no node passes it on, to the second router or back.
		for range 5 {
			time.Sleep(time.Second)
			for _, r := range []*frr{router3, d.router} {
				hops, err := r.nextHops(learned)
				if err != nil {
					t.Fatal(err)
				}
				if nodes := nodesOf(hops); len(nodes) > 0 {
					t.Fatalf("router %s got %s from %v: the nodes must import nothing", r.ns, learned, nodes)
				}
			}
		}
	})
}

// peerChanges: a duplicate BGPPeer, graceful restart, and the Service's deletion.
func (st *bgpAnnouncement) peerChanges(t *testing.T) {
	d, lab, peer, web, webVIP := st.d, st.lab, st.peer, st.web, st.webVIP
	ctx := context.Background()
	t.Run("a second BGPPeer with the router's address is left out and says so; the first keeps its sessions", func(t *testing.T) {
		var before paasv1.BGPPeer
		if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(peer), &before); err != nil {
			t.Fatal(err)
		}
		dup := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router-again"},
			Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513}}
		if err := d.env.Admin.Create(ctx, dup); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := d.env.Admin.Delete(ctx, dup); err != nil {
				t.Error(err)
			}
		}()
		testenv.Eventually(t, settle, "each node reports why it leaves router-again out", func() error {
			if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(dup), dup); err != nil {
				return err
			}
			if len(dup.Status.Sessions) != 3 {
				return fmt.Errorf("sessions %+v", dup.Status.Sessions)
			}
			for _, s := range dup.Status.Sessions {
				if s.State == paasv1.SessionEstablished || !strings.Contains(s.Message, "also that of BGPPeer router,") {
					return fmt.Errorf("session %+v: want not established, naming the older BGPPeer", s)
				}
			}
			return nil
		})
		// The others converge: a new VIP still reaches the router through every node.
		svc := d.bgpService(t, "after-dup", false)
		d.waitNextHops(t, d.vipOf(t, svc), "node1", "node2", "node3")
		d.noFlap(t, &before)
		if err := d.env.Admin.Delete(ctx, svc); err != nil {
			t.Error(err)
		}
	})

	t.Run("graceful restart: an agent restart keeps the node's route at the router, no request fails", func(t *testing.T) {
		if _, err := d.router.vtysh("configure terminal", "router bgp 64512", "bgp graceful-restart"); err != nil {
			t.Fatal(err)
		}
		if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(peer), peer); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(peer.DeepCopy())
		peer.Spec.GracefulRestart = ptr.To(true)
		if err := d.env.Admin.Patch(ctx, peer, patch); err != nil {
			t.Fatal(err)
		}
		d.peerCondition(t, paasv1.BGPPeerEstablished, metav1.ConditionTrue, "3 of 3 sessions established")
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
		node := d.clientPath(t, webVIP)
		loop := d.curlLoop("http://" + webVIP + "/")
		var missing atomic.Int64
		done := make(chan struct{})
		go func() { // the restarting node's next hop must never leave the router
			for {
				select {
				case <-done:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if hops, err := d.router.nextHops(hostRoute(webVIP)); err == nil && !slices.Contains(nodesOf(hops), node) {
					missing.Add(1)
				}
			}
		}()
		time.Sleep(500 * time.Millisecond)
		start := time.Now()
		d.stopAgent(node)
		d.startAgent(lab, node)
		testenv.Eventually(t, settle, node+"'s new agent re-establishes its session", func() error {
			var p paasv1.BGPPeer
			if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(peer), &p); err != nil {
				return err
			}
			for _, s := range p.Status.Sessions {
				// Since is kept to the second: a session up in start's second is new.
				if s.Node == node && s.State == "Established" && s.Since != nil && !s.Since.Time.Before(start.Truncate(time.Second)) {
					return nil
				}
			}
			return fmt.Errorf("sessions %+v", p.Status.Sessions)
		})
		time.Sleep(time.Second)
		close(done)
		ok, failed, firstErr := loop.end()
		t.Logf("restarted %s's agent with graceful restart: %d requests, %d failed; its next hop missing in %d polls", node, ok+failed, failed, missing.Load())
		if missing.Load() > 0 || failed > 0 {
			t.Fatalf("the router lost %s's route in %d polls; %d of %d requests failed (first: %v)", node, missing.Load(), failed, ok+failed, firstErr)
		}
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
	})

	t.Run("Service deleted: every node withdraws", func(t *testing.T) {
		if err := d.env.Admin.Delete(ctx, web); err != nil {
			t.Fatal(err)
		}
		t.Logf("withdrawn after %s", d.waitNextHops(t, webVIP))
		if _, err := d.curl("http://" + webVIP + "/"); err == nil {
			t.Fatal("the VIP still answers")
		}
	})
}
