//go:build envtest

package install

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	agentctrl "github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// checkAgentPodHardening asserts what the operator puts in the agent's pod: a read-only root,
// a liveness probe on the host's loopback (where the agent binds its health endpoint), a
// memory limit, and only the xtables lock from the host.
func checkAgentPodHardening(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("agent root filesystem is writable: %+v", c.SecurityContext)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Host != "127.0.0.1" || p.HTTPGet.Port.IntValue() != paasv1.AgentProbePort {
		t.Errorf("agent liveness probe %+v, want GET 127.0.0.1:%d/healthz", c.LivenessProbe, paasv1.AgentProbePort)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("agent resources %+v, want requests and a memory limit", c.Resources)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path != "/run/xtables.lock" {
			t.Errorf("agent mounts host path %s", v.HostPath.Path)
		}
	}
}

// testAgentNamespacePolicy: the agent's namespace admits privileged pods under Pod
// Security, so the admission policy vip-allocator-agent-pods is what keeps any pod there
// other than the agent, and the agent itself, from taking the node.
func testAgentNamespacePolicy(t *testing.T, admin client.Client, ds *appsv1.DaemonSet) {
	ctx := context.Background()
	agent := ds.Spec.Template.Spec
	with := func(edit func(*corev1.PodSpec)) corev1.PodSpec {
		s := *agent.DeepCopy()
		edit(&s)
		return s
	}
	other := func(edit func(*corev1.PodSpec)) corev1.PodSpec {
		return with(func(s *corev1.PodSpec) { s.ServiceAccountName = "default"; edit(s) })
	}
	for _, tc := range []struct {
		name    string
		pod     corev1.PodSpec
		refusal string // empty: admitted
	}{
		{"the agent as the operator deploys it", agent, ""},
		{"the agent mounting /etc from the host", with(func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "etc", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}})
		}), "only /run/xtables.lock"},
		{"the agent adding SYS_ADMIN", with(func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.Capabilities.Add = append(s.Containers[0].SecurityContext.Capabilities.Add, "SYS_ADMIN")
		}), "only NET_ADMIN and NET_RAW"},
		{"the agent privileged", with(func(s *corev1.PodSpec) {
			p := true
			s.Containers[0].SecurityContext.Privileged = &p
			s.Containers[0].SecurityContext.AllowPrivilegeEscalation = &p
		}), "is privileged"},
		{"the agent with the host's PID namespace", with(func(s *corev1.PodSpec) { s.HostPID = true }), "PID or IPC"},
		{"another pod on the host network", other(func(s *corev1.PodSpec) { s.Volumes = nil; s.Containers[0].VolumeMounts = nil }), "host network"},
		{"another pod with the xtables lock", other(func(s *corev1.PodSpec) { s.HostNetwork = false }), "only the agent mounts a host path"},
		{"another pod with NET_ADMIN", other(func(s *corev1.PodSpec) { s.HostNetwork = false; s.Volumes = nil; s.Containers[0].VolumeMounts = nil }), "only the agent adds capabilities"},
		{"the agent as a Windows host process", with(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}
		}), "Windows host process"},
		{"the agent with SELinux type spc_t", with(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}
		}), "SELinux"},
		{"the agent with an SELinux user and role", with(func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{User: "system_u", Role: "system_r"}
		}), "SELinux"},
		{"the agent with the SELinux level the runtime picks", with(func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "container_t", Level: "s0:c1,c2"}
		}), ""},
		{"the agent without seccomp", with(func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.SeccompProfile = nil }), "seccomp profile RuntimeDefault"},
		{"the agent with seccomp Unconfined", with(func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}), "seccomp profile RuntimeDefault"},
		{"the agent unconfined for the pod, RuntimeDefault for its container", with(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}), ""},
		{"the agent with host port 22", with(func(s *corev1.PodSpec) {
			s.Containers[0].Ports = append(s.Containers[0].Ports, corev1.ContainerPort{Name: "ssh", ContainerPort: 22, HostPort: 22})
		}), "only its metrics port"},
		{"another pod with a host port", other(func(s *corev1.PodSpec) {
			s.HostNetwork, s.Volumes, s.Containers[0].VolumeMounts, s.Containers[0].SecurityContext.Capabilities = false, nil, nil, nil
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
		}), "only the agent has a host port"},
		{"another pod with an unmasked /proc", other(func(s *corev1.PodSpec) {
			s.HostNetwork, s.Volumes, s.Containers[0].VolumeMounts, s.Containers[0].SecurityContext.Capabilities = false, nil, nil, nil
			s.Containers[0].Ports, s.HostUsers = nil, ptr.To(false)
			s.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
		}), "unmasks /proc"},
	} {
		pod := &corev1.Pod{Spec: tc.pod}
		pod.Namespace, pod.Name = namespace, "policy-probe"
		pod.Spec.NodeName = "node1"
		err := admin.Create(ctx, pod, client.DryRunAll)
		switch {
		case tc.refusal == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
			t.Errorf("%s: want a refusal saying %q, got %v", tc.name, tc.refusal, err)
		}
	}
}

// testEphemeralContainers: a debug container added to a running pod (the
// pods/ephemeralcontainers subresource) is held to the namespace's rules, and
// never joins an agent's pod, which shares the host's network.
func testEphemeralContainers(t *testing.T, admin client.Client, ds *appsv1.DaemonSet) {
	ctx := context.Background()
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "agent-debug-probe"}, Spec: *ds.Spec.Template.Spec.DeepCopy()}
	agent.Spec.NodeName = "node1"
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "plain-debug-probe"}, Spec: corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers:      []corev1.Container{{Name: "app", Image: "registry.example/app"}}}}
	for _, p := range []*corev1.Pod{agent, plain} {
		testenv.Must(t, admin.Create(ctx, p))
		t.Cleanup(func() { _ = admin.Delete(context.Background(), p) })
	}
	debug := func(sc *corev1.SecurityContext) corev1.EphemeralContainer {
		return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "registry.example/busybox", SecurityContext: sc}}
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		debug   corev1.EphemeralContainer
		refusal string // empty: admitted
	}{
		{"a confined debug container in the agent's pod", agent, debug(&corev1.SecurityContext{
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}), "no ephemeral container joins"},
		{"a debug container with the agent's own capabilities in its pod", agent, debug(agentSecurity(ds)), "no ephemeral container joins"},
		{"a privileged debug container in another pod", plain, debug(&corev1.SecurityContext{Privileged: ptr.To(true)}), "is privileged"},
		{"a debug container adding NET_ADMIN to another pod", plain, debug(&corev1.SecurityContext{
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}), "only the agent adds capabilities"},
		{"an unconfined debug container in another pod", plain, debug(&corev1.SecurityContext{
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}), "seccomp profile RuntimeDefault"},
		{"a plain debug container in another pod", plain, debug(nil), ""},
	} {
		p := &corev1.Pod{}
		testenv.Must(t, admin.Get(ctx, client.ObjectKeyFromObject(tc.pod), p))
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, tc.debug)
		err := admin.SubResource("ephemeralcontainers").Update(ctx, p, client.WithSubResourceBody(p), client.DryRunAll)
		switch {
		case tc.refusal == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
			t.Errorf("%s: want a refusal saying %q, got %v", tc.name, tc.refusal, err)
		}
	}
}

// agentSecurity is the security context of the agent's container.
func agentSecurity(ds *appsv1.DaemonSet) *corev1.SecurityContext {
	return ds.Spec.Template.Spec.Containers[0].SecurityContext.DeepCopy()
}

// agentPod is a pod of the agent on node, as its DaemonSet would place it, with
// what the namespace's admission policy asks of every pod (seccomp RuntimeDefault).
func agentPod(ns, node, image string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-" + node},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: agentctrl.ServiceAccount,
			SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers:      []corev1.Container{{Name: "agent", Image: image}}}}
}

// testMetricsAuth: the operator's metrics answer only callers the API server authenticates
// and allows to get /metrics (the bundle's ClusterRole vip-allocator-metrics-reader).
func testMetricsAuth(t *testing.T, c *cluster, metricsAddr string) {
	c.mustKubectl(t, "create", "serviceaccount", "-n", namespace, "scraper")
	c.mustKubectl(t, "create", "clusterrolebinding", "scraper-metrics", "--clusterrole=vip-allocator-metrics-reader", "--serviceaccount="+namespace+":scraper")
	scraper := strings.TrimSpace(c.mustKubectl(t, "create", "token", "-n", namespace, "scraper"))
	agent := strings.TrimSpace(c.mustKubectl(t, "create", "token", "-n", namespace, agentctrl.ServiceAccount))
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test asks about authorization, not the self-signed certificate
	get := func(token string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+metricsAddr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a forged token", "not-a-token", http.StatusUnauthorized},
		{"the agent's token (not a metrics reader)", agent, http.StatusForbidden},
		{"a ServiceAccount bound to vip-allocator-metrics-reader", scraper, http.StatusOK},
	} {
		testenv.Eventually(t, settle, tc.who, func() error {
			code, body, err := get(tc.token)
			if err != nil {
				return err
			}
			if code != tc.want {
				return fmt.Errorf("%s: HTTP %d, want %d: %.200s", tc.who, code, tc.want, body)
			}
			if code == http.StatusOK && !strings.Contains(body, "vip_allocator_") {
				return fmt.Errorf("%s: no vip_allocator metrics in %.300s", tc.who, body)
			}
			return nil
		})
	}
	// Plain HTTP gets nothing: the port speaks TLS only.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + metricsAddr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("metrics served over plain HTTP")
		}
	}
}

// freeLoopbackAddr is a loopback address with a port nothing listens on.
func freeLoopbackAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// agentDaemonSet reads the DaemonSet the operator deployed.
func agentDaemonSet(t *testing.T, admin client.Client) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{}
	if err := admin.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: agentctrl.Name}, ds); err != nil {
		t.Fatal(err)
	}
	return ds
}
