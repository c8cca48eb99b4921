//go:build envtest

package install

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/cmd"
	"github.com/paas-org/vip-allocator-operator/migration"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

func TestUpgradeFromOriginal10(t *testing.T) { testUpgradeFromOriginal(t, "1.0") }
func TestUpgradeFromOriginal03(t *testing.T) { testUpgradeFromOriginal(t, "0.3") }

// testUpgradeFromOriginal installs the original operator's release from its
// real bundle on an empty API server, with Services (and for 0.3 a VirtualIP)
// as it leaves them, then upgrades the way docs/install.md says: our bundle
// applied server-side, "migrate plan", "migrate upgrade", and our operator
// running as its ServiceAccount.
func testUpgradeFromOriginal(t *testing.T, release string) {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	c := startCluster(t)
	ctx := context.Background()
	admin, err := client.New(c.admin, client.Options{Scheme: paasv1.NewScheme()})
	testenv.Must(t, err)
	original := impersonating(t, c.admin, "system:serviceaccount:"+namespace+":"+paasv1.OriginalServiceAccount)
	bundle := originalBundle(t, release)

	// The original's installation, as its README installs it.
	c.mustKubectl(t, "create", "namespace", namespace)
	if out, err := c.kubectl(withoutWebhook(t, bundle), "apply", "-f", "-"); err != nil {
		t.Fatal(out)
	}
	c.waitListable(t, "../shared/fixtures/original-operator/"+release+"-bundle.yaml")
	c.mustKubectl(t, "create", "namespace", shop)
	group := fmt.Sprintf("apiVersion: paas.org/v1\nkind: IPGroup\nmetadata: {name: %s}\nspec: {segment: %s, excludedIPs: [192.0.2.0, 192.0.2.255]}\n", labGroup, labSegment)
	if out, err := c.kubectl(group, "create", "-f", "-"); err != nil {
		t.Fatal(out)
	}
	for _, s := range originalServices {
		createOriginalService(ctx, t, admin, original, s)
	}
	// A ledger object whose Service was force-deleted (its finalizer removed by
	// hand): the original never freed that address.
	testenv.Must(t, original.Create(ctx, &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.9",
		Labels: map[string]string{paasv1.IPGroupLabel: labGroup}, Annotations: map[string]string{paasv1.OwnerAnnotation: shop + "/gone"}}}))
	var legacy *paasv1.VirtualIP
	if release == "0.3" {
		gsm := "apiVersion: paas.org/v1\nkind: GroupSegmentMapping\nmetadata: {name: gsm-legacy}\nspec: {segment: 198.51.100.0/24, keepalivedGroup: keepalived/gsm-legacy, excludedIPs: []}\n"
		if out, err := c.kubectl(gsm, "create", "-f", "-"); err != nil {
			t.Fatal(out)
		}
		legacy, err = testenv.CreateLegacy(ctx, admin, original, testenv.LegacyVIP{Namespace: shop, Name: "legacy-vip", Service: "legacy",
			IP: "198.51.100.10", GSM: "gsm-legacy"})
		testenv.Must(t, err)
	}
	out := c.mustKubectl(t, "apply", "-f", bundle)
	if !strings.Contains(out, "validatingwebhookconfiguration.admissionregistration.k8s.io/"+paasv1.OriginalWebhookConfiguration+" created") {
		t.Fatalf("the original's webhook was not registered:\n%s", out)
	}
	testenv.Eventually(t, settle, "the original's webhook, with no pod behind it, refuses ledger writes", func() error {
		err := admin.Create(ctx, &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.99"}}, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), `failed calling webhook "vip.kb.io"`) {
			return fmt.Errorf("want the webhook's refusal, got %v", err)
		}
		return nil
	})

	createDecoys(t, c)
	before := ledgerUIDs(ctx, t, admin)
	addrs := serviceAddrs(ctx, t, admin)
	st := &upgradeFromOriginal{c: c, release: release, admin: admin, legacy: legacy, before: before, addrs: addrs}
	st.planning(t)

	stopOperator := c.runOperatorWith(t, cmd.OperatorOptions{MetricsAddr: "0", ProbeAddr: "0", Workers: 2, IPMode: "Proxy", LeaderElect: true, LeaderNamespace: namespace,
		Migration: migration.Options{CutoverDelay: 2 * time.Second}})
	defer stopOperator()
	st.refusing(t)
	st.upgrading(t)
	st.adopting(t)
	st.again(t)
}

// upgradeFromOriginal is testUpgradeFromOriginal's lab and what its steps share.
type upgradeFromOriginal struct {
	c       *cluster
	release string
	admin   client.Client
	legacy  *paasv1.VirtualIP
	before  map[string]types.UID
	addrs   map[string]string
}

// planning: the upgrade planned before our bundle, the shared CRDs upgraded in place and readable, the plan shown.
func (st *upgradeFromOriginal) planning(t *testing.T) {
	c, release, admin, before := st.c, st.release, st.admin, st.before
	ctx := context.Background()
	t.Run("the upgrade can be planned before our bundle is applied (1.0 has no VirtualIP CRD)", func(t *testing.T) {
		var buf bytes.Buffer
		p, err := migration.PlanUpgradeOf(ctx, admin, namespace, false, &buf)
		testenv.Must(t, err)
		if len(p.Remove) == 0 || len(p.Adopt) != 2 || len(p.Finalizers) != 3 || len(p.Orphans) != 1 {
			t.Errorf("plan before the apply:\n%s", buf.String())
		}
		buf.Reset()
		if _, err := cmd.MigratePlan(ctx, c.admin, cmd.MigrateOptions{}, &buf); err != nil {
			t.Fatalf("migrate plan before the apply: %v", err)
		}
		if !strings.Contains(buf.String(), "vip-allocator migrate upgrade deletes:") {
			t.Errorf("migrate plan before the apply:\n%s", buf.String())
		}
	})

	t.Run("kubectl apply --server-side --force-conflicts -f deploy/bundle.yaml upgrades the shared CRDs in place", func(t *testing.T) {
		c.mustKubectl(t, "apply", "--server-side", "--force-conflicts", "-f", "deploy/bundle.yaml")
		for _, crd := range []string{"ipgroups.paas.org", "ips.paas.org", "virtualips.paas.org", "groupsegmentmappings.paas.org"} {
			c.mustKubectl(t, "wait", "--for", "condition=Established", "--timeout", "60s", "crd/"+crd)
			if got := c.mustKubectl(t, "get", "crd", crd, "-o", "jsonpath={.status.storedVersions}"); got != `["v1"]` {
				t.Errorf("%s stored versions %s", crd, got)
			}
		}
		// Our schema replaced the original's, not merged into it: the fields only
		// the original set are gone (kubectl moves client-side apply's fields to
		// its server-side manager).
		// (Ours requires no field of the spec: a group has a segment or addresses, a CEL rule.)
		if got := c.mustKubectl(t, "get", "crd", "ipgroups.paas.org", "-o", "jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec.required}"); got != "" {
			t.Errorf("IPGroup spec.required %s, want none (the original required segment and excludedIPs)", got)
		}
		if got := c.mustKubectl(t, "get", "crd", "ips.paas.org", "-o", "jsonpath={.spec.versions[0].additionalPrinterColumns[*].name}"); got != "Address IPGroup Owner Sharing Key Reserved By Announced By Age" {
			t.Errorf("IP print columns %q", got)
		}
	})

	t.Run("every stored object of the shared CRDs is readable under the new schema", func(t *testing.T) {
		var groups paasv1.IPGroupList
		testenv.Must(t, admin.List(ctx, &groups))
		var ips paasv1.IPList
		testenv.Must(t, admin.List(ctx, &ips))
		var vips paasv1.VirtualIPList
		testenv.Must(t, admin.List(ctx, &vips))
		var gsms paasv1.GroupSegmentMappingList
		testenv.Must(t, admin.List(ctx, &gsms))
		if len(groups.Items) != 1 || len(ips.Items) != len(before) || len(vips.Items) != len(gsms.Items) {
			t.Fatalf("%d IPGroups, %d of %d IPs, %d VirtualIPs, %d GroupSegmentMappings", len(groups.Items), len(ips.Items), len(before), len(vips.Items), len(gsms.Items))
		}
		if release == "0.3" && (len(vips.Items) != 1 || vips.Items[0].Status.IP != "198.51.100.10" || gsms.Items[0].Spec.Segment != "198.51.100.0/24") {
			t.Fatalf("0.3 objects read back as %+v, %+v", vips.Items, gsms.Items)
		}
	})

	t.Run("migrate plan shows what the upgrade will do (golden file)", func(t *testing.T) {
		var buf bytes.Buffer
		_, err := cmd.MigratePlan(ctx, c.admin, cmd.MigrateOptions{CutoverDelay: migration.DefaultCutoverDelay}, &buf)
		testenv.Must(t, err)
		golden(t, "upgrade-plan-"+release+".golden", buf.String())
		if after := ledgerUIDs(ctx, t, admin); !mapsEqual(after, before) {
			t.Fatal("plan wrote to the ledger")
		}
	})
}

// refusing: with the original's webhook registered the operator says why it waits; a swapped object stays.
func (st *upgradeFromOriginal) refusing(t *testing.T) {
	admin := st.admin
	ctx := context.Background()

	t.Run("while the original's webhook is registered, the operator says why it cannot adopt or allocate", func(t *testing.T) {
		testenv.Must(t, admin.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "fresh"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}))
		testenv.Eventually(t, settle, "a Warning Event AllocationFailed on shop/fresh naming the webhook", func() error {
			return findEvent(ctx, admin, "fresh", "AllocationFailed")
		})
		testenv.Eventually(t, settle, "a Warning Event AdoptionFailed on shop/api naming the webhook", func() error {
			return findEvent(ctx, admin, "api", "AdoptionFailed")
		})
	})

	t.Run("a plan applied after one of its objects was swapped leaves that object", func(t *testing.T) {
		checkSwappedIsLeft(ctx, t, admin)
	})
}

// upgrading: migrate upgrade removes the original and nothing else, and every stored object is valid.
func (st *upgradeFromOriginal) upgrading(t *testing.T) {
	c, release, admin := st.c, st.release, st.admin
	ctx := context.Background()
	var upgradeOut bytes.Buffer
	t.Run("migrate upgrade removes the original's Deployment, webhook and bindings, and nothing that only resembles them", func(t *testing.T) {
		testenv.Must(t, cmd.MigrateUpgrade(ctx, c.admin, cmd.MigrateOptions{}, &upgradeOut))
		t.Log("\n" + upgradeOut.String())
		for _, obj := range []string{"deployment/" + paasv1.OriginalDeployment, "rolebinding/" + paasv1.OriginalLeaderElectionBinding,
			"serviceaccount/" + paasv1.OriginalServiceAccount, "validatingwebhookconfiguration/" + paasv1.OriginalWebhookConfiguration,
			"clusterrolebinding/" + paasv1.OriginalManagerBinding, "clusterrolebinding/" + paasv1.OriginalClusterAdminBinding} {
			if _, err := c.kubectl("", "get", "-n", namespace, obj); err == nil {
				t.Errorf("the original's %s is left", obj)
			}
		}
		if _, err := c.kubectl("", "get", "deployment", "-n", namespace, "vip-allocator-operator"); err != nil {
			t.Errorf("our Deployment must stay: %v", err)
		}
		if release == "0.3" && !strings.Contains(upgradeOut.String(), "deleted ClusterRoleBinding vip-allocator-operator-manager-rolebinding") {
			t.Errorf("0.3's cluster-admin binding not reported deleted:\n%s", upgradeOut.String())
		}
		if _, err := c.kubectl("", "get", "clusterrolebinding", "vip-allocator-operator"); err != nil {
			t.Errorf("our ClusterRoleBinding must stay: %v", err)
		}
		checkDecoysLeft(t, c, upgradeOut.String())
	})

	t.Run("every stored object of the shared CRDs is valid under the new schema", func(t *testing.T) {
		// A dry-run update runs the new schema's validation (CEL included) on the
		// stored object. Only now: the original's webhooks intercepted updates of
		// IPs (and in 0.3 VirtualIPs) until migrate upgrade removed them.
		operator := impersonating(t, c.admin, operatorUser)
		var groups paasv1.IPGroupList
		testenv.Must(t, admin.List(ctx, &groups))
		for i := range groups.Items {
			testenv.Must(t, admin.Update(ctx, &groups.Items[i], client.DryRunAll))
		}
		var vips paasv1.VirtualIPList
		testenv.Must(t, admin.List(ctx, &vips))
		for i := range vips.Items {
			testenv.Must(t, admin.Update(ctx, &vips.Items[i], client.DryRunAll))
		}
		var gsms paasv1.GroupSegmentMappingList
		testenv.Must(t, admin.List(ctx, &gsms))
		for i := range gsms.Items {
			testenv.Must(t, admin.Update(ctx, &gsms.Items[i], client.DryRunAll))
		}
		var ips paasv1.IPList
		testenv.Must(t, admin.List(ctx, &ips))
		for i := range ips.Items {
			testenv.Must(t, client.IgnoreNotFound(operator.Update(ctx, &ips.Items[i], client.DryRunAll)))
		}
	})
}

// adopting: the ledger adopted in place, a Service being deleted finishes, a new Service gets an address.
func (st *upgradeFromOriginal) adopting(t *testing.T) {
	admin, before, addrs := st.admin, st.before, st.addrs
	ctx := context.Background()
	t.Run("the operator adopts the original's ledger in place, drops its finalizer, and no address changes", func(t *testing.T) {
		g := gomega.NewWithT(t)
		for _, s := range originalServices {
			if s.deleting {
				continue
			}
			g.Eventually(func() error {
				svc := &corev1.Service{}
				if err := admin.Get(ctx, types.NamespacedName{Namespace: shop, Name: s.name}, svc); err != nil {
					return err
				}
				if slices.Contains(svc.Finalizers, paasv1.OriginalServiceFinalizer) {
					return fmt.Errorf("%s still has the finalizer", s.name)
				}
				ip := &paasv1.IP{}
				if err := admin.Get(ctx, types.NamespacedName{Name: s.ip}, ip); err != nil {
					return err
				}
				if ip.Spec.Owner == nil || ip.Spec.Owner.UID != svc.UID || ip.Spec.Address != s.ip {
					return fmt.Errorf("ledger %s: spec %+v", s.ip, ip.Spec)
				}
				if ip.UID != before[s.ip] {
					return fmt.Errorf("ledger %s was deleted and recreated (uid %s, was %s)", s.ip, ip.UID, before[s.ip])
				}
				if ip.Labels[paasv1.IPGroupLabel] != labGroup || ip.Annotations[paasv1.OwnerAnnotation] != shop+"/"+s.name {
					return fmt.Errorf("ledger %s: labels %v annotations %v", s.ip, ip.Labels, ip.Annotations)
				}
				return nil
			}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(gomega.Succeed(), s.name)
		}
		after := serviceAddrs(ctx, t, admin)
		changed := 0
		for key, addr := range after {
			if was, ok := addrs[key]; ok && was != addr {
				changed++
				t.Errorf("Service %s: %s -> %s", key, was, addr)
			}
		}
		if changed != 0 {
			t.Errorf("%d addresses changed", changed)
		}
	})

	t.Run("the Service already being deleted finishes deleting and its address is released", func(t *testing.T) {
		testenv.Eventually(t, settle, "shop/old is gone, and so is its ledger object", func() error {
			err := admin.Get(ctx, types.NamespacedName{Namespace: shop, Name: "old"}, &corev1.Service{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("shop/old: %v", err)
			}
			if err := admin.Get(ctx, types.NamespacedName{Name: "192.0.2.3"}, &paasv1.IP{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ledger 192.0.2.3: %v", err)
			}
			return nil
		})
		testenv.Eventually(t, settle, "the orphan ledger object of the force-deleted Service is freed", func() error {
			if err := admin.Get(ctx, types.NamespacedName{Name: "192.0.2.9"}, &paasv1.IP{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ledger 192.0.2.9: %v", err)
			}
			return nil
		})
		for name, ip := range map[string]string{"reuse": "192.0.2.3", "reuse-orphan": "192.0.2.9"} {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: name},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: ip, Ports: []corev1.ServicePort{{Port: 80}}}}
			testenv.Must(t, admin.Create(ctx, svc))
			testenv.Eventually(t, settle, name+" gets the freed "+ip, func() error {
				if err := admin.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
					return err
				}
				if len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != ip {
					return fmt.Errorf("ingress %v", svc.Status.LoadBalancer.Ingress)
				}
				return nil
			})
		}
	})

	t.Run("a new Service gets an address (the ledger is writable again) and deleting an adopted one frees its address", func(t *testing.T) {
		fresh := &corev1.Service{}
		testenv.Eventually(t, settle, "shop/fresh, refused by the webhook before, gets the first free address", func() error {
			if err := admin.Get(ctx, types.NamespacedName{Namespace: shop, Name: "fresh"}, fresh); err != nil {
				return err
			}
			if len(fresh.Status.LoadBalancer.Ingress) != 1 || fresh.Status.LoadBalancer.Ingress[0].IP != "192.0.2.2" {
				return fmt.Errorf("ingress %v", fresh.Status.LoadBalancer.Ingress)
			}
			return nil
		})
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "new"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}
		testenv.Must(t, admin.Create(ctx, svc))
		testenv.Eventually(t, settle, "shop/new gets the first free address (.1 api, .2 fresh, .3 reuse)", func() error {
			if err := admin.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
				return err
			}
			if len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != "192.0.2.4" {
				return fmt.Errorf("ingress %v", svc.Status.LoadBalancer.Ingress)
			}
			return nil
		})
		testenv.Must(t, admin.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "api"}}))
		testenv.Eventually(t, settle, "shop/api is gone and 192.0.2.1 is released", func() error {
			if err := admin.Get(ctx, types.NamespacedName{Namespace: shop, Name: "api"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("shop/api: %v", err)
			}
			if err := admin.Get(ctx, types.NamespacedName{Name: "192.0.2.1"}, &paasv1.IP{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ledger 192.0.2.1: %v", err)
			}
			return nil
		})
	})
}

// again: a second migrate upgrade changes nothing, and a VirtualIP of 0.3 is migrated.
func (st *upgradeFromOriginal) again(t *testing.T) {
	c, admin, legacy, before := st.c, st.admin, st.legacy, st.before
	ctx := context.Background()
	t.Run("migrate upgrade again changes nothing, and the plan says nothing is left", func(t *testing.T) {
		var again bytes.Buffer
		testenv.Must(t, cmd.MigrateUpgrade(ctx, c.admin, cmd.MigrateOptions{}, &again))
		if strings.Contains(again.String(), "deleted ") {
			t.Errorf("the second run deleted something:\n%s", again.String())
		}
		if !strings.Contains(again.String(), "nothing of the original operator is left to remove or adopt") {
			t.Errorf("the second run does not say it is done:\n%s", again.String())
		}
	})

	if legacy != nil {
		t.Run("0.3: the VirtualIP migrates as before", func(t *testing.T) {
			c.mustKubectl(t, "annotate", "virtualip", "-n", shop, legacy.Name, paasv1.MigrateAnnotation+"=")
			agent := impersonatingAgent(t, c.admin, "node-a")
			gomega.NewWithT(t).Eventually(func() error {
				// No node agents run here: stand in for the one that would
				// announce the address once the Service owns it.
				if ip := (&paasv1.IP{}); admin.Get(ctx, types.NamespacedName{Name: "198.51.100.10"}, ip) == nil &&
					ip.Spec.Owner != nil && len(ip.Status.AnnouncedBy) == 0 {
					patch := client.MergeFrom(ip.DeepCopy())
					ip.Status.AnnouncedBy = []string{"node-a"}
					if err := agent.Status().Patch(ctx, ip, patch); err != nil {
						return fmt.Errorf("announce as the agent: %w", err)
					}
				}
				vip := &paasv1.VirtualIP{}
				if err := admin.Get(ctx, client.ObjectKeyFromObject(legacy), vip); err != nil {
					return err
				}
				if vip.Status.State != paasv1.VirtualIPMigrated {
					return fmt.Errorf("state %q: %s", vip.Status.State, vip.Status.Message)
				}
				svc := &corev1.Service{}
				if err := admin.Get(ctx, types.NamespacedName{Namespace: shop, Name: "legacy"}, svc); err != nil {
					return err
				}
				if len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != "198.51.100.10" {
					return fmt.Errorf("ingress %v", svc.Status.LoadBalancer.Ingress)
				}
				ip := &paasv1.IP{}
				if err := admin.Get(ctx, types.NamespacedName{Name: "198.51.100.10"}, ip); err != nil {
					return err
				}
				if ip.UID != before["198.51.100.10"] || ip.Spec.Owner == nil || ip.Spec.Owner.UID != svc.UID {
					return fmt.Errorf("ledger: uid %s (was %s), owner %+v", ip.UID, before["198.51.100.10"], ip.Spec.Owner)
				}
				return nil
			}).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(gomega.Succeed())
		})
	}
}
