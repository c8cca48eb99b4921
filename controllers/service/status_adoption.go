package service

import (
	"context"
	"errors"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
)

// Adopting the addresses another load balancer wrote (MetalLB, before this operator served
// the Service); in this package "adopt" means only this, as vip.paas.org/adopted and
// AddressNotAdopted do in the API (the original operator's ledger objects are owned,
// original.go; a migrating VirtualIP's address is taken over, virtualip_takeover.go): they are in the Service's status with no ledger object. While the operator is
// installed no one else may write them (config/admission/service_status_writers.yaml), so such
// an address predates it, and the Service keeps it when an IPGroup that admits the Service
// allows it: the allocator takes it for the Service (the rebuild at start does the same for
// every Service it sees then), and the usual ledger write records it. When it cannot be
// adopted the Service is given another address, as any Service is, and a Warning Event
// (paasv1.EventAddressNotAdopted) says which address was dropped and why.

// unledgered are the addresses svc's status shows that none of its ledger objects records
// (current: its own, in the cache or just created).
func unledgered(svc *corev1.Service, current []paasv1.IP, inFlight func(name string) bool) []netip.Addr {
	var out []netip.Addr
	for _, addr := range k8salloc.IngressAddrs(svc) {
		name := paasv1.IPObjectName(addr)
		if inFlight(name) || slices.ContainsFunc(current, func(ip paasv1.IP) bool { return ip.Name == name }) {
			continue
		}
		out = append(out, addr)
	}
	return out
}

// assignUnledgered lets key hold the unledgered addresses its status shows that no one else holds,
// or that it may share with their holders (MetalLB's allow-shared-ip is a sharing key here),
// before Allocate judges them like any address the key holds. Callers hold the state's lock.
func assignUnledgered(a *allocator.Allocator, key string, shown []netip.Addr, sharing allocator.Sharing) {
	a.SetSharing(key, sharing)
	for _, addr := range shown {
		_ = a.Assign(key, addr) // refused when held by a Service it may not share with
	}
}

// notAdopted says, for each shown address key does not hold after Allocate, why.
func notAdopted(a *allocator.Allocator, key types.NamespacedName, shown, held []netip.Addr, req allocator.Request, requestErr error) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, addr := range shown {
		if slices.Contains(held, addr) {
			continue
		}
		switch owner, ok := a.Owner(addr); {
		case ok && owner != key.String():
			out[addr] = "the IP ledger gives it to " + owner
		case requestErr != nil:
			out[addr] = requestErr.Error()
		default:
			if err := a.Admissible(key.String(), addr, req); err != nil {
				out[addr] = err.Error()
			} else {
				out[addr] = "the Service asks for another address"
			}
		}
	}
	return out
}

// leftToItsWriter reports whether the Service is left as another load balancer left it: it
// holds nothing but addresses that load balancer wrote into its status (no ledger object),
// no IPGroup that admits the Service allows them, and none can give it another. Adopting
// them would change nothing but the status, and that change is not harmless: ipMode Proxy
// makes kube-proxy let go of the address, and the agents carry only what a group announces
// (and, on a cluster the bundle was just installed on, do not run yet). So the ledger and the
// status are not written, the Service waits like one no group has room for, and the address
// stays the Service's in memory: when an IPGroup allows it (migrate metallb apply), the
// Service adopts it then.
func leftToItsWriter(result allocation, shown []netip.Addr, current []paasv1.IP) bool {
	if len(current) > 0 || len(result.held) == 0 || !errors.Is(result.err, allocator.ErrCannotRelocate) {
		return false
	}
	for _, addr := range result.held {
		if !slices.Contains(shown, addr) {
			return false
		}
	}
	return true
}

// MetalLB's speakers record which node answers ARP/NDP for each Service in a ServiceL2Status
// (metallb.io/v1beta1, in MetalLB's namespace), labelled with the Service's name and namespace.
var metallbL2Status = schema.GroupVersionKind{Group: "metallb.io", Version: "v1beta1", Kind: "ServiceL2StatusList"}

// +kubebuilder:rbac:groups=metallb.io,resources=servicel2statuses,verbs=list

// adoptedFromNode is the node MetalLB answers ARP/NDP from for svc, as its speakers' ServiceL2Status
// objects say when they all name one node; "" otherwise (no MetalLB, BGP, a move in progress).
// Read once, when the operator adopts the address (spec.adoptedFromNode): the agents then elect that
// node while it may carry the address, so the router's neighbour entry does not move between
// MetalLB's node and the agents' owner while MetalLB's speaker still answers. What a speaker wrote
// only picks among the nodes the election allows anyway.
func (r *Reconciler) adoptedFromNode(ctx context.Context, svc *corev1.Service) string {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(metallbL2Status)
	err := r.APIReader.List(ctx, list, client.MatchingLabels{
		"metallb.io/service-name": svc.Name, "metallb.io/service-namespace": svc.Namespace})
	if err != nil {
		log.FromContext(ctx).V(1).Info("no MetalLB layer-2 status to read", "service", svc.Namespace+"/"+svc.Name, "error", err.Error())
		return ""
	}
	return oneL2Node(list.Items, svc)
}

// oneL2Node is the node the ServiceL2Status items for svc name, when they name exactly one.
func oneL2Node(items []unstructured.Unstructured, svc *corev1.Service) string {
	node := ""
	for _, it := range items {
		n, _, _ := unstructured.NestedString(it.Object, "status", "node")
		name, _, _ := unstructured.NestedString(it.Object, "status", "serviceName")
		ns, _, _ := unstructured.NestedString(it.Object, "status", "serviceNamespace")
		if name != svc.Name || ns != svc.Namespace || n == "" {
			continue
		}
		if node != "" && node != n {
			return ""
		}
		node = n
	}
	if len(validation.IsDNS1123Subdomain(node)) > 0 {
		return ""
	}
	return node
}
