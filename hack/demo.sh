#!/usr/bin/env bash
# make demo: the operator on a local control plane (no cluster needed).
# Applies the original operator's IPGroup and three LoadBalancer Services: one
# takes the next free IP, one asks for a specific IP, one asks for an excluded IP
# and is told why it waits, and one asks for a node's address and is refused. Then (as root) a client, a router, three nodes running the
# agent and a backend in network namespaces: the router already has the address web
# got, answers the probe sent before its first announcement, and web moves on; which node answers ARP for the VIP,
# curl through it, a failover when the owner's agent is killed, and a planned move that keeps
# an open connection.
# KEEP=1 leaves everything running.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/vip-allocator-demo.XXXXXX)
kubectl() { "$root/bin/k8s/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

lab=vipdemo$$-
inns() { local ns=$1; shift; ip netns exec "$lab$ns" "$@"; }
teardown() {
  for p in "$dir"/*.pid; do
    if [[ -f "$p" ]]; then kill "$(cat "$p")" 2>/dev/null || true; fi
  done
  for ns in client router node1 node2 node3 backend sw; do ip netns delete "$lab$ns" 2>/dev/null || true; done
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
  --namespace vip-allocator-operator --agent-image vip-allocator:demo \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 >"$dir/operator.log" 2>&1 &
echo $! > "$dir/operator.pid"

say "registering node1-3 on 192.0.2.251-.253, as their kubelets would"
for n in 1 2 3; do
  kubectl create -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata: {name: node$n}
YAML
  kubectl patch node node$n --subresource=status --type=merge \
    -p "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"192.0.2.25$n\"}]}}" >/dev/null
done
kubectl get nodes -o custom-columns=NAME:.metadata.name,INTERNAL-IP:.status.addresses[0].address

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

say "a Service asking for node1's address 192.0.2.251 (inside the group) is refused: the address is reserved"
kubectl apply -f - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: node-ip, namespace: default, annotations: {vip.paas.org/ips: "192.0.2.251"}}
spec: {type: LoadBalancer, selector: {app: web}, ports: [{name: http, port: 80, targetPort: 8080}]}
YAML
kubectl wait --for=condition=vip.paas.org/IPAllocated=False service/node-ip --timeout 60s >/dev/null
kubectl get service node-ip -o jsonpath='{range .status.conditions[*]}{.type}={.status} reason={.reason}{"\n"}message: {.message}{"\n"}{end}'

say "events on 'wrong'"
kubectl get events --field-selector involvedObject.name=wrong -o custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message

say "the ledger: one IP object per allocated address"
kubectl get ips.paas.org

if [[ $(id -u) != 0 ]]; then
  say "the data path part needs root (network namespaces): skipped"
  exit 0
fi

say "the data path: a client, a router at 192.0.2.1 and three nodes on one LAN (192.0.2.0/24, the VIPs' segment), a backend pod on node1"
# A "switch" namespace holds two bridges: lan (client .250, nodeN .25N) and
# pods (nodeN 198.51.100.N, the backend 198.51.100.11 behind node1).
for ns in sw client router node1 node2 node3 backend; do ip netns add "$lab$ns"; inns $ns ip link set lo up; done
for br in lan pods; do inns sw ip link add $br type bridge; inns sw ip link set $br up; done
plug() { # plug NS IFNAME BRIDGE ADDR
  ip link add "$2" netns "$lab$1" type veth peer name "$1-$2" netns "${lab}sw"
  inns sw ip link set "$1-$2" master "$3" up
  inns "$1" ip addr add "$4" dev "$2"; inns "$1" ip link set "$2" up
}
plug client eth0 lan 192.0.2.250/24
# The LAN's router has 192.0.2.1, which web got above (no agent ran to look).
plug router eth0 lan 192.0.2.1/24
inns client bash -c "echo x > /dev/udp/192.0.2.1/9"; sleep 0.3 # the client talks to its router
for n in 1 2 3; do
  plug node$n eth0 lan 192.0.2.25$n/24
  plug node$n pods pods 198.51.100.$n/24
  inns node$n sysctl -qw net.ipv4.ip_forward=1
done
plug backend eth0 pods 198.51.100.11/24
inns backend ip route add default via 198.51.100.1

mkdir -p "$dir/www" && echo "hello from the backend pod behind the VIP" > "$dir/www/index.html"
# HTTP/1.1, so a client can keep its connection open (the planned move below).
(cd "$dir/www" && exec ip netns exec "${lab}backend" python3 -c 'import http.server as h
h.SimpleHTTPRequestHandler.protocol_version = "HTTP/1.1"
h.ThreadingHTTPServer(("198.51.100.11", 8080), h.SimpleHTTPRequestHandler).serve_forever()' >/dev/null 2>&1) &
echo $! > "$dir/backend.pid"

# Each node reaches the API server on the host's loopback through a Unix
# socket (shared by all namespaces), as a real node reaches its control plane.
socat UNIX-LISTEN:"$dir/api.sock",fork TCP:127.0.0.1:"${API_PORT:-16443}" & echo $! > "$dir/socat-host.pid"
# Each agent gets a token bound to a pod on its node, as the kubelet gives the
# DaemonSet's pods: the API server writes the node's name into it, and the
# admission policies let an agent write only its own node's parts. No kubelet
# runs here, so the pods stay Pending; they exist only to bind the tokens.
for n in 1 2 3; do
  kubectl apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: agent-node$n, namespace: vip-allocator-operator}
spec:
  nodeName: node$n
  serviceAccountName: vip-allocator-agent
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers: [{name: agent, image: vip-allocator:demo}]
POD
  agent_token=$(kubectl -n vip-allocator-operator create token vip-allocator-agent --bound-object-kind Pod --bound-object-name agent-node$n --duration 1h)
  sed -e "s#server: .*#server: \"https://127.0.0.1:6443\", insecure-skip-tls-verify: true}#" \
      -e "s#token: .*#token: \"$agent_token\"}#" "$dir/kubeconfig" > "$dir/agent-node$n.kubeconfig"
done
for n in 1 2 3; do
  ip netns exec "${lab}node$n" socat TCP-LISTEN:6443,bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:"$dir/api.sock" &
  echo $! > "$dir/socat-node$n.pid"
done

say "starting an agent in each node as its ServiceAccount (logs: $dir/agent-node*.log)"
start_agent() {
  ip netns exec "${lab}$1" "$root/bin/vip-allocator" agent --node-name "$1" --kubeconfig "$dir/agent-$1.kubeconfig" \
    --metrics-bind-address 0 --health-probe-bind-address 0 >>"$dir/agent-$1.log" 2>&1 &
  echo $! > "$dir/agent-$1.pid"; disown $!
}
for n in node1 node2 node3; do start_agent $n; done

say "an EndpointSlice for 'web': the backend pod on node1 (no kubelet here, so we write it)"
kubectl apply -f - <<'YAML'
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints: [{addresses: ["198.51.100.11"], nodeName: node1, conditions: {ready: true}}]
YAML

say "web's address 192.0.2.1 was never announced: its owner probes it first (ARP probe), and the router answers"
web_ip() { kubectl get service web -o jsonpath='{.status.loadBalancer.ingress[0].ip}'; }
for _ in $(seq 150); do [[ "$(web_ip)" != 192.0.2.1 ]] && break; sleep 0.2; done
echo "the router's MAC: $(inns router cat /sys/class/net/eth0/address)"
kubectl get ips.paas.org 192.0.2.1 -o jsonpath='{range .status.conditions[?(@.type=="InUseOnLAN")]}IP 192.0.2.1: InUseOnLAN={.status} reason={.reason}{"\n"}message: {.message}{"\n"}{end}'
kubectl get events --field-selector involvedObject.name=web,reason=AddressInUseOnLAN -o custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message
echo "the client's neighbour entry for 192.0.2.1: $(inns client ip neigh show 192.0.2.1 dev eth0 | grep -o 'lladdr [0-9a-f:]*') (still the router's)"

vip=$(web_ip)
announcer() { kubectl get ips.paas.org "$vip" -o jsonpath='{.status.announcedBy[0]}'; }
for _ in $(seq 100); do [[ -n "$(announcer)" ]] && break; sleep 0.2; done
kubectl wait --for=condition=vip.paas.org/Announced service/web --timeout 30s >/dev/null

say "kubectl get ipg,svc,ip"
kubectl get ipg,svc,ips.paas.org

mac_of() { inns "$1" cat /sys/class/net/eth0/address; }
node_of_mac() { for n in node1 node2 node3; do [[ "$(mac_of $n)" == "$1" ]] && echo "$n"; done; }
say "who answers ARP for $vip on the LAN (arping from the client)"
for _ in $(seq 20); do # right after start the agents may still be settling who owns what
  reply=$(inns client arping -c 1 -w 2 -I eth0 "$vip" | grep -io 'reply from .*\]' | head -1)
  mac=$(echo "$reply" | grep -o '\[.*\]' | tr -d '[]' | tr 'A-F' 'a-f')
  [[ -n "$mac" && "$(node_of_mac "$mac")" == "$(announcer)" ]] && break
  sleep 0.5
done
echo "$reply   → $(node_of_mac "$mac"), the owner the ledger names: $(announcer)"
kubectl get service web -o jsonpath='{range .status.conditions[?(@.type=="vip.paas.org/Announced")]}{.type}: {.message}{"\n"}{end}'

say "from the client: curl http://$vip/"
for _ in $(seq 50); do
  if out=$(inns client curl -sS --max-time 2 "http://$vip/" 2>&1); then break; fi
  sleep 0.2
done
echo "$out"

owner=$(announcer)
say "failover: kill -9 the agent of $owner, the owner of $vip"
neigh() { inns client ip neigh show "$vip" dev eth0 | grep -o 'lladdr [0-9a-f:]*' | cut -d' ' -f2; }
kill -9 "$(cat "$dir/agent-$owner.pid")"
t0=$(date +%s%N)
for _ in $(seq 1000); do
  now=$(neigh)
  if [[ -n "$now" && "$now" != "$(mac_of "$owner")" ]]; then break; fi
  sleep 0.01
done
t1=$(date +%s%N)
printf 'failover: %s is answered by %s after %d ms (the client'"'"'s neighbour entry moved by gratuitous ARP)\n' \
  "$vip" "$(node_of_mac "$now")" $(( (t1 - t0) / 1000000 ))
echo "curl http://$vip/ → $(inns client curl -sS --max-time 2 "http://$vip/" 2>&1)"
for _ in $(seq 50); do [[ "$(announcer)" != "$owner" ]] && break; sleep 0.1; done
echo "the ledger now names $(announcer); the Service condition says:"
sleep 1
kubectl get service web -o jsonpath='{range .status.conditions[?(@.type=="vip.paas.org/Announced")]}{.type}: {.message}{"\n"}{end}'
start_agent "$owner"
for _ in $(seq 100); do [[ "$(announcer)" == "$owner" ]] && break; sleep 0.2; done # it gets its VIP back

say "planned move: cordon $owner, the owner, while the client holds a connection to $vip open"
# One keep-alive HTTP connection (bash's /dev/tcp): a request before the move and one after it.
# shellcheck disable=SC2016 # the script is the client's: its variables are its own, only $vip is ours
inns client bash -c '
  exec 3<>/dev/tcp/'"$vip"'/80
  ask() {
    printf "GET / HTTP/1.1\r\nHost: vip\r\n\r\n" >&3
    while IFS= read -r -t 3 line <&3; do
      if [[ $line == hello* ]]; then echo "same connection, $1: $line"; return; fi
    done
    echo "same connection, $1: broken"
  }
  ask "before the move"; sleep 4; ask "after the move"' &
client=$!
sleep 1
kubectl cordon "$owner" >/dev/null
for _ in $(seq 100); do [[ "$(announcer)" != "$owner" ]] && break; sleep 0.05; done
echo "$(announcer) took $vip over from $owner"
wait $client
kubectl uncordon "$owner" >/dev/null
