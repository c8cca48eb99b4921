//go:build root && envtest

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// pipelineFloor is the API server's floor for announcing n Services: the
// writes the pipeline makes per Service, made by raw clients with no rate
// limit, 16 Services at a time, each worker doing one Service's writes in
// order, timed from the first create to the last write:
//
//  1. the Service created (a user: the admin),
//  2. its ledger IP object created (the operator, createLedger),
//  3. its status patched with the IP, IPAllocated and a not yet Announced
//     condition (the operator, writeStatus),
//  4. the owner's claim merged into the IP's status.announcedBy (the agent,
//     Announcer.claim),
//  5. its status patched with the Announced condition (the operator,
//     writeStatus again).
//
// Each write is made by the identity that makes it in the pipeline: the
// admission policies refuse the ledger and the ingress to anyone but the
// operator, and they are evaluated on every write as in the real run. The
// operator's Events are not among them. The operator is stopped meanwhile and
// the agents are not started yet, so nothing else reacts; everything is
// deleted, the deletion waited for, and the operator started again before
// returning.
func (d *l2Lab) pipelineFloor(tb testing.TB, n int) time.Duration {
	tb.Helper()
	ctx := context.Background()
	d.stopOperator()
	unlimited := func(cfg *rest.Config) client.Client {
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limiter at all
		c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
		if err != nil {
			tb.Fatal(err)
		}
		return c
	}
	admin, operator := unlimited(d.env.AdminConfig), unlimited(d.env.OperatorConfig)
	nodes := []string{"node1", "node2", "node3"}
	agents := map[string]client.Client{}
	for _, node := range nodes {
		agents[node] = unlimited(d.env.AgentConfig(node))
	}
	const label = "floor"
	start := time.Now()
	err := fanout.Run(16, n, func(i int) error {
		addr, node := floorAddr(i), nodes[i%len(nodes)]
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", label, i), Labels: map[string]string{"bench": label}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}}, AllocateLoadBalancerNodePorts: ptr.To(false)}}
		if err := admin.Create(ctx, svc); err != nil {
			return err
		}
		ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(addr),
			Annotations: map[string]string{paasv1.OwnerAnnotation: svc.Namespace + "/" + svc.Name},
			Labels:      map[string]string{paasv1.IPGroupLabel: "lan6"}},
			Spec: paasv1.IPSpec{Address: addr.String(), IPGroup: "lan6",
				Owner: &paasv1.IPOwner{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}}}
		if err := operator.Create(ctx, ip, paasv1.FieldOwner); err != nil {
			return err
		}
		allocated := metav1.Condition{Type: paasv1.ConditionIPAllocated, Status: metav1.ConditionTrue, Reason: paasv1.ReasonAllocated,
			ObservedGeneration: svc.Generation, LastTransitionTime: metav1.Now(), Message: fmt.Sprintf("holds %s from IPGroup lan6", addr)}
		// Before the claim the operator finds no announcer (its message is
		// longer: what a node needs to announce the address).
		notYet := metav1.Condition{Type: paasv1.ConditionAnnounced, Status: metav1.ConditionFalse, Reason: paasv1.ReasonNoAnnouncer,
			ObservedGeneration: svc.Generation, LastTransitionTime: metav1.Now(),
			Message: fmt.Sprintf("no node announces %s yet: it needs an alive agent on a node that matches IPGroup lan6's announce.nodeSelector, is not cordoned and has an interface on the VIP's subnet", addr)}
		ingress := []corev1.LoadBalancerIngress{{IP: addr.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeProxy)}}
		if err := mergeStatus(ctx, operator, svc, map[string]any{"loadBalancer": map[string]any{"ingress": ingress},
			"conditions": []metav1.Condition{allocated, notYet}}); err != nil {
			return err
		}
		claim := client.MergeFrom(ip.DeepCopy())
		ip.Status.AnnouncedBy = []string{node}
		if err := agents[node].Status().Patch(ctx, ip, claim); err != nil {
			return err
		}
		announced := metav1.Condition{Type: paasv1.ConditionAnnounced, Status: metav1.ConditionTrue, Reason: paasv1.ReasonAnnounced,
			ObservedGeneration: svc.Generation, LastTransitionTime: metav1.Now(), Message: fmt.Sprintf("%s announced by %s (L2)", addr, node)}
		return mergeStatus(ctx, operator, svc, map[string]any{"conditions": []metav1.Condition{allocated, announced}})
	})
	took := time.Since(start)
	if err != nil {
		tb.Fatal(err)
	}

	// Back to the state the batches start from: no such Service, an empty
	// ledger (only the operator may delete IP objects), the operator running.
	if err := admin.DeleteAllOf(ctx, &corev1.Service{}, client.InNamespace("default"), client.MatchingLabels{"bench": label}); err != nil {
		tb.Fatal(err)
	}
	if err := fanout.Run(16, n, func(i int) error {
		ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(floorAddr(i))}}
		return client.IgnoreNotFound(operator.Delete(ctx, ip))
	}); err != nil {
		tb.Fatal(err)
	}
	testenv.Eventually(tb, settle, "the floor's Services and ledger are gone", func() error {
		var svcs corev1.ServiceList
		if err := admin.List(ctx, &svcs, client.InNamespace("default"), client.MatchingLabels{"bench": label}); err != nil {
			return err
		}
		var ips paasv1.IPList
		if err := admin.List(ctx, &ips); err != nil {
			return err
		}
		if len(svcs.Items)+len(ips.Items) > 0 {
			return fmt.Errorf("%d Services and %d IPs left", len(svcs.Items), len(ips.Items))
		}
		return nil
	})
	d.runOperator(tb)
	return took
}

// mergeStatus writes status into svc's as a JSON merge patch, as the
// operator's statusPatch does (each list it changed, whole).
func mergeStatus(ctx context.Context, c client.Client, svc *corev1.Service, status map[string]any) error {
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	return c.Status().Patch(ctx, svc, client.RawPatch(types.MergePatchType, patch), paasv1.FieldOwner)
}

// floorAddr is the floor's i-th address: lan6's, after its exclusions
// (2001:db8::/120), as the operator hands them out.
func floorAddr(i int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", 0x100+i))
}
