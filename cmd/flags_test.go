package cmd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/migration"
	"github.com/paas-org/vip-allocator-operator/nodeagent/announce"
)

// TestFlagsAndDefaults: every command keeps its flags, their defaults, and
// the kubectl flags that pick the cluster; a flag set from the environment
// ($POD_NAMESPACE) is listed with nil.
func TestFlagsAndDefaults(t *testing.T) {
	kubectl := map[string]any{"kubeconfig": "", "context": ""}
	migrate := map[string]any{"namespace": "", "own-class-only": false, "migration-cutover-delay": migration.DefaultCutoverDelay,
		"migration-handover-delay": migration.DefaultCutoverDelay, "operator-namespace": paasv1.DefaultNamespace, "zap-log-level": nil}
	metallb := map[string]any{"metallb-namespace": "metallb-system", "operator-namespace": paasv1.DefaultNamespace, "scale-down-controller": false}
	for command, flags := range map[string]map[string]any{
		"operator": {"leader-elect": true, "leader-election-namespace": "", "metrics-bind-address": ":8443", "metrics-secure": true,
			"health-probe-bind-address": ":8081", "pprof-bind-address": "", "own-class-only": false, "workers": DefaultWorkers,
			"kube-api-qps": DefaultQPS, "kube-api-burst": DefaultBurst, "ip-mode": "Proxy",
			"released-address-grace": service.DefaultReleasedAddressGrace, "admission-policies": false, "namespace": nil,
			"agent-image": "", "migration-workers": 8, "migration-cutover-delay": migration.DefaultCutoverDelay,
			"migration-handover-delay": migration.DefaultCutoverDelay, "service-cidrs": "", "agent-node-selector": "",
			"agent-args": "", "on-cordon": "handover", "agent-tolerations": "", "zap-log-level": nil, "zap-devel": false,
			"zap-encoder": nil, "zap-stacktrace-level": nil, "zap-time-encoding": nil},
		"agent": {"node-name": "", "own-class-only": false, "resync-period": time.Minute, "check-period": 5 * time.Second,
			"masquerade-bit": 21, "dataplane": "auto", "namespace": nil, "memberlist-port": paasv1.AgentMemberlistPort,
			"bind-address": "", "handover-delay": 2 * time.Second, "failover-history": announce.DefaultHistoryLimit,
			"bgp-graceful-shutdown": 5 * time.Second, "on-stop": "auto", "on-cordon": "handover", "liveness-timers": "tuned",
			"arp-probe-period": 10 * time.Second, "new-address-probes": 3, "new-address-probe-interval": 330 * time.Millisecond,
			"new-address-recheck": 5 * time.Minute, "gossip-key-poll": 30 * time.Second, "connection-handoff": true,
			"return-paths": true, "kube-api-qps": 20, "kube-api-burst": 400,
			"metrics-bind-address": "", "pprof-bind-address": "", "metrics-secure": true,
			"health-probe-bind-address": fmt.Sprintf("127.0.0.1:%d", paasv1.AgentProbePort), "daemonset": "", "zap-log-level": nil},
		"migrate plan":          migrate,
		"migrate all":           migrate,
		"migrate upgrade":       migrate,
		"migrate metallb plan":  metallb,
		"migrate metallb apply": metallb,
		"explain": {"namespace": "", "cluster": "", "user": "", "output": "", "what-if-drain": "",
			"agent-namespace": paasv1.DefaultNamespace, "agent-port": paasv1.AgentMetricsPort, "agent-token": "",
			"agent-timeout": 5 * time.Second, "agent-url": "[]"},
	} {
		c, _, err := NewRoot(Name).Find(strings.Fields(command))
		if err != nil || c.CommandPath() != Name+" "+command {
			t.Errorf("no command %q: %v", command, err)
			continue
		}
		for _, set := range []map[string]any{kubectl, flags} {
			for name, def := range set {
				f := c.Flags().Lookup(name)
				switch {
				case f == nil:
					t.Errorf("%s has no --%s", command, name)
				case def != nil && f.DefValue != fmt.Sprint(def):
					t.Errorf("%s --%s defaults to %q, want %q", command, name, f.DefValue, fmt.Sprint(def))
				}
			}
		}
	}
	for command, short := range map[string]string{"operator": "namespace", "agent": "namespace", "migrate plan": "namespace",
		"explain": "namespace"} {
		c, _, _ := NewRoot(Name).Find(strings.Fields(command))
		if f := c.Flags().ShorthandLookup("n"); f == nil || f.Name != short {
			t.Errorf("%s: -n is not --%s", command, short)
		}
	}
}

// TestCallersParse: the command lines the manifests, scripts, benchmarks,
// tests and the operator's DaemonSet run parse as before.
func TestCallersParse(t *testing.T) {
	for _, line := range []string{
		// config/manager/manager.yaml
		"operator --leader-elect",
		// hack/demo.sh
		"operator --kubeconfig k --namespace vip-allocator-operator --agent-image vip-allocator:demo --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0",
		"agent --node-name node1 --kubeconfig k --metrics-bind-address 0 --health-probe-bind-address 0",
		// bench/internal/operatorproc
		"operator --kubeconfig k --leader-elect=false --zap-log-level info --zap-time-encoding rfc3339nano --workers 64",
		// bench/agent, test/e2e
		"agent --node-name n --kubeconfig k --dataplane nftables --metrics-bind-address 0 --health-probe-bind-address 0 --pprof-bind-address 127.0.0.1:6060",
		"agent --node-name n --kubeconfig k --resync-period 3s --check-period 500ms --liveness-timers lan --metrics-secure=false",
		// the operator's DaemonSet (controllers/agent), with --agent-args
		"agent --node-name=$(NODE_NAME) --daemonset=vip-allocator-operator/vip-allocator-agent --dataplane=iptables --memberlist-port=7947",
		"agent cleanup",
		"migrate plan --kubeconfig k --namespace shop",
		"migrate all --own-class-only --migration-handover-delay 1m",
		"migrate upgrade --operator-namespace vip-allocator-operator",
		"migrate metallb plan --metallb-namespace metallb-system",
		"migrate metallb apply --scale-down-controller",
		// test/e2e: explain and kubectl vip explain
		"explain svc/shop -n default --kubeconfig k --agent-url node1=https://192.0.2.1:9478,node2=https://192.0.2.2:9478 --agent-timeout 3s",
		"explain ip 192.0.2.7 -o json --what-if-drain node1",
	} {
		args := strings.Fields(line)
		c, rest, err := NewRoot(Name).Find(args)
		if err == nil {
			err = c.ParseFlags(rest)
		}
		if err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
}
