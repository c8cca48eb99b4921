//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestSharedVIP: DNS as users run it, TCP 53 and UDP 53 as two Services with
// one sharing key on one VIP, each reaching its own backend (TCP: backend1 on
// node1, HTTP on 8080; UDP: backend2 on node2, 5353), from the client through
// real agents; the VIP's owner fails and the other node carries both.
func TestSharedVIP(t *testing.T) {
	d, _, _, _ := announcedLab(t)
	ctx := context.Background()
	k8s := d.env.Admin
	d.addNS("backend2")
	d.plug("backend2", "eth0", "pods", "198.51.100.12/24")
	d.in("backend2", "ip", "route", "add", "default", "via", "198.51.100.2")
	serveUDPName(t, d.lab, "backend2", ":5353")

	share := func(name string, proto corev1.Protocol, target int32, backend, node string) *corev1.Service {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{paasv1.SharingKeyAnnotation: "dns"}},
			Spec: corev1.ServiceSpec{
				Type:                          corev1.ServiceTypeLoadBalancer,
				Ports:                         []corev1.ServicePort{{Name: "dns", Protocol: proto, Port: 53, TargetPort: intstr.FromInt32(target)}},
				AllocateLoadBalancerNodePorts: ptr.To(false),
			},
		}
		if err := k8s.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		es := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("dns"), Protocol: ptr.To(proto), Port: ptr.To(target)}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{backend}, NodeName: ptr.To(node),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}
		if err := k8s.Create(ctx, es); err != nil {
			t.Fatal(err)
		}
		return svc
	}
	tcp := share("dns-tcp", corev1.ProtocolTCP, 8080, "198.51.100.11", "node1")
	udp := share("dns-udp", corev1.ProtocolUDP, 5353, "198.51.100.12", "node2")
	vip := d.vipOf(t, tcp)
	if got := d.vipOf(t, udp); got != vip {
		t.Fatalf("dns-udp holds %s, dns-tcp %s: one sharing key, one address", got, vip)
	}
	var ip paasv1.IP
	if err := k8s.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(netip.MustParseAddr(vip))}, &ip); err != nil {
		t.Fatal(err)
	}
	if !ledger.HeldBy(&ip, tcp.UID) || !ledger.HeldBy(&ip, udp.UID) || ip.Spec.SharingKey != "dns" {
		t.Fatalf("ledger %s: %+v, want both Services under key dns", ip.Name, ip.Spec)
	}

	tcpTarget, udpTarget := "http://"+net.JoinHostPort(vip, "53")+"/", net.JoinHostPort(vip, "53")
	reachBoth := func(when string) {
		t.Helper()
		testenv.Eventually(t, settle, "TCP 53 and UDP 53 on "+vip+" "+when, func() error {
			body, err := d.curl(tcpTarget)
			if err != nil || !strings.HasPrefix(body, "backend1 ") {
				return fmt.Errorf("TCP: %q, %v", body, err)
			}
			name, err := d.udpAsk(udpTarget)
			if err != nil || name != "backend2" {
				return fmt.Errorf("UDP: %q, %v", name, err)
			}
			return nil
		})
	}
	owner := d.owner(t, vip, "")
	reachBoth("announced by " + owner)
	// A port neither Service exposes is refused on the shared VIP.
	if err := d.refused("http://" + vip + ":80/"); err != nil {
		t.Fatal(err)
	}

	t.Run("the owner's agent is SIGKILLed: another node carries both", func(t *testing.T) {
		_ = d.agents[owner].Process.Kill()
		_ = d.agents[owner].Wait()
		delete(d.agents, owner)
		to := d.owner(t, vip, owner)
		t.Logf("killed %s's agent; %s carries %s", owner, to, vip)
		reachBoth("after the failover to " + to)
		d.startAgent(t, owner)
		d.waitAnnouncer(t, vip, owner) // rendezvous hashing gives it back
	})

	t.Run("a Local Service on the VIP: only a node with its endpoint carries it", func(t *testing.T) {
		// dns-tcp becomes Local with its endpoint on a node the hash does not
		// prefer; dns-udp (Cluster) could go anywhere. The agents see dns-tcp
		// first, so a VIP that took the last Service's ask would stay on owner.
		local := "node1"
		if owner == local {
			local = "node2"
		}
		var es discoveryv1.EndpointSlice
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "dns-tcp-1"}, &es); err != nil {
			t.Fatal(err)
		}
		esPatch := client.MergeFrom(es.DeepCopy())
		es.Endpoints[0].NodeName = ptr.To(local)
		if err := k8s.Patch(ctx, &es, esPatch); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(tcp.DeepCopy())
		tcp.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		if err := k8s.Patch(ctx, tcp, patch); err != nil {
			t.Fatal(err)
		}
		d.waitAnnouncer(t, vip, local)
		if got := d.owner(t, vip, ""); got != local {
			t.Fatalf("%s announced by %s, want %s (the only node with a local endpoint of dns-tcp)", vip, got, local)
		}
		reachBoth("with dns-tcp Local")
	})
}
