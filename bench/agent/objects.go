package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/bench/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
)

// The cluster the two node agents serve: N IPv6 single-stack LoadBalancer Services, each with
// two ports and one EndpointSlice of five ready endpoints (the same five addresses serve both
// ports). kube-proxy programs each Service's cluster IP, our agent its VIP (ipMode Proxy: the
// address kube-proxy leaves to the load balancer); both program the same 10 endpoints per
// Service. IPv6 because the bench needs 50,000 distinct endpoint addresses and every address
// must come from the documentation ranges (2001:db8::/32).
const (
	benchNS    = "bench"
	endpoints  = 5
	targetPort = 8080
)

var (
	vipBase      = netip.MustParseAddr("2001:db8:a::")
	endpointBase = netip.MustParseAddr("2001:db8:e::")
	changeBase   = netip.MustParseAddr("2001:db8:c::")
)

// addrAt is base with its low 64 bits set to hi<<32|lo: one address per (hi, lo).
func addrAt(base netip.Addr, hi, lo uint32) netip.Addr {
	b := base.As16()
	for i, v := range []uint32{hi, lo} {
		b[8+4*i], b[9+4*i], b[10+4*i], b[11+4*i] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	}
	return netip.AddrFrom16(b)
}

func svcName(i int) string { return fmt.Sprintf("svc-%05d", i) }

func vipOf(i int) netip.Addr { return addrAt(vipBase, 0, uint32(i)) }

func endpointOf(i, e int) netip.Addr { return addrAt(endpointBase, uint32(i), uint32(e)) }

// allEndpoints are the addresses the cold start waits for.
func allEndpoints(n int) []netip.Addr {
	out := make([]netip.Addr, 0, n*endpoints)
	for i := 0; i < n; i++ {
		for e := 0; e < endpoints; e++ {
			out = append(out, endpointOf(i, e))
		}
	}
	return out
}

func service(i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: svcName(i)},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeLoadBalancer,
			IPFamilies:     []corev1.IPFamily{corev1.IPv6Protocol},
			IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack),
			// 20,000 node ports do not fit the node-port range, and neither agent needs them.
			AllocateLoadBalancerNodePorts: ptr.To(false),
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromString("https")},
			},
		},
	}
}

func endpointSlice(i int, addrs []netip.Addr) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: svcName(i),
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName(i), discoveryv1.LabelManagedBy: "bench-agent"}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](targetPort)},
			{Name: ptr.To("https"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](targetPort + 1)},
		},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)}})
	}
	return s
}

// populate writes the cluster: Nodes, the gossip key the agents need, then every Service,
// its EndpointSlice, and what the operator would write for it (the ledger object and the
// status with ipMode Proxy), as the operator's identity.
func populate(ctx context.Context, admin, operator client.Client, n int, nodes map[string]netip.Addr) error {
	for name, ip := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
		if err := admin.Create(ctx, node); err != nil {
			return fmt.Errorf("create Node %s: %w", name, err)
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip.String()}}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if err := admin.Status().Update(ctx, node); err != nil {
			return fmt.Errorf("Node %s status: %w", name, err)
		}
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if err := admin.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: paasv1.DefaultNamespace, Name: paasv1.MemberlistSecret},
		Data:       map[string][]byte{paasv1.MemberlistKey: key}}); err != nil {
		return fmt.Errorf("gossip key: %w", err)
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}); err != nil {
		return err
	}
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: paasv1.IPGroupSpec{Segment: "2001:db8:a::/64",
		Announce: &paasv1.Announce{Mode: paasv1.AnnounceNone}}}
	if err := admin.Create(ctx, group); err != nil {
		return fmt.Errorf("IPGroup: %w", err)
	}
	return fanout.Run(32, n, func(i int) error {
		svc := service(i)
		if err := admin.Create(ctx, svc); err != nil {
			return fmt.Errorf("create Service %s: %w", svc.Name, err)
		}
		addrs := make([]netip.Addr, endpoints)
		for e := range addrs {
			addrs[e] = endpointOf(i, e)
		}
		if err := admin.Create(ctx, endpointSlice(i, addrs)); err != nil {
			return fmt.Errorf("create EndpointSlice %s: %w", svc.Name, err)
		}
		return allocate(ctx, operator, svc, vipOf(i))
	})
}

// allocate makes the operator's two writes for svc: its ledger object, then its status.
func allocate(ctx context.Context, operator client.Client, svc *corev1.Service, addr netip.Addr) error {
	ip := ledger.Object(svc, addr, "bench")
	if err := operator.Create(ctx, ip, paasv1.FieldOwner); err != nil {
		return fmt.Errorf("ledger %s: %w", ip.Name, err)
	}
	patched := svc.DeepCopy()
	patched.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeProxy)}}
	patched.Status.Conditions = []metav1.Condition{{Type: paasv1.ConditionIPAllocated, Status: metav1.ConditionTrue,
		Reason: paasv1.ReasonAllocated, Message: "holds " + addr.String() + " from IPGroup bench", LastTransitionTime: metav1.Now()}}
	if err := operator.Status().Patch(ctx, patched, client.MergeFrom(svc), paasv1.FieldOwner); err != nil {
		return fmt.Errorf("status of %s: %w", svc.Name, err)
	}
	return nil
}

// changeEndpoint replaces endpoint e of Service i by addr: one endpoint changed in the API.
func changeEndpoint(ctx context.Context, admin client.Client, i, e int, addr netip.Addr) error {
	// One request: a JSON patch of the one address, no read first.
	patch := fmt.Sprintf(`[{"op":"replace","path":"/endpoints/%d/addresses/0","value":%q}]`, e, addr.String())
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: svcName(i)}}
	return admin.Patch(ctx, s, client.RawPatch(types.JSONPatchType, []byte(patch)))
}
