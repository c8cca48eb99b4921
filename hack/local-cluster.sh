#!/usr/bin/env bash
# A local control plane with no cluster: etcd and kube-apiserver on loopback,
# built by 'make controlplane' (the same binaries the tests use).
#
#   hack/local-cluster.sh up DIR     start, install CRDs/RBAC/admission policies,
#                                    write DIR/kubeconfig (admin) and
#                                    DIR/operator.kubeconfig (the operator's ServiceAccount)
#   hack/local-cluster.sh down DIR   stop and delete DIR
#
# Ports: API_PORT (default 16443), ETCD_PORT (default 12379).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KUBEBUILDER_ASSETS:-$root/bin/k8s}
cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 up|down DIR" >&2; exit 2; }
api_port=${API_PORT:-16443}
etcd_port=${ETCD_PORT:-12379}
kubectl() { "$bin/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }

down() {
  for p in kube-apiserver etcd; do
    if [[ -f "$dir/$p.pid" ]]; then
      kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$(cat "$dir/$p.pid")" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$(cat "$dir/$p.pid")" 2>/dev/null || true
    fi
  done
  rm -rf "$dir"
}

up() {
  for b in etcd kube-apiserver kubectl; do
    [[ -x "$bin/$b" ]] || { echo "$bin/$b is missing: run 'make controlplane'" >&2; exit 1; }
  done
  mkdir -p "$dir/certs"
  dir=$(cd "$dir" && pwd)
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "$token,admin,admin,system:masters" > "$dir/tokens.csv"

  "$bin/etcd" --data-dir "$dir/etcd" --name local \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
    --initial-cluster "local=http://127.0.0.1:$((etcd_port + 1))" \
    --unsafe-no-fsync --quota-backend-bytes 8589934592 >"$dir/etcd.log" 2>&1 &
  echo $! > "$dir/etcd.pid"

  "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" --cert-dir "$dir/certs" \
    --token-auth-file "$dir/tokens.csv" --authorization-mode RBAC --allow-privileged \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$dir/sa.pub" \
    --service-account-signing-key-file "$dir/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16,fd00:10:96::/108 \
    --max-requests-inflight 1000 --max-mutating-requests-inflight 500 >"$dir/kube-apiserver.log" 2>&1 &
  echo $! > "$dir/kube-apiserver.pid"

  cat > "$dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:$api_port", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: "$token"}
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
KUBECONFIG

  # Up to 2 minutes: a loaded CI machine starting several API servers at once is slow.
  for i in $(seq 240); do
    kubectl get --raw /readyz >/dev/null 2>&1 && break
    [[ $i == 240 ]] && { echo "kube-apiserver did not become ready; the end of $dir/kube-apiserver.log:" >&2; tail -20 "$dir/kube-apiserver.log" >&2; exit 1; }
    sleep 0.5
  done
  for i in $(seq 60); do kubectl get namespace default >/dev/null 2>&1 && break; sleep 0.5; done

  kubectl apply -k "$root/config/crd" >/dev/null
  kubectl create namespace vip-allocator-operator >/dev/null
  kubectl apply -k "$root/config/rbac" >/dev/null
  kubectl apply -k "$root/config/admission" >/dev/null
  kubectl wait --for condition=Established crd --all --timeout 60s >/dev/null

  optoken=$(kubectl -n vip-allocator-operator create token vip-allocator-operator --duration 24h)
  sed -e "s/name: admin/name: operator/; s/user: admin/user: operator/; s/token: \"$token\"/token: \"$optoken\"/" \
    "$dir/kubeconfig" > "$dir/operator.kubeconfig"
  echo "local control plane up: export KUBECONFIG=$dir/kubeconfig"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down DIR" >&2; exit 2 ;;
esac
