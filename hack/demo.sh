#!/usr/bin/env bash
# make demo: the operator on a local control plane (no cluster needed).
# Applies the original operator's IPGroup and three LoadBalancer Services: one
# takes the next free IP, one asks for a specific IP, one asks for an excluded IP
# and is told why it waits. Then (as root) a client, a node running the agent and
# a backend in network namespaces: curl through the VIP. KEEP=1 leaves everything running.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/vip-allocator-demo.XXXXXX)
kubectl() { "$root/bin/k8s/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

lab=vipdemo$$-
inns() { local ns=$1; shift; ip netns exec "$lab$ns" "$@"; }
teardown() {
  for p in "$dir"/*.pid; do [[ -f "$p" ]] && kill "$(cat "$p")" 2>/dev/null || true; done
  for ns in client node1 backend; do ip netns delete "$lab$ns" 2>/dev/null || true; done
  "$root/hack/local-cluster.sh" down "$dir"
}
if [[ "${KEEP:-0}" == 1 ]]; then
  trap 'echo; echo "KEEP=1: still running. export KUBECONFIG=$dir/kubeconfig; stop with: kill \$(cat $dir/operator.pid); hack/local-cluster.sh down $dir"' EXIT
else
  trap teardown EXIT
fi

say "starting a local control plane (etcd + kube-apiserver from bin/k8s)"
"$root/hack/local-cluster.sh" up "$dir"

say "starting the operator as its ServiceAccount (log: $dir/operator.log)"
"$root/bin/vip-allocator" operator --kubeconfig "$dir/operator.kubeconfig" \
  --leader-election-namespace vip-allocator-operator \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 >"$dir/operator.log" 2>&1 &
echo $! > "$dir/operator.pid"

say "kubectl apply -f config/samples/ipgroup.yaml"
cat "$root/config/samples/ipgroup.yaml"
kubectl apply -f "$root/config/samples/ipgroup.yaml"

say "kubectl apply -f config/samples/services.yaml  (web: any IP, api: asks 192.0.2.10, wrong: asks the excluded 192.0.2.255)"
kubectl apply -f "$root/config/samples/services.yaml"

for svc in web api; do
  kubectl wait --for=jsonpath='{.status.loadBalancer.ingress[0].ip}' "service/$svc" --timeout 60s >/dev/null
done
kubectl wait --for=condition=vip.paas.org/IPAllocated=False service/wrong --timeout 60s >/dev/null
sleep 1.5 # the IPGroup status batches counts for a second

say "kubectl get ipg,svc"
kubectl get ipg,svc

say "why 'wrong' has no IP: its vip.paas.org/IPAllocated condition"
kubectl get service wrong -o jsonpath='{range .status.conditions[*]}{.type}={.status} reason={.reason}{"\n"}message: {.message}{"\n"}{end}'

say "events on 'wrong'"
kubectl get events --field-selector involvedObject.name=wrong -o custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message

say "the ledger: one IP object per allocated address"
kubectl get ips.paas.org

if [[ $(id -u) != 0 ]]; then
  say "the data path part needs root (network namespaces): skipped"
  exit 0
fi

say "the data path: a client, a node running the agent, a backend pod, in network namespaces"
# client 203.0.113.10 --- 203.0.113.1 node1 198.51.100.1 --- 198.51.100.2 backend
for ns in client node1 backend; do ip netns add "$lab$ns"; inns $ns ip link set lo up; done
ip link add eth0 netns "${lab}client" type veth peer name lan netns "${lab}node1"
ip link add eth0 netns "${lab}backend" type veth peer name pods netns "${lab}node1"
inns client ip addr add 203.0.113.10/24 dev eth0; inns client ip link set eth0 up
inns node1 ip addr add 203.0.113.1/24 dev lan; inns node1 ip link set lan up
inns node1 ip addr add 198.51.100.1/24 dev pods; inns node1 ip link set pods up
inns backend ip addr add 198.51.100.2/24 dev eth0; inns backend ip link set eth0 up
inns backend ip route add default via 198.51.100.1
inns node1 sysctl -qw net.ipv4.ip_forward=1
# Without announcement (the next issue), the client routes the VIP range to the node.
inns client ip route add 192.0.2.0/24 via 203.0.113.1

mkdir -p "$dir/www" && echo "hello from the backend pod behind the VIP" > "$dir/www/index.html"
(cd "$dir/www" && exec ip netns exec "${lab}backend" python3 -m http.server 8080 --bind 198.51.100.2 >/dev/null 2>&1) &
echo $! > "$dir/backend.pid"

# The node reaches the API server on the host's loopback through a Unix socket
# (shared by all namespaces), as a real node reaches its control plane.
socat UNIX-LISTEN:"$dir/api.sock",fork TCP:127.0.0.1:${API_PORT:-16443} & echo $! > "$dir/socat-host.pid"
ip netns exec "${lab}node1" socat TCP-LISTEN:6443,bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:"$dir/api.sock" & echo $! > "$dir/socat-node.pid"
agent_token=$(kubectl -n vip-allocator-operator create token vip-allocator-agent --duration 1h)
sed -e "s#server: .*#server: \"https://127.0.0.1:6443\", insecure-skip-tls-verify: true}#" \
    -e "s#token: .*#token: \"$agent_token\"}#" "$dir/kubeconfig" > "$dir/agent.kubeconfig"

say "starting the agent in node1 as its ServiceAccount (log: $dir/agent.log)"
ip netns exec "${lab}node1" "$root/bin/vip-allocator" agent --node-name node1 --kubeconfig "$dir/agent.kubeconfig" \
  --metrics-bind-address 0 --health-probe-bind-address 0 >"$dir/agent.log" 2>&1 &
echo $! > "$dir/agent.pid"

say "an EndpointSlice for 'web': the backend pod on node1 (no kubelet here, so we write it)"
kubectl apply -f - <<'YAML'
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints: [{addresses: ["198.51.100.2"], nodeName: node1, conditions: {ready: true}}]
YAML

vip=$(kubectl get service web -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
say "from the client: curl http://$vip/"
for i in $(seq 50); do
  if out=$(inns client curl -sS --max-time 2 "http://$vip/" 2>&1); then break; fi
  sleep 0.2
done
echo "$out"

say "the agent's rules in node1 (iptables-save -t nat | grep VIPA-)"
inns node1 iptables-save -t nat 2>/dev/null | grep -E '^-A VIPA-(SERVICES|SVC)' | head -8
