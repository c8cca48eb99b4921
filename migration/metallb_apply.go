package migration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// CreatedFromAnnotation on an IPGroup, BGPPeer or Secret apply wrote names the MetalLB object
// it was converted from.
const CreatedFromAnnotation = "vip.paas.org/created-from"

// ReadMetalLB reads MetalLB's objects in namespace, every Service and the namespaces' labels,
// and the agent DaemonSet in agentNamespace (the operator's). BGPPeers are read as v1beta2
// (MetalLB's storage version) or, on a MetalLB that serves only v1beta1, as v1beta1.
func ReadMetalLB(ctx context.Context, c client.Reader, namespace, agentNamespace string) (MetalLBState, error) {
	st := MetalLBState{Namespace: namespace, AgentNamespace: agentNamespace, NamespaceLabels: map[string]map[string]string{}}
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
	var deployments appsv1.DeploymentList
	if err := c.List(ctx, &deployments, client.InNamespace(namespace)); err != nil {
		return st, fmt.Errorf("read Deployments of namespace %s: %w", namespace, err)
	}
	st.Deployments = deployments.Items
	var daemonSets appsv1.DaemonSetList
	if err := c.List(ctx, &daemonSets, client.InNamespace(namespace)); err != nil {
		return st, fmt.Errorf("read DaemonSets of namespace %s: %w", namespace, err)
	}
	st.DaemonSets = daemonSets.Items
	agents := &appsv1.DaemonSet{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: agentNamespace, Name: paasv1.AgentDaemonSet}, agents); {
	case err == nil:
		st.AgentDaemonSet = agents
	case !apierrors.IsNotFound(err):
		return st, fmt.Errorf("read DaemonSet %s/%s: %w", agentNamespace, paasv1.AgentDaemonSet, err)
	}
	var groups paasv1.IPGroupList
	if err := c.List(ctx, &groups); err != nil {
		return st, fmt.Errorf("read IPGroups: %w", err)
	}
	st.Groups = groups.Items
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
	// ScaleDownController scales MetalLB's controller Deployment, the one the plan identified
	// (name and uid), to 0 replicas once everything is created, so it hands out no address the
	// operator does not know. MetalLB's speakers keep announcing until the agents have taken
	// over; remove them after.
	ScaleDownController bool
}

// ApplyMetalLB creates the IPGroups and BGPPeers p converts to, and the password Secret. It is
// idempotent: an identical IPGroup is left as it is and said so. It writes nothing while p has
// a gossip port clash. It touches only what p names: a pool whose IPGroup exists and differs is
// refused (and the controller left running), and only the controller Deployment p identified, by
// name and uid, is scaled down.
func ApplyMetalLB(ctx context.Context, c client.Client, p MetalLBPlan, o MetalLBApplyOptions, out io.Writer) error {
	// With the ports clashing, the agents on the speakers' nodes cannot gossip
	// (or the speakers cannot): nothing is written, so no address is adopted
	// by agents that may not be running.
	if len(p.GossipClashes) > 0 {
		fmt.Fprintln(out, "nothing written: MetalLB's speakers and the agents gossip on one port (see the plan's problems)")
		return fmt.Errorf("%w: %s", errRefused, strings.Join(p.GossipClashes, "; "))
	}
	var refused []error
	for _, g := range p.Groups {
		if g.Conflict != "" {
			refused = append(refused, errors.New(g.Conflict))
			continue
		}
		group := g.Group.DeepCopy()
		group.SetGroupVersionKind(paasv1.GroupVersion.WithKind("IPGroup"))
		group.Annotations = map[string]string{CreatedFromAnnotation: "metallb.io/v1beta1 IPAddressPool " + p.Namespace + "/" + g.Pool}
		if err := createGroup(ctx, c, group, out); errors.Is(err, errRefused) {
			refused = append(refused, err)
		} else if err != nil {
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
	if len(refused) > 0 {
		if o.ScaleDownController {
			fmt.Fprintln(out, "MetalLB's controller is left running: apply refused part of the plan")
		}
		return errors.Join(refused...)
	}
	if o.ScaleDownController {
		return scaleDownMetalLB(ctx, c, p, out)
	}
	return nil
}

// errRefused marks what apply leaves because it is not what the plan converts to.
var errRefused = errors.New("refused")

// createGroup creates group, or leaves an IPGroup of its name that is identical; one that
// differs (created since the plan, or by someone else) is refused.
func createGroup(ctx context.Context, c client.Client, group *paasv1.IPGroup, out io.Writer) error {
	err := c.Create(ctx, group, paasv1.FieldOwner)
	switch {
	case err == nil:
		fmt.Fprintf(out, "created IPGroup %s\n", group.Name)
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("create IPGroup %s: %w", group.Name, err)
	}
	existing := &paasv1.IPGroup{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(group), existing); err != nil {
		return fmt.Errorf("read IPGroup %s: %w", group.Name, err)
	}
	if _, conflict := existingGroup(group, []paasv1.IPGroup{*existing}); conflict != "" {
		return fmt.Errorf("%w: %s", errRefused, conflict)
	}
	fmt.Fprintf(out, "IPGroup %s exists, identical: left as it is\n", group.Name)
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
		case pc.PasswordFrom.Namespace != p.Namespace && pc.PasswordFrom.Name != "":
			return fmt.Errorf("BGPPeer %s: its password Secret %s is outside MetalLB's namespace %s: not copied", pc.Name, pc.PasswordFrom, p.Namespace)
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

// scaleDownMetalLB scales the controller Deployment p identified to 0: the Deployment of that
// name only while it has the uid the plan saw, the patch bound to the version just read.
func scaleDownMetalLB(ctx context.Context, c client.Client, p MetalLBPlan, out io.Writer) error {
	ctl := p.Controller
	if ctl == nil {
		return fmt.Errorf("no single MetalLB controller Deployment in namespace %s (labelled component=controller and app=metallb, or app.kubernetes.io/component=controller and app.kubernetes.io/name=metallb): scale it down by hand", p.Namespace)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ctl.Namespace, Name: ctl.Name}, d); err != nil {
		return fmt.Errorf("read %s: %w", ctl, err)
	}
	if d.UID != ctl.UID {
		return fmt.Errorf("%s is no longer the Deployment the plan saw (uid %s, now %s): left as it is; plan again", ctl, ctl.UID, d.UID)
	}
	if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
		fmt.Fprintf(out, "%s is scaled to 0 already\n", ctl)
		return nil
	}
	patch := client.MergeFromWithOptions(d.DeepCopy(), client.MergeFromWithOptimisticLock{})
	d.Spec.Replicas = ptr.To(int32(0))
	if err := c.Patch(ctx, d, patch, paasv1.FieldOwner); err != nil {
		return fmt.Errorf("scale %s to 0: %w", ctl, err)
	}
	fmt.Fprintf(out, "scaled %s to 0 (MetalLB's speakers keep announcing until the agents took over: remove them then)\n", ctl)
	return nil
}
