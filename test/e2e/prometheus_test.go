//go:build root && envtest

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// agentMetricsPort is where the lab's agents serve their metrics in this test,
// on every address of their node (TLS, callers authorized by the API server).
const agentMetricsPort = "19478"

// TestPrometheusAlerts runs a real Prometheus (built from its module, pinned
// beside promtool) in the labs: it scrapes the agents as the shipped
// ServiceMonitor does (HTTPS, a ServiceAccount token bound to
// vip-allocator-metrics-reader) and evaluates config/prometheus/rules.yaml as
// shipped, apart from their for: durations, which it shortens to a second. A
// scrape without the token is refused.
func TestPrometheusAlerts(t *testing.T) {
	prom := prometheusBinary(t)

	t.Run("an ARP conflict fires for the node announcing the VIP", func(t *testing.T) {
		d, _, vip, owner := announcedLab(t, "--metrics-bind-address", ":"+agentMetricsPort)
		p := startPrometheus(t, d.dataLab, "client", prom, lanIP)
		p.eventuallyTargets(t, "without-token", "down", "401")
		// The conflict counter shows 0 before the claim, so the rule's
		// increase() has a sample on each side of it.
		p.eventuallyQuery(t, `count(vip_allocator_agent_arp_conflicts_total == 0)`, "3")
		if firing := p.firing(t, "VIPAllocatorARPConflict"); len(firing) != 0 {
			t.Fatalf("VIPAllocatorARPConflict fires before any conflict: %v", firing)
		}
		d.in("client", "ip", "addr", "add", vip+"/32", "dev", "eth0")
		defer d.in("client", "ip", "addr", "del", vip+"/32", "dev", "eth0")
		d.in("client", "arping", "-U", "-c", "2", "-I", "eth0", vip)
		p.eventuallyFiring(t, "VIPAllocatorARPConflict", lanIP[owner])
	})

	t.Run("a router shutting its sessions fires BGP session down on every node", func(t *testing.T) {
		d := setupBGP(t)
		peer := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"},
			Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513}}
		if err := d.env.Admin.Create(context.Background(), peer); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"node1", "node2", "node3"} {
			d.startAgent(t, n, "--metrics-bind-address", ":"+agentMetricsPort)
		}
		p := startPrometheus(t, d.dataLab, "router", prom, bgpNodeIP)
		p.eventuallyQuery(t, `count(vip_allocator_agent_bgp_session_up == 1)`, "3")
		if firing := p.firing(t, "VIPAllocatorBGPSessionDown"); len(firing) != 0 {
			t.Fatalf("VIPAllocatorBGPSessionDown fires with every session up: %v", firing)
		}
		if out, err := d.router.vtysh("configure terminal", "router bgp 64512", "neighbor nodes shutdown"); err != nil {
			t.Fatalf("shut the sessions: %v: %s", err, out)
		}
		p.eventuallyFiring(t, "VIPAllocatorBGPSessionDown", bgpNodeIP["node1"], bgpNodeIP["node2"], bgpNodeIP["node3"])
	})
}

// prometheusBinary builds (once, hack/promtool.sh) and returns the pinned Prometheus.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "promtool.sh")).Output()
	if err != nil {
		t.Fatalf("hack/promtool.sh: %v", err)
	}
	return filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "prometheus")
}

// metricsReaderToken is a token of the ServiceAccount prometheus, bound to
// the shipped ClusterRole vip-allocator-metrics-reader as deploy/monitoring.yaml binds it.
func metricsReaderToken(t *testing.T, d *dataLab) string {
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "prometheus"}}
	if err := d.env.Admin.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-vip-allocator-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "vip-allocator-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "prometheus"}}}
	if err := d.env.Admin.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(d.env.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "prometheus", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// prometheusProc is a Prometheus running in a lab namespace.
type prometheusProc struct {
	l  *lab
	ns string
}

// startPrometheus runs Prometheus in namespace ns of lab d with the shipped
// rules, scraping the agent of every node (node → address) each second as
// the metrics reader, and once more without a token.
func startPrometheus(t *testing.T, d *dataLab, ns, bin string, nodes map[string]string) *prometheusProc {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rules := write("rules.yaml", shippedRuleGroups(t))
	tokenFile := write("token", []byte(metricsReaderToken(t, d)))
	var targets []string
	for _, addr := range nodes {
		targets = append(targets, net.JoinHostPort(addr, agentMetricsPort))
	}
	job := func(name string, auth map[string]any) map[string]any {
		j := map[string]any{"job_name": name, "scheme": "https",
			"tls_config":     map[string]any{"insecure_skip_verify": true}, // the agents' certificates are self-signed
			"static_configs": []any{map[string]any{"targets": targets}}}
		if auth != nil {
			j["authorization"] = auth
		}
		return j
	}
	cfg, err := yaml.Marshal(map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files": []string{rules},
		"scrape_configs": []any{
			job("vip-allocator-agent-metrics", map[string]any{"credentials_file": tokenFile}),
			job("without-token", nil),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("ip", "netns", "exec", d.ns(ns), bin, "--config.file="+write("prometheus.yaml", cfg),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:9090")
	c.Stdout, c.Stderr = log, log
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Kill()
		_ = c.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("prometheus log:\n%s", out)
		}
	})
	p := &prometheusProc{l: d.lab, ns: ns}
	p.eventuallyTargets(t, "vip-allocator-agent-metrics", "up", "")
	return p
}

// shippedRuleGroups is config/prometheus/rules.yaml's spec, as the Prometheus
// Operator hands the PrometheusRule to Prometheus, with every for: of a
// minute or more shortened to a second, so a test need not wait minutes.
func shippedRuleGroups(t *testing.T) []byte {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec struct {
			Groups []struct {
				Name  string           `json:"name"`
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if _, ok := r["for"]; ok {
				r["for"] = "1s"
			}
		}
	}
	out, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// api gets path from Prometheus' HTTP API and decodes its data into v.
func (p *prometheusProc) api(path string, v any) error {
	out, err := exec.Command("ip", "netns", "exec", p.l.ns(p.ns), "curl", "-sf", "http://127.0.0.1:9090"+path).Output()
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	var resp struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return err
	}
	if resp.Status != "success" {
		return fmt.Errorf("GET %s: %s", path, out)
	}
	return json.Unmarshal(resp.Data, v)
}

// eventuallyTargets waits until every target of job has health, and its last
// error contains lastError.
func (p *prometheusProc) eventuallyTargets(t *testing.T, job, health, lastError string) {
	t.Helper()
	testenv.Eventually(t, settle, "the targets of "+job+" are "+health, func() error {
		var data struct {
			ActiveTargets []struct {
				ScrapePool string `json:"scrapePool"`
				ScrapeURL  string `json:"scrapeUrl"`
				Health     string `json:"health"`
				LastError  string `json:"lastError"`
			} `json:"activeTargets"`
		}
		if err := p.api("/api/v1/targets", &data); err != nil {
			return err
		}
		n := 0
		for _, tg := range data.ActiveTargets {
			if tg.ScrapePool != job {
				continue
			}
			n++
			if tg.Health != health || !strings.Contains(tg.LastError, lastError) {
				return fmt.Errorf("%s: %s, last error %q", tg.ScrapeURL, tg.Health, tg.LastError)
			}
		}
		if n != 3 {
			return fmt.Errorf("%d targets in %s, want 3", n, job)
		}
		return nil
	})
}

// eventuallyQuery waits until the instant query's single result is want.
func (p *prometheusProc) eventuallyQuery(t *testing.T, query, want string) {
	t.Helper()
	testenv.Eventually(t, settle, query+" is "+want, func() error {
		var data struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		}
		if err := p.api("/api/v1/query?query="+url.QueryEscape(query), &data); err != nil {
			return err
		}
		if len(data.Result) != 1 || len(data.Result[0].Value) != 2 || data.Result[0].Value[1] != want {
			return fmt.Errorf("result %+v", data.Result)
		}
		return nil
	})
}

// eventuallyFiring waits until alert fires for exactly the agents at addrs.
func (p *prometheusProc) eventuallyFiring(t *testing.T, alert string, addrs ...string) {
	t.Helper()
	var want []string
	for _, a := range addrs {
		want = append(want, net.JoinHostPort(a, agentMetricsPort))
	}
	slices.Sort(want)
	testenv.Eventually(t, settle, alert+" fires", func() error {
		if got := p.firing(t, alert); !slices.Equal(got, want) {
			return fmt.Errorf("firing for %v, want %v", got, want)
		}
		return nil
	})
}

// firing is the instances for which alert fires now.
func (p *prometheusProc) firing(t *testing.T, alert string) []string {
	t.Helper()
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.api("/api/v1/alerts", &data); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == alert && a.State == "firing" {
			out = append(out, a.Labels["instance"])
		}
	}
	slices.Sort(out)
	return out
}
