//go:build root && envtest

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestAddressTrust: the agents carry an address only where it is safe, on
// each data plane. Each case is what must happen on the real agents:
// the rules on the nodes (nft list ruleset / iptables-save), curl from the
// client, and what the Service says.
func TestAddressTrust(t *testing.T) {
	for _, plane := range []string{"nftables", "iptables"} {
		t.Run(plane, func(t *testing.T) { testAddressTrust(t, plane) })
	}
}

// mentions reports whether a rule dump names addr (as itself, not as the
// beginning of a longer address).
func mentions(dump, addr string) bool {
	return regexp.MustCompile(`(^|[^0-9.:])` + regexp.QuoteMeta(addr) + `([^0-9]|$)`).MatchString(dump)
}

func testAddressTrust(t *testing.T, plane string) {
	// Kubernetes 1.36 refuses a new 010.0.0.0/8 in loadBalancerSourceRanges,
	// but keeps one stored by an older release; this API server stores it as
	// an older one did.
	d := setup(t, "feature-gates=StrictIPCIDRValidation=false")
	ctx := context.Background()
	k8s := d.env.Admin
	d.startAgent(t, "node1", "--dataplane", plane)
	d.startAgent(t, "node2", "--dataplane", plane)
	d.via("node1")
	if err := k8s.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/25",
		ExcludedIPs: []string{"192.0.2.0"}, Announce: &paasv1.Announce{Mode: paasv1.AnnounceNone}}}); err != nil {
		t.Fatal(err)
	}
	backends := map[string]string{"198.51.100.11": "node1", "198.51.100.12": "node2"}
	service := func(name string) *corev1.Service { return d.createService(t, name, false, backends) }
	allocated := func(svc *corev1.Service) string { return d.vipOf(t, svc) }
	// reported waits until the agents say on svc, with reason, that they
	// refuse something, and an Event of theirs tells it too.
	reported := func(svc *corev1.Service, reason, inMessage string) {
		t.Helper()
		testenv.Eventually(t, settle, svc.Name+" reports "+reason, func() error {
			got := &corev1.Service{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), got); err != nil {
				return err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, paasv1.ConditionProgrammed)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, inMessage) {
				return fmt.Errorf("condition %s: %+v", paasv1.ConditionProgrammed, c)
			}
			return eventFor(ctx, k8s, got, reason, inMessage)
		})
	}
	cleared := func(svc *corev1.Service) {
		t.Helper()
		testenv.Eventually(t, settle, svc.Name+" reports nothing refused", func() error {
			got := &corev1.Service{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), got); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, paasv1.ConditionProgrammed); c != nil {
				return fmt.Errorf("still %+v", c)
			}
			return nil
		})
	}
	notProgrammed := func(what string, addrs ...string) {
		t.Helper()
		for _, node := range []string{"node1", "node2"} {
			dump := d.ruleset(node)
			for _, a := range addrs {
				if mentions(dump, a) {
					t.Fatalf("%s: %s has rules for %s:\n%s", what, node, a, dump)
				}
			}
		}
	}

	web := service("web")
	vip := allocated(web)
	testenv.Eventually(t, settle, "web is served (the lab works)", func() error { _, err := d.curl("http://" + vip); return err })
	st := &addressTrust{d: d, k8s: k8s, service: service, allocated: allocated, reported: reported, cleared: cleared, notProgrammed: notProgrammed, web: web, vip: vip}
	st.ownAddresses(t)
	st.forged(t)
}

// addressTrust is testAddressTrust's lab and what its steps share.
type addressTrust struct {
	d             *dataLab
	k8s           client.Client
	service       func(string) *corev1.Service
	allocated     func(*corev1.Service) string
	reported      func(*corev1.Service, string, string)
	cleared       func(*corev1.Service)
	notProgrammed func(string, ...string)
	web           *corev1.Service
	vip           string
}

// heldAddressListedByNode: Service name is served, then Node node joins with
// its address in status.addresses (view: its agent publishes a NodeView). The
// Service keeps the address with nothing refused, node1 and node2 go on
// programming and serving it, the ledger names node and node gets a Warning
// Event; once node is gone the ledger names no one.
func heldAddressListedByNode(t *testing.T, st *addressTrust, name, node string, view bool) {
	d, k8s := st.d, st.k8s
	ctx := context.Background()
	svc := st.service(name)
	addr := st.allocated(svc)
	testenv.Eventually(t, settle, name+" is served", func() error { _, err := d.curl("http://" + addr); return err })
	d.addNode(t, node, addr, nil)
	if view {
		d.publishView(t, node)
	}
	claimedBy := func(want string) func() error {
		return func() error {
			var ip paasv1.IP
			if err := k8s.Get(ctx, client.ObjectKey{Name: addr}, &ip); err != nil {
				return err
			}
			if got := ip.Annotations[paasv1.ClaimedByAnnotation]; got != want || ip.Spec.ReservedBy != "" {
				return fmt.Errorf("claimed-by %q, reservedBy %q", got, ip.Spec.ReservedBy)
			}
			return nil
		}
	}
	testenv.Eventually(t, settle, "the ledger names "+node, claimedBy(node))
	testenv.Eventually(t, settle, node+" is told", func() error {
		return nodeEventFor(ctx, k8s, node, paasv1.EventClaimsServiceAddress, addr)
	})
	for range 5 {
		if _, err := d.curl("http://" + addr); err != nil {
			t.Fatalf("%s is no longer served: %v", name, err)
		}
		for _, n := range []string{"node1", "node2"} {
			if !mentions(d.ruleset(n), addr) {
				t.Fatalf("%s no longer programs %s", n, addr)
			}
		}
		got := &corev1.Service{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), got); err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{paasv1.ConditionProgrammed, paasv1.ConditionAddressConflict} {
			if c := meta.FindStatusCondition(got.Status.Conditions, c); c != nil {
				t.Fatalf("a Node's word cost %s its address: %+v", name, c)
			}
		}
		time.Sleep(time.Second)
	}
	objs := []client.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}}
	if view {
		// The garbage collector deletes the view with its Node (it owns it);
		// this lab runs no kube-controller-manager, so the test does.
		objs = append(objs, &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: node}})
	}
	for _, o := range objs {
		if err := k8s.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, settle, "the ledger names no one", claimedBy(""))
}

// nodeEventFor reports whether a Warning Event with reason about Node node
// says inMessage.
func nodeEventFor(ctx context.Context, c client.Client, node, reason, inMessage string) error {
	var events corev1.EventList
	if err := c.List(ctx, &events); err != nil {
		return err
	}
	var seen []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name != node || e.Reason != reason {
			continue
		}
		if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, inMessage) {
			return nil
		}
		seen = append(seen, e.Message)
	}
	return fmt.Errorf("no Warning Event %s on Node %s saying %q (saw %q)", reason, node, inMessage, seen)
}

// ownAddresses: a Node's address, a node naming web's address, a Node with no agent, an address on a node's interface.
func (st *addressTrust) ownAddresses(t *testing.T) {
	d, k8s, web, vip := st.d, st.k8s, st.web, st.vip
	ctx := context.Background()
	t.Run("a Node's address a Service holds: the Service keeps it, the other nodes carry it, the Node is told and named on the ledger", func(t *testing.T) {
		// A Node that comes later with the address a Service holds (the
		// operator never hands a free one out), and its agent, which
		// publishes its NodeView. A node's kubelet writes its own Node: what
		// it says may cost only that node.
		heldAddressListedByNode(t, st, "web2", "node3", true)
	})

	t.Run("a node's agent naming web's address as the node's own (its view, its interfaces): web is still carried, and in a group no node announces the claim is ignored", func(t *testing.T) {
		claimedVIPStaysCarried(t, d, web, vip)
	})

	t.Run("the address of a Node with no agent: the same, that Node's conflict", func(t *testing.T) {
		heldAddressListedByNode(t, st, "web3", "node4", false)
	})

	t.Run("an address on a node's own interface: that node refuses it, the other carries it", func(t *testing.T) {
		d.in("node1", "ip", "addr", "add", vip+"/32", "dev", "lo")
		testenv.Eventually(t, settle, "node1 lets go of "+vip, func() error {
			if mentions(d.ruleset("node1"), vip) {
				return fmt.Errorf("node1 still programs it")
			}
			if !mentions(d.ruleset("node2"), vip) {
				return fmt.Errorf("node2 does not program it")
			}
			return eventFor(ctx, k8s, web, paasv1.ReasonLocalAddress, "node node1: "+vip+" is on interface lo")
		})
		d.via("node2")
		if _, err := d.curl("http://" + vip); err != nil {
			t.Fatalf("node2 must still serve it: %v", err)
		}
		d.in("node1", "ip", "addr", "del", vip+"/32", "dev", "lo")
		d.via("node1")
		testenv.Eventually(t, settle, "node1 serves it again", func() error { _, err := d.curl("http://" + vip); return err })
		got := &corev1.Service{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(web), got); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, paasv1.ConditionProgrammed); c != nil {
			t.Fatalf("one node's refusal is its Event, not the shared condition: %+v", c)
		}
	})
}

// forged: source ranges, and a status with no ledger object or another Service's.
func (st *addressTrust) forged(t *testing.T) {
	d, k8s, service, reported, cleared, notProgrammed, web, vip := st.d, st.k8s, st.service, st.reported, st.cleared, st.notProgrammed, st.web, st.vip
	ctx := context.Background()
	// A patch, not an update: the agents and the operator write the status
	// meanwhile, which an update would conflict with.
	setRanges := func(t *testing.T, ranges []string) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"loadBalancerSourceRanges": ranges}})
		if err := k8s.Patch(ctx, web, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		desc   string
		ranges []string
	}{
		{desc: "010.0.0.0/8 next to a range that admits the client: the client is denied all the same", ranges: []string{"010.0.0.0/8", "203.0.113.0/24"}},
		{desc: "010.0.0.0/8 alone: denied, not open to everyone", ranges: []string{"010.0.0.0/8"}},
	} {
		t.Run("loadBalancerSourceRanges "+tc.desc, func(t *testing.T) {
			setRanges(t, tc.ranges)
			reported(web, paasv1.ReasonInvalidSourceRanges, `"010.0.0.0/8"`)
			testenv.Eventually(t, settle, "the client is refused", func() error { return d.refused("http://" + vip) })
			setRanges(t, []string{"203.0.113.0/24"})
			cleared(web)
			testenv.Eventually(t, settle, "the client is admitted once the ranges parse", func() error { _, err := d.curl("http://" + vip); return err })
		})
	}

	t.Run("a forged status (no ledger object; a ledger naming another Service): refused by the API server, and never programmed", func(t *testing.T) {
		// The operator is down: nothing repairs the forged statuses.
		d.stopOperator()
		forged := service("forged")
		thief := service("thief")
		if err := k8s.Patch(ctx, thief, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"ports":[{"name":"http","port":9090,"targetPort":"http"}]}}`))); err != nil {
			t.Fatal(err)
		}
		forge := func(svc *corev1.Service, ip string) error {
			patch := fmt.Sprintf(`{"status":{"loadBalancer":{"ingress":[{"ip":%q,"ipMode":"Proxy"}]}}}`, ip)
			return k8s.Status().Patch(ctx, svc, client.RawPatch(types.MergePatchType, []byte(patch)))
		}
		if err := forge(forged, "192.0.2.200"); !apierrors.IsForbidden(err) {
			t.Fatalf("an admin writing an address into the status: want the admission policy's refusal, got %v", err)
		}
		// Without the policy (an install that left it out), the agents are the
		// last line: they trust the ledger, not the status.
		if err := k8s.Delete(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "vip-allocator-service-status-writers"}}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "the forged statuses are written", func() error {
			if err := forge(forged, "192.0.2.200"); err != nil {
				return err
			}
			return forge(thief, vip)
		})
		reported(forged, paasv1.ReasonNotInLedger, "192.0.2.200 is in the status of Service default/forged but the ledger")
		reported(thief, paasv1.ReasonNotInLedger, vip+" is in the status of Service default/thief")
		notProgrammed("forged status", "192.0.2.200")
		if _, err := d.curl("http://192.0.2.200"); err == nil {
			t.Fatal("a forged address is served")
		}
		if err := d.refused("http://" + vip + ":9090"); err != nil {
			t.Fatalf("the thief's port on web's address: %v", err)
		}
		if _, err := d.curl("http://" + vip); err != nil {
			t.Fatalf("web, which the ledger names, must still be served: %v", err)
		}
	})
}

// eventFor checks that an agent raised a Warning Event with reason on svc
// whose message holds inMessage.
func eventFor(ctx context.Context, c client.Client, svc *corev1.Service, reason, inMessage string) error {
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(svc.Namespace)); err != nil {
		return err
	}
	var seen []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name != svc.Name || e.Reason != reason {
			continue
		}
		if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, inMessage) {
			return nil
		}
		seen = append(seen, e.Message)
	}
	return fmt.Errorf("no Warning Event %s on %s saying %q (saw %q)", reason, svc.Name, inMessage, seen)
}

// TestAddressTrustL2: on the wire, a Node that comes to list an address a
// Service holds takes it from no one: the ledger names that Node, and a node
// of the others goes on answering ARP for it.
func TestAddressTrustL2(t *testing.T) {
	d, web, vip, _ := announcedLab(t)
	ctx := context.Background()
	k8s := d.env.Admin

	// A Node joins with the address (a host that was given it by hand, say),
	// and its agent publishes its view.
	d.addNode(t, "node4", vip, nil)
	d.publishView(t, "node4")
	testenv.Eventually(t, settle, "the ledger names node4", func() error {
		var ip paasv1.IP
		if err := k8s.Get(ctx, client.ObjectKey{Name: vip}, &ip); err != nil {
			return err
		}
		if got := ip.Annotations[paasv1.ClaimedByAnnotation]; got != "node4" {
			return fmt.Errorf("claimed-by %q", got)
		}
		return nil
	})
	d.owner(t, vip, "node4")
	got := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(web), got); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, paasv1.ConditionProgrammed); c != nil {
		t.Fatalf("condition %s: %+v", paasv1.ConditionProgrammed, c)
	}
	if err := k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node4"}}); err != nil {
		t.Fatal(err)
	}
	// The garbage collector's part (this lab runs none): the view goes with its Node.
	if err := k8s.Delete(ctx, &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: "node4"}}); err != nil {
		t.Fatal(err)
	}
	d.owner(t, vip, "")
}

// claimAsNode writes what a compromised agent of node may write: vip as one
// of the node's addresses in its interfaces annotation and in its NodeView's
// interfaces, with the agent's own credentials. The view's addresses are the
// Node's: the API server refuses the agent's attempt to add vip there.
func claimAsNode(t testing.TB, d *dataLab, node, vip string) {
	t.Helper()
	ctx := context.Background()
	agent, err := client.New(d.env.AgentConfig(node), client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ifaces := fmt.Sprintf(`[{"name":"eth0","addrs":["192.0.2.250/24","%s/32"]}]`, vip)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, paasv1.NodeInterfacesAnnotation, ifaces)
	if err := agent.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	d.viewShows(t, node, "exists", func(*paasv1.NodeView) bool { return true })
	var view paasv1.NodeView
	if err := agent.Get(ctx, client.ObjectKey{Name: node}, &view); err != nil {
		t.Fatal(err)
	}
	forged := view.DeepCopy()
	forged.Spec.Addresses = append(forged.Spec.Addresses, paasv1.NodeViewAddress{Type: string(corev1.NodeInternalIP), Address: vip})
	if err := agent.Update(ctx, forged); !apierrors.IsForbidden(err) {
		t.Fatalf("the agent of %s added %s to its view's addresses: %v", node, vip, err)
	}
	view.Spec.Interfaces = []paasv1.NodeViewInterface{{Name: "eth0", Addrs: []string{"192.0.2.250/24", vip + "/32"}}}
	if err := agent.Update(ctx, &view); err != nil {
		t.Fatal(err)
	}
}

// claimedVIPStaysCarried: node5's agent (its credentials, no process) names
// web's vip as its node's own; web stays served with nothing refused, and the
// operator, web's group being announced by no node, ignores the claim.
func claimedVIPStaysCarried(t *testing.T, d *dataLab, web *corev1.Service, vip string) {
	ctx := context.Background()
	k8s := d.env.Admin
	d.addNode(t, "node5", "192.0.2.250", nil)
	claimAsNode(t, d, "node5", vip)
	for range 5 {
		// The lab's group is announced by no node (mode None): what a node's
		// agent publishes counts in layer-2 groups only, so the ledger names
		// no one.
		var ip paasv1.IP
		if err := k8s.Get(ctx, client.ObjectKey{Name: vip}, &ip); err != nil {
			t.Fatal(err)
		}
		if got := ip.Annotations[paasv1.ClaimedByAnnotation]; got != "" || ip.Spec.ReservedBy != "" {
			t.Fatalf("claimed-by %q, reservedBy %q: a node's claim counted in a group no node announces", got, ip.Spec.ReservedBy)
		}
		if _, err := d.curl("http://" + vip); err != nil {
			t.Fatalf("web is no longer served: %v", err)
		}
		got := &corev1.Service{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(web), got); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, paasv1.ConditionProgrammed); c != nil {
			t.Fatalf("a node's word refused web's address: %+v", c)
		}
		time.Sleep(time.Second)
	}
	for _, o := range []client.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node5"}}, &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: "node5"}}} {
		if err := k8s.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}
