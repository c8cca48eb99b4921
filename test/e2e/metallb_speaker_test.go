//go:build root && envtest

package e2e

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paas-org/vip-allocator-operator/test/metallb"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// metallbSpeakerLabels are the labels MetalLB's manifests give the speaker pods; the speakers
// find each other's memberlist addresses by them (--ml-labels).
const metallbSpeakerLabels = "app=metallb,component=speaker"

// metallbMemberlistPort is the speakers' memberlist port. MetalLB's default, 7946, is also the
// agents' (--memberlist-port), both bound to the node's address: on a node running both during
// the switch the agent would exit (address in use), so MetalLB's moves, as its chart allows
// (speaker.memberlist.mlBindPort).
const metallbMemberlistPort = "7947"

// metallbSpeakers are MetalLB's real speakers (v0.16.1, built by hack/metallb.sh), one process
// in each lab node's namespace, configured as MetalLB's manifests configure the DaemonSet: node
// name, pod name, namespace, memberlist bound to the node's address with a shared secret key,
// the API server through KUBECONFIG, native BGP. They only announce; kube-proxy forwards.
type metallbSpeakers struct {
	procs map[string]*nodeProcess
}

// startMetalLBSpeakers installs MetalLB's CRDs, namespace and config (config: MetalLB's CRs as
// YAML documents, in metallb.Namespace) in the lab's API server, makes the speaker Pod objects
// the DaemonSet would (the speaker reads its own Pod at start, and its memberlist peers are the
// pods' IPs: a host-network pod has its node's), and runs a speaker in each of nodes (name →
// address). The speakers are stopped when the test ends; their logs are printed if it failed.
func startMetalLBSpeakers(t *testing.T, d *dataLab, nodes map[string]string, config string) *metallbSpeakers {
	t.Helper()
	ctx := context.Background()
	k8s := d.env.Admin
	dir, err := metallb.Build(d.root)
	if err != nil {
		t.Fatal(err)
	}
	if err := metallb.InstallCRDs(d.env.AdminConfig, dir); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metallb.Namespace}},
		// No controller-manager creates it here; Pod admission needs it.
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metallb.Namespace, Name: "default"}},
	} {
		if err := k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, obj := range metallbObjects(t, config) {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("create MetalLB %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	// MetalLB's manifests mount the memberlist Secret's key as a file named secretkey.
	secretDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(secretDir, "secretkey"), []byte("metallb-handover-test-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, d.env.AdminConfig, "https://127.0.0.1:6443")
	s := &metallbSpeakers{procs: map[string]*nodeProcess{}}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			for _, node := range slices.Sorted(maps.Keys(s.procs)) {
				t.Log(s.procs[node].tail(speakerLogLines))
			}
		}
	})
	for _, node := range slices.Sorted(maps.Keys(nodes)) {
		pod := speakerPod(node)
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: nodes[node], PodIPs: []corev1.PodIP{{IP: nodes[node]}}}
		if err := k8s.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		s.procs[node] = startInNode(t, d, node, "MetalLB's speaker",
			[]string{"KUBECONFIG=" + kubeconfig, "METALLB_BGP_TYPE=native"}, filepath.Join(dir, "speaker"),
			"--node-name", node, "--pod-name", pod.Name, "--namespace", metallb.Namespace,
			"--ml-bindaddr", nodes[node], "--ml-bindport", metallbMemberlistPort, "--ml-labels", metallbSpeakerLabels,
			"--ml-secret-key-path", secretDir,
			// Metrics and probes: free ports; the speaker serves them on the node's network.
			"--port", "0", "--health-probe-port", "0", "--log-level", "debug")
	}
	return s
}

// speakerPod is the Pod object MetalLB's DaemonSet would make on node, on the host network (its
// status, written after, gives it the node's address).
func speakerPod(node string) *corev1.Pod {
	labels := map[string]string{}
	for _, kv := range strings.Split(metallbSpeakerLabels, ",") {
		k, v, _ := strings.Cut(kv, "=")
		labels[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metallb.Namespace, Name: "speaker-" + node, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true,
			Containers: []corev1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker:v0.16.1"}}},
	}
}

// metallbObjects decodes YAML documents into MetalLB's objects, in MetalLB's namespace.
func metallbObjects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("MetalLB config: %v", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		u.SetNamespace(metallb.Namespace)
		out = append(out, u)
	}
}

// running fails if a speaker has ended: a speaker that exits at start (a flag, its Pod, the
// API server) must not look like one that is slow to announce.
func (s *metallbSpeakers) running() error {
	for _, p := range s.procs {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// waitFor retries f like testenv.Eventually, but gives up at once when a speaker has exited, and
// names MetalLB in the failure; the logs follow from the cleanup.
func (s *metallbSpeakers) waitFor(t *testing.T, what string, f func() error) {
	t.Helper()
	start := time.Now()
	testenv.Eventually(t, settle, what+" (MetalLB's speakers; the end of their logs follows)", func() error {
		if err := s.running(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return f()
	})
	t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
}

// stop is MetalLB's removal: each speaker gets SIGTERM, as the DaemonSet's deletion sends it.
// Later calls do nothing.
func (s *metallbSpeakers) stop() {
	for _, p := range s.procs {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range s.procs {
		p.stop()
	}
}

// speakerLogLines is how much of each speaker's log a failure prints: at debug level (which
// says why a speaker does not announce) a speaker logs a few hundred lines a minute.
const speakerLogLines = 150
