#!/usr/bin/env bash
# Runs the upstream Kubernetes LoadBalancer e2e specs (e2e.test of the
# Kubernetes module, --provider=skeleton) against the operator, installed from
# deploy/bundle.yaml on a fresh cluster (hack/cluster.sh) per kube-proxy mode,
# with one IPGroup: L2 on the nodes' LAN (ANNOUNCE=L2, the default), or BGP
# to the LAN's FRR router (ANNOUNCE=BGP: a BGPPeer, and a pool the router
# learns and spreads over the advertising nodes). The runner runs in the
# client's namespace beyond the router, as a user outside the cluster would.
#
#   [ANNOUNCE=L2|BGP] [IP_MODE=Proxy|VIP] hack/e2e-upstream.sh [MODE ...]
#                                   MODE: nftables, iptables (default: both)
#
# ECMP_HASH=l3 has the BGP router hash a client's packets on addresses only
# (hack/cluster.sh), as sessionAffinity ClientIP over ECMP needs.
#
# IP_MODE=VIP runs the operator with --ip-mode=VIP (kube-proxy forwards the VIPs,
# the agents only announce them): the specs that skip themselves for ipMode
# Proxy run there.
#
# FOCUS (default 'LoadBalancer') and SKIP are ginkgo regular expressions;
# docs/e2e.md lists the specs and the reason for any skip. Prints the runner's
# summary per mode, then one line per mode and a total:
#   nftables (L2, ipMode Proxy): 16 passed, 0 failed, 2 skipped
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
k8s=$root/bin/k8s
modes=("$@")
[[ ${#modes[@]} -gt 0 ]] || modes=(nftables iptables)
focus=${FOCUS:-LoadBalancer}
skip=${SKIP:-}
announce=${ANNOUNCE:-L2}
ip_mode=${IP_MODE:-Proxy}
results=()
passed=0 failed=0 skipped=0

run_mode() {
  local mode=$1 dir
  dir=$(mktemp -d /tmp/vip-e2e-upstream.XXXXXX)
  KUBE_PROXY_MODE=$mode "$root/hack/cluster.sh" up "$dir"
  # shellcheck disable=SC1091
  source "$dir/env"
  # Set after the source: a RETURN trap also fires when a sourced file ends.
  trap '"$root/hack/cluster.sh" down "'"$dir"'"' RETURN
  export KUBECONFIG
  local kubectl=$k8s/kubectl
  $kubectl create namespace vip-allocator-operator
  $kubectl create -f "$root/deploy/bundle.yaml" >/dev/null
  if [[ $ip_mode != Proxy ]]; then
    $kubectl -n vip-allocator-operator patch deployment vip-allocator-operator --type json \
      -p '[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--ip-mode='"$ip_mode"'"}]'
  fi
  $kubectl -n vip-allocator-operator rollout status deployment/vip-allocator-operator --timeout=180s
  for _ in $(seq 60); do $kubectl -n vip-allocator-operator get daemonset/vip-allocator-agent >/dev/null 2>&1 && break; sleep 1; done
  $kubectl -n vip-allocator-operator rollout status daemonset/vip-allocator-agent --timeout=180s
  if [[ $announce == BGP ]]; then
    $kubectl apply -f - <<EOF
apiVersion: paas.org/v1
kind: BGPPeer
metadata: {name: lab-router}
spec: {peerAddress: "$ROUTER_IP", peerASN: $ROUTER_ASN, myASN: $NODE_ASN}
---
apiVersion: paas.org/v1
kind: IPGroup
metadata: {name: routed}
spec:
  segment: "$BGP_POOL"
  announce: {mode: BGP}
EOF
  else
    $kubectl apply -f - <<EOF
apiVersion: paas.org/v1
kind: IPGroup
metadata: {name: lan}
spec:
  segment: "$LAN_POOL"
EOF
  fi
  local log=$dir/e2e.log
  ip netns exec "$CLIENT_NETNS" "$k8s/e2e.test" --provider=skeleton --kubeconfig="$KUBECONFIG" \
    --kubectl-path="$kubectl" --ginkgo.focus="$focus" ${skip:+--ginkgo.skip="$skip"} \
    --ginkgo.no-color --ginkgo.timeout=3h --report-dir="$dir/report" 2>&1 | tee "$log" || true
  # Ginkgo's last line: "SUCCESS! -- 18 Passed | 0 Failed | 0 Pending | 7561 Skipped" (or FAIL!);
  # its skipped count is every spec outside the focus, so the focused ones it skipped are counted
  # from the "Ran N of M Specs" line and the spec count the focus selects.
  local p f ran
  p=$(grep -oE '[0-9]+ Passed' "$log" | tail -1 | cut -d' ' -f1)
  f=$(grep -oE '[0-9]+ Failed' "$log" | tail -1 | cut -d' ' -f1)
  ran=$(grep -oE 'Ran [0-9]+ of' "$log" | tail -1 | cut -d' ' -f2)
  local selected
  selected=$("$k8s/e2e.test" --provider=skeleton --ginkgo.focus="$focus" --ginkgo.dry-run --ginkgo.no-color 2>/dev/null |
    grep -oE 'Ran [0-9]+ of' | tail -1 | cut -d' ' -f2)
  local s=$(( ${selected:-0} - ${ran:-0} ))
  # One line per spec that ran, from the runner's JUnit report: its result and time.
  grep -ohE '<testcase name="[^"]*" classname="[^"]*" status="(passed|failed)" time="[0-9.]+"' "$dir"/report/*.xml 2>/dev/null |
    sed -E 's/<testcase name="(\[It\] )?([^"]*)" classname="[^"]*" status="([a-z]+)" time="([0-9.]+)"/  \3 \4 s  \2/' || true
  results+=("$mode ($announce${ECMP_HASH:+, ECMP $ECMP_HASH}, ipMode $ip_mode): ${p:-0} passed, ${f:-0} failed, $s skipped")
  passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0})) skipped=$((skipped + s))
  [[ -n $p ]] || failed=$((failed + 1)) # no summary: the runner itself failed
}

for mode in "${modes[@]}"; do run_mode "$mode"; done
echo
printf '%s\n' "${results[@]}"
echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed == 0 ]]
