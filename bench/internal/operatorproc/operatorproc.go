// Package operatorproc runs, for the benchmarks, the local control plane of
// hack/local-cluster.sh and bin/vip-allocator operator against it as a real process.
package operatorproc

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Binary is the vip-allocator binary the benchmarks run: $VIP_ALLOCATOR_BIN, or
// bin/vip-allocator (what 'make build' writes).
func Binary(root string) string {
	if b := os.Getenv("VIP_ALLOCATOR_BIN"); b != "" {
		return b
	}
	return filepath.Join(root, "bin", "vip-allocator")
}

// Start runs the operator with dir/operator.kubeconfig (its ServiceAccount),
// no leader election, logging to dir/operator.log, and the extra flags.
func Start(root, dir string, flags ...string) (*exec.Cmd, error) {
	args := append([]string{"operator", "--kubeconfig", filepath.Join(dir, "operator.kubeconfig"), "--leader-elect=false",
		"--zap-log-level", "info", "--zap-time-encoding", "rfc3339nano"}, flags...)
	c := exec.Command(Binary(root), args...)
	log, err := os.OpenFile(filepath.Join(dir, "operator.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	c.Stdout, c.Stderr = log, log
	return c, c.Start()
}

// WaitReady polls the operator's /readyz at probeAddr (ready = allocator rebuilt).
func WaitReady(probeAddr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + probeAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("operator not ready after %s", timeout)
}

// Cluster is a local control plane and the two clients every bench writes
// through.
type Cluster struct {
	// Dir holds kubeconfig (admin) and operator.kubeconfig (the operator's
	// ServiceAccount), and the operator's log.
	Dir string
	// Admin and Operator have no client-side rate limit: a bench's writes go
	// at the API server's pace and never queue here. Operator writes with the
	// operator's RBAC and API priority level, as a baseline must.
	Admin, Operator client.Client
	// Down stops the control plane.
	Down func()
}

// ClusterUp starts a local control plane (hack/local-cluster.sh) in a new
// temporary directory on the given ports (each bench has its own: make test
// runs their smokes at once).
func ClusterUp(root string, apiPort, etcdPort int) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "vip-allocator-bench")
	if err != nil {
		return nil, err
	}
	cluster := func(verb string) error {
		c := exec.Command(filepath.Join(root, "hack", "local-cluster.sh"), verb, dir)
		c.Env = append(os.Environ(), fmt.Sprintf("API_PORT=%d", apiPort), fmt.Sprintf("ETCD_PORT=%d", etcdPort))
		c.Stdout, c.Stderr = os.Stderr, os.Stderr
		return c.Run()
	}
	if err := cluster("up"); err != nil {
		return nil, fmt.Errorf("local control plane: %w", err)
	}
	c := &Cluster{Dir: dir, Down: func() { _ = cluster("down") }}
	if c.Admin, err = unlimitedClient(filepath.Join(dir, "kubeconfig")); err == nil {
		c.Operator, err = unlimitedClient(filepath.Join(dir, "operator.kubeconfig"))
	}
	if err != nil {
		c.Down()
		return nil, err
	}
	return c, nil
}

// UnlimitedConfig is the rest config of kubeconfig with no client-side rate
// limit.
func UnlimitedConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS = -1
	return cfg, nil
}

func unlimitedClient(kubeconfig string) (client.Client, error) {
	cfg, err := UnlimitedConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
}

// Writes sums the operator's client requests that write, from its metrics at
// metricsAddr (rest_client_requests_total with method POST, PUT, PATCH or
// DELETE; Events included).
func Writes(metricsAddr string) (float64, error) {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// Plain HTTP needs the operator's --metrics-secure=false: a bench must not
	// read a refusal as zero writes.
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET http://%s/metrics: %s (run the operator with --metrics-secure=false)", metricsAddr, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		labels, value, ok := strings.Cut(line, "} ")
		if !ok {
			continue
		}
		for _, m := range []string{`method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`} {
			if strings.Contains(labels, m) {
				v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
				if err != nil {
					return 0, err
				}
				total += v
			}
		}
	}
	return total, nil
}

// LoggedAt is when the operator logging to dir/operator.log first logged msg
// for controller (zero: never).
func LoggedAt(dir, controller, msg string) time.Time {
	data, err := os.ReadFile(filepath.Join(dir, "operator.log"))
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(data), "\n") {
		var entry struct {
			TS         string `json:"ts"`
			Msg        string `json:"msg"`
			Controller string `json:"controller"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil || entry.Msg != msg || entry.Controller != controller {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, entry.TS); err == nil {
			return t
		}
	}
	return time.Time{}
}
