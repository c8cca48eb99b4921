package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// LegacyVIP describes one VirtualIP as the original operator left it.
type LegacyVIP struct {
	Namespace, Name, Service, IP, GSM string
	// State is status.state; Valid when empty.
	State string
	// SpecIP sets spec.ip to IP (the user asked for the address).
	SpecIP bool
	// NoService leaves the target Service out.
	NoService bool
	// Migrate creates the VirtualIP with the migrate annotation already set.
	Migrate bool
}

// CreateLegacy builds the legacy state of one VirtualIP exactly as the
// original operator left it: the target Service (ClusterIP), the VirtualIP
// with both legacy finalizers and its Valid status, the keepalived clone
// Service "<vip>-keepalived-clone" (externalIPs [ip], the keepalived group
// annotation, owned by the VirtualIP), and the ledger IP object named by the
// address, labelled gsm=<gsm> with the owner annotation. admin writes all but
// the ledger, which only the operator's identity may write (admission policy).
// VirtualIP creation must be allowed (see AllowVirtualIPCreation).
func CreateLegacy(ctx context.Context, admin, operator client.Client, l LegacyVIP) (*paasv1.VirtualIP, error) {
	addr, err := netip.ParseAddr(l.IP)
	if err != nil {
		return nil, err
	}
	ports := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}
	if !l.NoService {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Service},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": l.Service}, Ports: ports}}
		if err := admin.Create(ctx, svc); err != nil {
			return nil, fmt.Errorf("create target Service: %w", err)
		}
	}
	vip := &paasv1.VirtualIP{ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name,
		Finalizers: []string{paasv1.VirtualIPIPFinalizer, paasv1.VirtualIPServiceFinalizer}},
		Spec: paasv1.VirtualIPSpec{Service: l.Service}}
	if l.SpecIP {
		vip.Spec.IP = l.IP
	}
	if l.Migrate {
		vip.Annotations = map[string]string{paasv1.MigrateAnnotation: ""}
	}
	if err := admin.Create(ctx, vip); err != nil {
		return nil, fmt.Errorf("create VirtualIP: %w", err)
	}
	clone := l.Name + paasv1.CloneServiceSuffix
	// Retried: an annotated VirtualIP may get the operator's verdict first.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(vip), vip); err != nil {
			return err
		}
		vip.Status.State, vip.Status.IP, vip.Status.Service, vip.Status.ClonedService = l.State, l.IP, l.Service, clone
		vip.Status.GSM, vip.Status.KeepalivedGroup = l.GSM, "keepalived/"+l.GSM
		vip.Status.Message = "exposed through keepalived group keepalived/" + l.GSM
		if vip.Status.State == "" {
			vip.Status.State = paasv1.VirtualIPValid
		}
		return admin.Status().Update(ctx, vip)
	}); err != nil {
		return nil, fmt.Errorf("write VirtualIP status: %w", err)
	}
	if err := admin.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: clone,
			Annotations: map[string]string{paasv1.KeepalivedGroupAnnotation: "keepalived/" + l.GSM},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: paasv1.GroupVersion.String(), Kind: "VirtualIP",
				Name: vip.Name, UID: vip.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ExternalIPs: []string{l.IP},
			Selector: map[string]string{"app": l.Service}, Ports: ports},
	}); err != nil {
		return nil, fmt.Errorf("create clone Service: %w", err)
	}
	ledger := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(addr),
		Labels:      map[string]string{paasv1.LegacyGSMLabel: l.GSM},
		Annotations: map[string]string{paasv1.OwnerAnnotation: l.Namespace + "/" + l.Name}}}
	if err := operator.Create(ctx, ledger); err != nil {
		return nil, fmt.Errorf("create ledger IP: %w", err)
	}
	return vip, nil
}

// DenyVirtualIPBinding is the admission binding that refuses VirtualIP creation.
const DenyVirtualIPBinding = "vip-allocator-virtualip-deprecated"

// AllowVirtualIPCreation lifts the deny-create admission policy so fixtures of
// legacy VirtualIPs can be built (in a real cluster they predate it), and
// returns the function that restores it. Both wait until the API server
// applies the change (probed with dry-run creates).
func AllowVirtualIPCreation(ctx context.Context, admin client.Client) (restore func() error, err error) {
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := admin.Get(ctx, client.ObjectKey{Name: DenyVirtualIPBinding}, binding); err != nil {
		return nil, err
	}
	probe := func() error {
		return admin.Create(ctx, &paasv1.VirtualIP{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"},
			Spec: paasv1.VirtualIPSpec{Service: "probe"}}, client.DryRunAll)
	}
	// The API server loads bindings a moment after they are written: on a
	// control plane just started, a probe could pass because the binding was
	// not loaded yet, and the next create be refused once it is. So first see
	// it refuse, then lift it.
	if err := waitFor(func() bool { return apierrors.IsForbidden(probe()) }); err != nil {
		return nil, fmt.Errorf("VirtualIP creation never refused before lifting the policy: %w", err)
	}
	if err := admin.Delete(ctx, binding); err != nil {
		return nil, err
	}
	if err := waitFor(func() bool { return probe() == nil }); err != nil {
		return nil, fmt.Errorf("VirtualIP creation still refused: %w", err)
	}
	return func() error {
		restored := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: binding.Name}, Spec: binding.Spec}
		if err := admin.Create(ctx, restored); err != nil {
			return err
		}
		return waitFor(func() bool { return apierrors.IsForbidden(probe()) })
	}, nil
}

func waitFor(cond func() bool) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return nil
		}
	}
	return errors.New("timed out after 30s")
}
