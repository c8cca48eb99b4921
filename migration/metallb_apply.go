package migration

import (
	"context"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// CreatedFromAnnotation on an IPGroup, BGPPeer or Secret apply wrote names the MetalLB object
// it was converted from.
const CreatedFromAnnotation = "vip.paas.org/created-from"

// ReadMetalLB reads MetalLB's objects in namespace, every Service and the namespaces' labels.
// BGPPeers are read as v1beta2 (MetalLB's storage version) or, on a MetalLB that serves only
// v1beta1, as v1beta1.
func ReadMetalLB(ctx context.Context, c client.Reader, namespace string) (MetalLBState, error) {
	st := MetalLBState{Namespace: namespace, NamespaceLabels: map[string]map[string]string{}}
	for _, r := range []struct {
		kind string
		into *[]unstructured.Unstructured
	}{{"IPAddressPool", &st.Pools}, {"L2Advertisement", &st.L2Ads}, {"BGPAdvertisement", &st.BGPAds}, {"Community", &st.Communities}, {"BFDProfile", &st.BFDProfiles}} {
		items, err := listMetalLB(ctx, c, namespace, r.kind, "v1beta1")
		if err != nil {
			return st, err
		}
		*r.into = items
	}
	peers, err := listMetalLB(ctx, c, namespace, "BGPPeer", "v1beta2")
	if meta.IsNoMatchError(err) {
		peers, err = listMetalLB(ctx, c, namespace, "BGPPeer", "v1beta1")
	}
	if err != nil {
		return st, err
	}
	st.Peers = peers
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		return st, fmt.Errorf("read Services: %w", err)
	}
	for _, s := range svcs.Items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			st.Services = append(st.Services, s)
		}
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss); err != nil {
		return st, fmt.Errorf("read Namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		st.NamespaceLabels[ns.Name] = ns.Labels
	}
	return st, nil
}

func listMetalLB(ctx context.Context, c client.Reader, namespace, kind, version string) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: MetalLBGroup, Version: version, Kind: kind + "List"})
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) && kind != "BGPPeer" {
			return nil, nil // this MetalLB has no such kind (an older release)
		}
		return nil, fmt.Errorf("read MetalLB %s %s: %w", kind, version, err)
	}
	return list.Items, nil
}

// MetalLBApplyOptions are the flags of "migrate metallb apply".
type MetalLBApplyOptions struct {
	// OperatorNamespace holds the BGP password Secret.
	OperatorNamespace string
	// ScaleDownController scales MetalLB's controller Deployment to 0 replicas once everything
	// is created, so it hands out no address the operator does not know. MetalLB's speakers
	// keep announcing until the agents have taken over; remove them after.
	ScaleDownController bool
}

// ApplyMetalLB creates the IPGroups and BGPPeers p converts to, and the password Secret. It is
// idempotent: what exists is left as it is and said so.
func ApplyMetalLB(ctx context.Context, c client.Client, p MetalLBPlan, o MetalLBApplyOptions, out io.Writer) error {
	for _, g := range p.Groups {
		group := g.Group.DeepCopy()
		group.SetGroupVersionKind(paasv1.GroupVersion.WithKind("IPGroup"))
		group.Annotations = map[string]string{CreatedFromAnnotation: "metallb.io/v1beta1 IPAddressPool " + p.Namespace + "/" + g.Pool}
		if err := createOnce(ctx, c, group, out); err != nil {
			return err
		}
	}
	if err := writePasswords(ctx, c, p, o.OperatorNamespace, out); err != nil {
		return err
	}
	for _, pc := range p.Peers {
		if pc.Peer == nil {
			continue
		}
		peer := pc.Peer.DeepCopy()
		peer.SetGroupVersionKind(paasv1.GroupVersion.WithKind("BGPPeer"))
		peer.Annotations = map[string]string{CreatedFromAnnotation: "metallb.io/" + pc.Version + " BGPPeer " + p.Namespace + "/" + pc.Name}
		if err := createOnce(ctx, c, peer, out); err != nil {
			return err
		}
	}
	if o.ScaleDownController {
		return scaleDownMetalLB(ctx, c, p.Namespace, out)
	}
	return nil
}

// createOnce creates obj unless an object of its name exists.
func createOnce(ctx context.Context, c client.Client, obj client.Object, out io.Writer) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	err := c.Create(ctx, obj, paasv1.FieldOwner)
	switch {
	case err == nil:
		fmt.Fprintf(out, "created %s %s\n", kind, obj.GetName())
	case apierrors.IsAlreadyExists(err):
		fmt.Fprintf(out, "%s %s exists: left as it is\n", kind, obj.GetName())
	default:
		return fmt.Errorf("create %s %s: %w", kind, obj.GetName(), err)
	}
	return nil
}

// writePasswords copies the converted peers' passwords into MetalLBPasswordSecret, labelled so
// that the operator may copy them to the agents.
func writePasswords(ctx context.Context, c client.Client, p MetalLBPlan, namespace string, out io.Writer) error {
	data := map[string][]byte{}
	for _, pc := range p.Peers {
		switch {
		case pc.Peer == nil:
		case pc.PasswordFrom.Name != "":
			s := &corev1.Secret{}
			if err := c.Get(ctx, pc.PasswordFrom, s); err != nil {
				return fmt.Errorf("read the password of BGPPeer %s from Secret %s: %w", pc.Name, pc.PasswordFrom, err)
			}
			pw, ok := s.Data["password"]
			if !ok {
				return fmt.Errorf("read the password of BGPPeer %s: Secret %s has no key password (MetalLB reads that key)", pc.Name, pc.PasswordFrom)
			}
			data[pc.Name] = pw
		case pc.Password != "":
			data[pc.Name] = []byte(pc.Password)
		}
	}
	if len(data) == 0 {
		return nil
	}
	secret := &corev1.Secret{}
	secret.Namespace, secret.Name = namespace, MetalLBPasswordSecret
	secret.Labels = map[string]string{paasv1.BGPPasswordLabel: "true"}
	secret.Annotations = map[string]string{CreatedFromAnnotation: "MetalLB BGPPeers of namespace " + p.Namespace}
	secret.Data = data
	err := c.Create(ctx, secret, paasv1.FieldOwner)
	if apierrors.IsAlreadyExists(err) {
		existing := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
			return fmt.Errorf("read Secret %s/%s: %w", namespace, MetalLBPasswordSecret, err)
		}
		for k, v := range existing.Data {
			if _, ok := data[k]; !ok {
				data[k] = v
			}
		}
		existing.Data, existing.Labels = data, secret.Labels
		err = c.Update(ctx, existing, paasv1.FieldOwner)
	}
	if err != nil {
		return fmt.Errorf("write Secret %s/%s: %w", namespace, MetalLBPasswordSecret, err)
	}
	fmt.Fprintf(out, "wrote Secret %s/%s (%d BGP passwords)\n", namespace, MetalLBPasswordSecret, len(data))
	return nil
}

// scaleDownMetalLB scales MetalLB's controller Deployments (labelled component=controller by
// its manifests, app.kubernetes.io/component=controller by its Helm chart) to 0.
func scaleDownMetalLB(ctx context.Context, c client.Client, namespace string, out io.Writer) error {
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("list MetalLB Deployments: %w", err)
	}
	var errs []error
	found := false
	for i := range list.Items {
		d := &list.Items[i]
		if d.Labels["component"] != "controller" && d.Labels["app.kubernetes.io/component"] != "controller" {
			continue
		}
		found = true
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			fmt.Fprintf(out, "Deployment %s/%s is scaled to 0 already\n", d.Namespace, d.Name)
			continue
		}
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptrTo(int32(0))
		if err := c.Patch(ctx, d, patch, paasv1.FieldOwner); err != nil {
			errs = append(errs, fmt.Errorf("scale Deployment %s/%s to 0: %w", d.Namespace, d.Name, err))
			continue
		}
		fmt.Fprintf(out, "scaled Deployment %s/%s to 0 (MetalLB's speakers keep announcing until the agents took over: remove them then)\n", d.Namespace, d.Name)
	}
	if !found {
		errs = append(errs, fmt.Errorf("no MetalLB controller Deployment in namespace %s (labelled component=controller or app.kubernetes.io/component=controller): scale it down by hand", namespace))
	}
	return errors.Join(errs...)
}
