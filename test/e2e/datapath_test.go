//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestDataPath runs the data-path scenarios on each data plane.
func TestDataPath(t *testing.T) {
	for _, plane := range []string{"nftables", "iptables"} {
		t.Run(plane, func(t *testing.T) { testDataPath(t, plane) })
	}
}

func testDataPath(t *testing.T, plane string) {
	d := setup(t)
	ctx := context.Background()
	k8s := d.env.Admin

	// The node's own rules, which the agent must leave byte for byte.
	d.in("node1", "iptables", "-t", "nat", "-N", "NODE-OWN")
	d.in("node1", "iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "198.51.100.0/24", "-j", "NODE-OWN")
	d.in("node1", "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT")
	// Rules in every built-in chain either plane or the test's kube-proxy stand-in touches, as
	// on a real node: iptables-nft creates a built-in chain only when first used, and would
	// leave the empty chain behind.
	d.in("node1", "iptables", "-t", "nat", "-A", "PREROUTING", "-s", "198.51.100.0/24", "-j", "NODE-OWN")
	d.in("node1", "iptables", "-t", "nat", "-A", "OUTPUT", "-s", "198.51.100.0/24", "-j", "NODE-OWN")
	d.in("node1", "iptables", "-A", "FORWARD", "-p", "tcp", "--dport", "22", "-j", "ACCEPT")
	d.in("node1", "iptables", "-A", "OUTPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT")
	before := d.ruleset("node1")

	d.startAgent(t, "node1", "--dataplane", plane)
	d.startAgent(t, "node2", "--dataplane", plane)

	if err := k8s.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24", ExcludedIPs: []string{"192.0.2.0", "192.0.2.255"}}}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "alt", Port: 8000, TargetPort: intstr.FromString("http")},
			},
			AllocateLoadBalancerNodePorts: ptr.To(false),
		},
	}
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	es := endpointSlice("default", "web", map[string]string{"198.51.100.11": "node1", "198.51.100.12": "node2"})
	if err := k8s.Create(ctx, es); err != nil {
		t.Fatal(err)
	}
	var vip string
	testenv.Eventually(t, settle, "the Service gets a VIP", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet")
		}
		vip = svc.Status.LoadBalancer.Ingress[0].IP
		return nil
	})
	vipURL := "http://" + vip
	st := &dataPathSteps{d: d, k8s: k8s, plane: plane, before: before, svc: svc, es: es, vip: vip, vipURL: vipURL}
	st.forwarding(t)
	st.changes(t)
	st.lifecycle(t)
}

// dataPathSteps is testDataPath's lab and what its steps share.
type dataPathSteps struct {
	d      *dataLab
	k8s    client.Client
	plane  string
	before string
	svc    *corev1.Service
	es     *discoveryv1.EndpointSlice
	vip    string
	vipURL string
}

// forwarding: both policies, the node's own rules, a late kube-proxy DNAT and a port not exposed.
func (st *dataPathSteps) forwarding(t *testing.T) {
	d, k8s, plane, svc, vip, vipURL := st.d, st.k8s, st.plane, st.svc, st.vip, st.vipURL
	ctx := context.Background()
	t.Run("Cluster policy spreads over every ready endpoint, through each node, on every port", func(t *testing.T) {
		for _, node := range []string{"node1", "node2"} {
			d.via(node)
			testenv.Eventually(t, settle, "both backends answer through "+node, func() error {
				seen, err := d.backendsSeen(vipURL, 12)
				if err != nil || len(seen) < 2 {
					return fmt.Errorf("saw %v: %v", seen, err)
				}
				_, err = d.curl(vipURL + ":8000")
				return err
			})
		}
	})

	t.Run("the node's own tables hold what the plane writes, and only that", func(t *testing.T) {
		dump := d.ruleset("node1")
		if nft := strings.Contains(dump, "table ip vip-allocator"); nft != (plane == "nftables") || strings.Contains(dump, "VIPA-SERVICES") == nft {
			t.Fatalf("--dataplane %s wrote:\n%s", plane, dump)
		}
	})

	t.Run("a kube-proxy DNAT of the VIP in iptables nat PREROUTING comes too late to take it", func(t *testing.T) {
		d.via("node1")
		standIn := []string{"PREROUTING", "-d", vip, "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", "198.51.100.99:8080"}
		d.in("node1", append([]string{"iptables", "-t", "nat", "-A"}, standIn...)...)
		defer d.in("node1", append([]string{"iptables", "-t", "nat", "-D"}, standIn...)...)
		seen, err := d.backendsSeen(vipURL, 12)
		if err != nil || len(seen) < 2 {
			t.Fatalf("saw %v: %v", seen, err)
		}
	})

	t.Run("a port the Service does not expose is refused at once", func(t *testing.T) {
		if err := d.refused(vipURL + ":9999"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Local policy keeps the client address and uses only the node's endpoints", func(t *testing.T) {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		if err := k8s.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
		for node, backend := range map[string]string{"node1": "backend1", "node2": "backend2"} {
			d.via(node)
			testenv.Eventually(t, settle, "only "+backend+" through "+node+", seeing the client", func() error {
				for range 6 {
					body, err := d.curl(vipURL)
					if err != nil {
						return err
					}
					if body != backend+" 203.0.113.10\n" {
						return fmt.Errorf("got %q", body)
					}
				}
				return nil
			})
		}
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		if err := k8s.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
	})
}

// changes: endpoints going, drift repaired, the node and a backend reaching the VIP.
func (st *dataPathSteps) changes(t *testing.T) {
	d, k8s, plane, es, vipURL := st.d, st.k8s, st.plane, st.es, st.vipURL
	ctx := context.Background()
	t.Run("a removed endpoint stops getting traffic; no endpoint at all is refused", func(t *testing.T) {
		d.via("node1")
		es.Endpoints = es.Endpoints[:0]
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{"198.51.100.12"}, NodeName: ptr.To("node2"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		if err := k8s.Update(ctx, es); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "only backend2", func() error {
			seen, err := d.backendsSeen(vipURL, 8)
			if err != nil || len(seen) != 1 || !seen["backend2"] {
				return fmt.Errorf("saw %v: %v", seen, err)
			}
			return nil
		})
		es.Endpoints[0].Conditions.Ready = ptr.To(false)
		if err := k8s.Update(ctx, es); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "refused with no ready endpoint", func() error { return d.refused(vipURL) })
		es.Endpoints[0].Conditions.Ready = ptr.To(true)
		if err := k8s.Update(ctx, es); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "served again", func() error { _, err := d.curl(vipURL); return err })
	})

	t.Run("drift is repaired: flushed chains and a deleted jump rule", func(t *testing.T) {
		d.via("node1")
		if plane == "nftables" {
			d.in("node1", "nft", "flush", "chain", "ip", "vip-allocator", "services")
		} else {
			for _, line := range strings.Split(d.in("node1", "iptables-save", "-t", "nat"), "\n") {
				if strings.HasPrefix(line, ":VIPA-") {
					d.in("node1", "iptables", "-t", "nat", "-F", strings.Fields(line)[0][1:])
				}
			}
		}
		testenv.Eventually(t, settle, "rules rewritten after a flush", func() error { _, err := d.curl(vipURL); return err })
		// The agent repairs drift within milliseconds, so a request right after
		// the deletion may already flow again: what proves the repair is the
		// jump rule back (a new rule, with a new handle), and traffic with it.
		var restored func() error
		if plane == "nftables" {
			chain := func() string {
				return d.in("node1", "nft", "-a", "list", "chain", "ip", "vip-allocator", "nat-prerouting")
			}
			deleted := firstRuleHandle(chain())
			d.in("node1", "nft", "delete", "rule", "ip", "vip-allocator", "nat-prerouting", "handle", deleted)
			restored = func() error {
				if h := firstRuleHandle(chain()); h == "none" || h == deleted {
					return fmt.Errorf("first rule of nat-prerouting: handle %s (deleted %s)", h, deleted)
				}
				return nil
			}
		} else {
			jump := []string{"PREROUTING", "-m", "comment", "--comment", "vip-allocator service VIPs", "-j", "VIPA-SERVICES"}
			d.in("node1", append([]string{"iptables", "-t", "nat", "-D"}, jump...)...)
			restored = func() error {
				return exec.Command("ip", append([]string{"netns", "exec", d.ns("node1"), "iptables", "-t", "nat", "-C"}, jump...)...).Run()
			}
		}
		testenv.Eventually(t, settle, "the jump rule written again", restored)
		testenv.Eventually(t, settle, "jump rule restored", func() error { _, err := d.curl(vipURL); return err })
	})

	t.Run("the node itself and a backend behind it (hairpin) reach the VIP", func(t *testing.T) {
		for _, from := range []string{"node1", "backend1"} {
			testenv.Eventually(t, settle, from+" reaches the VIP", func() error {
				out, err := exec.Command("ip", "netns", "exec", d.ns(from), "curl", "-sS", "--max-time", "2", vipURL).CombinedOutput()
				if err != nil || !strings.HasPrefix(string(out), "backend") {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			})
		}
	})
}

// lifecycle: UDP, source ranges, and an agent restart and cleanup.
func (st *dataPathSteps) lifecycle(t *testing.T) {
	d, k8s, before, svc, es, vip, vipURL := st.d, st.k8s, st.before, st.svc, st.es, st.vip, st.vipURL
	ctx := context.Background()
	t.Run("UDP ports are forwarded", func(t *testing.T) {
		for _, b := range []string{"backend1", "backend2"} {
			serveUDPName(t, d.lab, b, ":5353")
		}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353)})
		if err := k8s.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To[int32](5353)})
		if err := k8s.Update(ctx, es); err != nil {
			t.Fatal(err)
		}
		d.via("node1")
		testenv.Eventually(t, settle, "a UDP answer through the VIP", func() error {
			name, err := d.udpAsk(vip + ":53")
			if err != nil || !strings.HasPrefix(name, "backend") {
				return fmt.Errorf("got %q: %v", name, err)
			}
			return nil
		})
	})

	t.Run("loadBalancerSourceRanges admits only the listed sources", func(t *testing.T) {
		d.via("node1")
		svc.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
		if err := k8s.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "the client (203.0.113.10) is refused", func() error { return d.refused(vipURL) })
		svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/28"}
		if err := k8s.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "the client is admitted", func() error { _, err := d.curl(vipURL); return err })
	})

	t.Run("an agent restart keeps traffic flowing; cleanup removes exactly what the agent wrote", func(t *testing.T) {
		d.via("node1")
		d.stopAgent("node1")
		if _, err := d.curl(vipURL); err != nil {
			t.Fatalf("rules must survive the agent: %v", err)
		}
		out, err := exec.Command("ip", "netns", "exec", d.ns("node1"), binary(d.root), "agent", "cleanup").CombinedOutput()
		if err != nil {
			t.Fatalf("agent cleanup: %v\n%s", err, out)
		}
		if after := d.ruleset("node1"); after != before {
			t.Fatalf("cleanup left a difference:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

// firstRuleHandle is the handle of the first rule in `nft -a list chain` output.
func firstRuleHandle(listing string) string {
	for _, line := range strings.Split(listing, "\n") {
		if _, h, ok := strings.Cut(line, "# handle "); ok && !strings.Contains(line, "chain ") {
			return strings.TrimSpace(h)
		}
	}
	return "none"
}
