#!/usr/bin/env bash
# make demo: the operator on a local control plane (no cluster needed).
# Applies the original operator's IPGroup and three LoadBalancer Services: one
# takes the next free IP, one asks for a specific IP, one asks for an excluded IP
# and is told why it waits. KEEP=1 leaves everything running.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/vip-allocator-demo.XXXXXX)
kubectl() { "$root/bin/k8s/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

teardown() {
  [[ -f "$dir/operator.pid" ]] && kill "$(cat "$dir/operator.pid")" 2>/dev/null || true
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
