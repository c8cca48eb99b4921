//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// legacyPath simulates on a node what keepalived and kube-proxy did for a
// VirtualIP: the VIP on the node's loopback (keepalived's address) and a plain
// DNAT to the backend, outside the agent's VIPA- chains (kube-proxy's rule for
// the clone Service's externalIPs).
type legacyPath struct {
	d          *dataLab
	node, vip  string
	dnat       []string
	removedAt  time.Time
	removeOnce sync.Once
}

func addLegacyPath(d *dataLab, node, vip, backend string) *legacyPath {
	p := &legacyPath{d: d, node: node, vip: vip,
		dnat: []string{"PREROUTING", "-d", vip + "/32", "-p", "tcp", "--dport", "80", "-m", "comment", "--comment", "legacy keepalived clone",
			"-j", "DNAT", "--to-destination", backend}}
	d.in(node, "ip", "addr", "add", vip+"/32", "dev", "lo")
	d.in(node, append([]string{"iptables", "-t", "nat", "-A"}, p.dnat...)...)
	return p
}

// remove takes the legacy path away, as keepalived and kube-proxy do once the
// clone Service is deleted.
func (p *legacyPath) remove() {
	p.removeOnce.Do(func() {
		p.d.in(p.node, append([]string{"iptables", "-t", "nat", "-D"}, p.dnat...)...)
		p.d.in(p.node, "ip", "addr", "del", p.vip+"/32", "dev", "lo")
		p.removedAt = time.Now()
	})
}

// curlLoop asks url from the client namespace 20 times a second until
// stopped: one curl starts every 50 ms whatever the previous one does, so a
// slow answer cannot lower the rate.
type curlLoop struct {
	mu       sync.Mutex
	total    int
	failures []string
	started  time.Time
	stop     chan struct{}
	requests sync.WaitGroup
	done     chan struct{}
}

func (d *dataLab) startCurlLoop(url string) *curlLoop {
	l := &curlLoop{stop: make(chan struct{}), done: make(chan struct{}), started: time.Now()}
	go func() {
		defer close(l.done)
		// Request k starts at started + k*50ms: a late wake-up (a loaded
		// machine) starts the missed ones at once instead of dropping them.
		for k := 1; ; k++ {
			select {
			case <-l.stop:
				l.requests.Wait()
				return
			case <-time.After(time.Until(l.started.Add(time.Duration(k) * 50 * time.Millisecond))):
			}
			l.requests.Add(1)
			go func() {
				defer l.requests.Done()
				at := time.Now()
				out, err := exec.Command("ip", "netns", "exec", d.ns("client"), "curl", "-sS", "--max-time", "1", url).CombinedOutput()
				l.mu.Lock()
				defer l.mu.Unlock()
				l.total++
				if err != nil || !strings.HasPrefix(string(out), "backend") {
					l.failures = append(l.failures, fmt.Sprintf("%s: %v: %s", at.Format("15:04:05.000"), err, strings.TrimSpace(string(out))))
				}
			}()
		}
	}()
	return l
}

// finish stops the loop and returns the requests made, the failures, and the
// rate the loop ran at.
func (l *curlLoop) finish() (total int, failures []string, perSecond float64) {
	close(l.stop)
	<-l.done
	return l.total, l.failures, float64(l.total) / time.Since(l.started).Seconds()
}

// TestMigrationWithoutDowntime migrates a VirtualIP served by the legacy path
// on node1 while a client curls it 20 times a second: the new path (the agent,
// ipMode Proxy) must carry the VIP before the clone is deleted, so not one
// request fails. The client reaches the VIP through a static route via node1,
// as a router would (IPGroup announce mode None).
func TestMigrationWithoutDowntime(t *testing.T) {
	d := setup(t)
	ctx := context.Background()
	k8s := d.env.Admin
	d.startAgent(t, "node1")
	d.startAgent(t, "node2")
	d.via("node1")

	const vip = "192.0.2.10"
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24",
		ExcludedIPs: []string{"192.0.2.0", "192.0.2.255"}, Announce: &paasv1.Announce{Mode: paasv1.AnnounceNone}}}
	if err := k8s.Create(ctx, group); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &paasv1.GroupSegmentMapping{ObjectMeta: metav1.ObjectMeta{Name: "segment-a"},
		Spec: paasv1.GroupSegmentMappingSpec{Segment: "192.0.2.0/24", KeepalivedGroup: "keepalived/group-a"}}); err != nil {
		t.Fatal(err)
	}
	restore, err := testenv.AllowVirtualIPCreation(ctx, k8s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = testenv.CreateLegacy(ctx, k8s, d.env.Operator, testenv.LegacyVIP{Namespace: "default", Name: "web-vip", Service: "web", IP: vip, GSM: "segment-a"})
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, endpointSlice("default", "web", map[string]string{"198.51.100.11": "node1", "198.51.100.12": "node2"})); err != nil {
		t.Fatal(err)
	}

	legacy := addLegacyPath(d, "node1", vip, "198.51.100.11:8080")
	testenv.Eventually(t, settle, "the legacy path serves the VIP", func() error { _, err := d.curl("http://" + vip); return err })
	if rules := d.in("node1", "iptables-save", "-t", "nat"); strings.Contains(rules, "-d "+vip+"/32 -p tcp -m comment --comment \"default/web") {
		t.Fatal("the agent programs the VIP before the migration: the test proves nothing")
	}

	// The legacy path goes when the clone goes, as on a real cluster.
	cloneGone := make(chan struct{})
	go func() {
		defer close(cloneGone)
		for {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web-vip" + paasv1.CloneServiceSuffix}, &corev1.Service{})
			if apierrors.IsNotFound(err) {
				legacy.remove()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { legacy.remove() })

	loop := d.startCurlLoop("http://" + vip)
	time.Sleep(time.Second)
	start := time.Now()
	vipObj := &paasv1.VirtualIP{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-vip"}}
	if err := k8s.Patch(ctx, vipObj, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"virtualips.paas.org/migrate":""}}}`))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(vipObj), vipObj); err != nil {
			t.Fatal(err)
		}
		if vipObj.Status.State == paasv1.VirtualIPMigrated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not Migrated after 60 s: %q %s", vipObj.Status.State, vipObj.Status.Message)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-cloneGone:
	case <-time.After(10 * time.Second):
		t.Fatal("the clone was not deleted")
	}
	time.Sleep(2 * time.Second) // keep asking on the new path alone
	total, failures, rate := loop.finish()
	t.Logf("%s; %d requests at %.1f per second, %d failed; legacy path removed %s after the annotation",
		vipObj.Status.Message, total, rate, len(failures), legacy.removedAt.Sub(start).Round(time.Millisecond))
	if len(failures) > 0 {
		t.Fatalf("%d of %d requests failed during the migration:\n%s", len(failures), total, strings.Join(failures, "\n"))
	}
	if rate < 18 {
		t.Fatalf("the loop ran at %.1f requests per second, not 20", rate)
	}
	rules := d.in("node1", "iptables-save", "-t", "nat")
	if strings.Contains(rules, "legacy keepalived clone") {
		t.Fatal("the legacy DNAT is still there: the new path was not tested alone")
	}
	// The agent serves the VIP on whichever plane it picked (nftables here: an element).
	if all := d.ruleset("node1"); !strings.Contains(all, "-d "+vip+"/32") && !strings.Contains(all, vip+" . tcp . 80 . ") {
		t.Fatalf("no agent rule for %s:\n%s", vip, all)
	}
	svc := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != vip {
		t.Fatalf("Service web after the migration: type %s, ingress %v", svc.Spec.Type, svc.Status.LoadBalancer.Ingress)
	}
}
