#!/usr/bin/env bash
# A real three-node Kubernetes cluster on this machine, offline: the control
# plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) in one
# network namespace, and three nodes, each a network namespace with its own
# mount namespace, containerd + runc, a kubelet, the CNI plugins (ptp +
# host-local + portmap) and kube-proxy, on one LAN bridge. A router namespace
# joins the LAN to a client namespace outside it, as a LAN's router would.
# The binaries come from bin/k8s ('make cluster-binaries'), the images from
# bin/images ('make images'), imported into every node's containerd.
#
#   KUBE_PROXY_MODE=nftables|iptables hack/cluster.sh up DIR
#   hack/cluster.sh down DIR
#
# 'up' writes DIR/kubeconfig (admin; the API server is reached from this host
# through a point-to-point link) and DIR/env (shell assignments: CLIENT_NETNS,
# ROUTER_NETNS, NODE_NETNS, LAN_POOL, AGNHOST_IMAGE, KUBECONFIG; for BGP:
# BGP_POOL, ROUTER_IP, ROUTER_ASN, NODE_ASN, ROUTER_VTY for vtysh). 'down' stops
# and removes everything 'up' made (processes, mounts, cgroups, namespaces),
# also after a failed 'up'. One cluster at a time: the addresses are fixed.
#
# Addresses (documentation ranges only):
#   192.0.2.0/24        the LAN: router .1, control plane .10, nodes .11-.13,
#                       LAN_POOL 192.0.2.192/27 free for VIPs
#   203.0.113.0/27      BGP_POOL: VIPs the router (FRR, AS 64512) learns by BGP
#   198.51.100.0/25     the client's network behind the router (client .2)
#   198.51.100.252/30   this host (.253) to the control plane (.254)
#   10.244.N.0/24       node N's pods (inside the lab's namespaces only)
#   10.96.0.0/16        Service ClusterIPs (inside the lab's namespaces only)
set -Eeuo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s=${K8S_BIN:-$root/bin/k8s}
images=${IMAGES:-$root/bin/images}
cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: KUBE_PROXY_MODE=nftables|iptables $0 up|down DIR" >&2; exit 2; }
p=${CLUSTER_NAME:-vipc}
nodes=(1 2 3)
mode=${KUBE_PROXY_MODE:-nftables}
api=198.51.100.254
lan_pool=192.0.2.192/27
bgp_pool=203.0.113.0/27
agnhost=registry.k8s.io/e2e-test-images/agnhost:2.63.0
cgroup_hierarchies=(cpu cpuacct cpuset memory devices freezer blkio pids systemd)

log() { echo "cluster: $*" >&2; }
inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
kubectl() { "$k8s/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }

# start NAME CMD...: runs CMD in the background in its own session, its log
# and pid under DIR/run, so 'down' finds every process by its pid file.
start() {
  local name=$1; shift
  setsid "$@" >"$dir/run/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/run/$name.pid"
}

stop() {
  local f pid
  for f in "$@"; do
    [[ -f $f ]] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

wait_for() {
  local what=$1 tries=$2; shift 2
  for _ in $(seq "$tries"); do "$@" >/dev/null 2>&1 && return; sleep 1; done
  log "timed out waiting for $what"
  return 1
}

# --- network ---------------------------------------------------------------

link() { # link NS1 IF1 NS2 IF2: a veth pair between two namespaces ("" = this host),
  # made inside them at once: a name such as eth0 may exist on this host.
  ip link add "$2" ${1:+netns "$1"} type veth peer name "$4" ${3:+netns "$3"}
}

network() {
  local n
  for ns in sw cp rtr client "${nodes[@]/#/n}"; do ip netns add "$p-$ns"; inns "$p-$ns" ip link set lo up; done
  inns "$p-sw" ip link add br0 type bridge
  inns "$p-sw" ip link set br0 up
  lan() { # lan NS ADDR: joins NS to the LAN bridge
    link "$p-$1" eth0 "$p-sw" "$1"
    inns "$p-sw" ip link set "$1" master br0 up
    inns "$p-$1" ip addr add "$2/24" dev eth0
    inns "$p-$1" ip link set eth0 up
  }
  lan rtr 192.0.2.1
  lan cp 192.0.2.10
  for n in "${nodes[@]}"; do lan "n$n" "192.0.2.1$n"; done

  link "$p-client" eth0 "$p-rtr" client
  inns "$p-client" ip addr add 198.51.100.2/25 dev eth0
  inns "$p-client" ip link set eth0 up
  inns "$p-client" ip route add default via 198.51.100.1
  inns "$p-rtr" ip addr add 198.51.100.1/25 dev client
  inns "$p-rtr" ip link set client up
  inns "$p-rtr" sysctl -qw net.ipv4.ip_forward=1

  link "" "$p-api" "$p-cp" host
  ip addr add 198.51.100.253/30 dev "$p-api"
  ip link set "$p-api" up
  inns "$p-cp" ip addr add "$api/30" dev host
  inns "$p-cp" ip link set host up
  inns "$p-cp" ip route add default via 192.0.2.1
  # The client reaches the API server as this host does (the e2e runner sits there).
  inns "$p-rtr" ip route add 198.51.100.252/30 via 192.0.2.10

  for n in "${nodes[@]}"; do
    inns "$p-n$n" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
    # Without a default route a node's own connections to a ClusterIP fail
    # with ENETUNREACH before kube-proxy's DNAT sees them.
    inns "$p-n$n" ip route add default via 192.0.2.1
    for m in "${nodes[@]}"; do
      [[ $m == "$n" ]] || inns "$p-n$n" ip route add "10.244.$m.0/24" via "192.0.2.1$m"
    done
    inns "$p-rtr" ip route add "10.244.$n.0/24" via "192.0.2.1$n"
    inns "$p-cp" ip route add "10.244.$n.0/24" via "192.0.2.1$n"
  done
}

# router: FRR's zebra and bgpd in the router's namespace, accepting BGP from
# any node of the LAN (AS 64513) and spreading a VIP's traffic over every node
# that advertises it (ECMP). ECMP_HASH picks what the router hashes a packet's
# path on: l4 (addresses and ports: a client's connections spread over the
# nodes) or l3 (addresses only: each client stays on one node, what
# sessionAffinity ClientIP needs from a router that knows no Service).
# FRR's daemons run as its user, frr, which must reach their files, and DIR's
# parents may be closed to it (a mktemp directory, /root): the files live in
# /run/NAME-frr, and DIR/frr links there.
router() {
  local r=/run/$p-frr d
  rm -rf "$r"
  mkdir -p "$r"
  ln -sfn "$r" "$dir/frr"
  printf 'hostname lab-router\n' >"$r/zebra.conf"
  cat >"$r/bgpd.conf" <<EOF
hostname lab-router
router bgp 64512
 bgp router-id 192.0.2.1
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor nodes peer-group
 neighbor nodes remote-as 64513
 neighbor nodes timers 1 3
 bgp listen range 192.0.2.0/24 peer-group nodes
 address-family ipv4 unicast
  neighbor nodes activate
  maximum-paths 8
 exit-address-family
EOF
  chown -R frr:frr "$r"
  local policy
  case ${ECMP_HASH:-l4} in l4) policy=1 ;; l3) policy=0 ;; *) echo "ECMP_HASH must be l3 or l4" >&2; exit 2 ;; esac
  inns "$p-rtr" sysctl -qw net.ipv4.fib_multipath_hash_policy=$policy
  for d in zebra bgpd; do
    inns "$p-rtr" "/usr/lib/frr/$d" -d -u frr -g frr -f "$r/$d.conf" -i "$r/$d.pid" -z "$r/zserv.api" \
      --vty_socket "$r" --log "file:$r/$d.log"
  done
}

# --- certificates ----------------------------------------------------------

certs() {
  local c=$dir/pki
  mkdir -p "$c"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$c/ca.key" -out "$c/ca.crt" -days 2 -subj /CN=lab-ca 2>/dev/null
  # cert NAME CN [O] [SANS]: a key and a certificate signed by the lab's CA.
  cert() {
    local ext=$c/$1.ext
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' >"$ext"
    [[ -z ${4:-} ]] || echo "subjectAltName=$4" >>"$ext"
    openssl req -newkey rsa:2048 -nodes -keyout "$c/$1.key" -out "$c/$1.csr" -subj "/CN=$2${3:+/O=$3}" 2>/dev/null
    openssl x509 -req -in "$c/$1.csr" -CA "$c/ca.crt" -CAkey "$c/ca.key" -CAcreateserial -days 2 -extfile "$ext" -out "$c/$1.crt" 2>/dev/null
  }
  cert apiserver kube-apiserver "" "IP:$api,IP:192.0.2.10,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin lab-admin system:masters
  cert apiserver-kubelet kube-apiserver-kubelet-client system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert kube-proxy system:kube-proxy
  for n in "${nodes[@]}"; do cert "kubelet-$p-n$n" "system:node:$p-n$n" system:nodes; done
  openssl genrsa -out "$c/sa.key" 2048 2>/dev/null
  openssl rsa -in "$c/sa.key" -pubout -out "$c/sa.pub" 2>/dev/null

  # kubeconfig NAME SERVER CERT: a kubeconfig for one identity.
  kubeconfig() {
    cat >"$dir/$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://$2:6443", certificate-authority: $c/ca.crt}}]
users: [{name: u, user: {client-certificate: $c/$3.crt, client-key: $c/$3.key}}]
contexts: [{name: lab, context: {cluster: lab, user: u}}]
current-context: lab
EOF
  }
  kubeconfig kubeconfig "$api" admin
  kubeconfig controller-manager.kubeconfig 192.0.2.10 controller-manager
  kubeconfig scheduler.kubeconfig 192.0.2.10 scheduler
  kubeconfig kube-proxy.kubeconfig 192.0.2.10 kube-proxy
  for n in "${nodes[@]}"; do kubeconfig "kubelet-$p-n$n.kubeconfig" 192.0.2.10 "kubelet-$p-n$n"; done
}

# --- control plane ---------------------------------------------------------

control_plane() {
  local c=$dir/pki
  start etcd ip netns exec "$p-cp" "$k8s/etcd" --data-dir "$dir/etcd" --name lab \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster lab=http://127.0.0.1:2380 --unsafe-no-fsync
  start kube-apiserver ip netns exec "$p-cp" "$k8s/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
    --advertise-address 192.0.2.10 --secure-port 6443 \
    --tls-cert-file "$c/apiserver.crt" --tls-private-key-file "$c/apiserver.key" --client-ca-file "$c/ca.crt" \
    --kubelet-client-certificate "$c/apiserver-kubelet.crt" --kubelet-client-key "$c/apiserver-kubelet.key" \
    --kubelet-preferred-address-types InternalIP \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$c/sa.pub" \
    --service-account-signing-key-file "$c/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
    --service-node-port-range 30000-32767 \
    --enable-aggregator-routing
  # (No kube-proxy runs beside the API server: it calls admission and conversion
  # webhooks, such as MetalLB's, and aggregated APIs at their endpoints' pod
  # addresses, which the control plane's namespace routes to the nodes.)
  wait_for "the API server" 90 kubectl get --raw /readyz
  start kube-controller-manager ip netns exec "$p-cp" "$k8s/kube-controller-manager" \
    --kubeconfig "$dir/controller-manager.kubeconfig" --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
    --service-account-private-key-file "$c/sa.key" --root-ca-file "$c/ca.crt" \
    --cluster-signing-cert-file "$c/ca.crt" --cluster-signing-key-file "$c/ca.key" \
    --use-service-account-credentials --leader-elect=false --bind-address 127.0.0.1
  start kube-scheduler ip netns exec "$p-cp" "$k8s/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1
}

# --- nodes -----------------------------------------------------------------

node_up() {
  local n=$1 name=$p-n$1 d=$dir/n$1 run=/run/$p-n$1
  mkdir -p "$d"/{cni,cni-data,kubelet,pod-logs,containerd} "$run"
  for h in "${cgroup_hierarchies[@]}"; do mkdir -p "/sys/fs/cgroup/$h/$name"; done
  cp /sys/fs/cgroup/cpuset/cpuset.cpus "/sys/fs/cgroup/cpuset/$name/cpuset.cpus"
  cp /sys/fs/cgroup/cpuset/cpuset.mems "/sys/fs/cgroup/cpuset/$name/cpuset.mems"

  cat >"$d/containerd.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$run/containerd.sock"
[ttrpc]
  address = "$run/containerd-ttrpc.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.2"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # This machine's bounding set lacks CAP_SYS_RESOURCE: runc cannot lower a
  # container's oom_score_adj below its parent's.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$run/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni"
EOF
  cat >"$d/cni/10-lab.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "lab", "plugins": [
  {"type": "ptp", "mtu": 1500, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$d/cni-data", "subnet": "10.244.$n.0/24", "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  echo "nameserver 10.96.0.10" >"$d/resolv.conf"
  cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$name
containerRuntimeEndpoint: unix://$run/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: AlwaysAllow}
address: 192.0.2.1$n
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
podLogsDir: $d/pod-logs
resolvConf: $d/resolv.conf
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
failSwapOn: false
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
  cat >"$d/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: $mode
clientConnection: {kubeconfig: $dir/kube-proxy.kubeconfig}
hostnameOverride: $name
clusterCIDR: 10.244.0.0/16
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 0.0.0.0:10256
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF

  # The node's mounts (overlays, token tmpfs, the pods' netns pins) live in a
  # mount namespace of its own, held by this process, and die with it.
  start "$name-mounts" unshare --mount --propagation slave sleep infinity
  local holder
  holder=$(cat "$dir/run/$name-mounts.pid")
  wait_for "the mount namespace of $name" 10 bash -c "[[ \$(readlink /proc/$holder/ns/mnt) != \"\$(readlink /proc/self/ns/mnt)\" ]]"
  # 'ip netns exec' would remount /sys and hide the cgroup hierarchies.
  local innode=(nsenter -t "$holder" -m --net="/run/netns/$name")
  # A socket left by an earlier cluster of the same name would pass the wait
  # below before this containerd has even entered the node's namespaces.
  rm -f "$run/containerd.sock"
  start "$name-containerd" "${innode[@]}" containerd --config "$d/containerd.toml"
  wait_for "containerd on $name" 30 test -S "$run/containerd.sock"
  # Its mounts (and the kubelet's, which it must see: the pods' volumes) are
  # the node's own only if it runs in the holder's mount namespace.
  local ctrd
  ctrd=$(cat "$dir/run/$name-containerd.pid")
  wait_for "containerd of $name in the node's mount namespace" 10 \
    bash -c "[[ \$(readlink /proc/$ctrd/ns/mnt) == \"\$(readlink /proc/$holder/ns/mnt)\" ]]"
  local tar
  for tar in "$images"/*.tar; do
    "${innode[@]}" ctr -a "$run/containerd.sock" -n k8s.io images import "$tar" >/dev/null
  done
  start "$name-kubelet" "${innode[@]}" "$k8s/kubelet" --config "$d/kubelet.yaml" \
    --kubeconfig "$dir/kubelet-$name.kubeconfig" --root-dir "$d/kubelet" --cert-dir "$d/kubelet/pki" \
    --hostname-override "$name" --node-ip "192.0.2.1$n" --cloud-provider=
  start "$name-kube-proxy" nsenter --net="/run/netns/$name" "$k8s/kube-proxy" --config "$d/kube-proxy.yaml"
}

up() {
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
    [[ -x $k8s/$b ]] || { echo "$k8s/$b is missing: run 'make cluster-binaries'" >&2; exit 1; }
  done
  for i in vip-allocator pause agnhost coredns; do
    [[ -s $images/$i.tar ]] || { echo "$images/$i.tar is missing: run 'make images'" >&2; exit 1; }
  done
  [[ -x /usr/lib/frr/bgpd ]] || { echo "FRR is missing: run 'make packages'" >&2; exit 1; }
  for b in containerd runc ctr; do command -v "$b" >/dev/null || { echo "$b is missing: run 'make packages'" >&2; exit 1; }; done
  if ip netns list | grep -q "^$p-sw\b"; then
    echo "a cluster named $p is up (its namespace $p-sw exists): 'hack/cluster.sh down' its directory first" >&2
    exit 1
  fi
  # One cluster at a time: each reaches its API server through this host address.
  if ip -o addr show | grep -q " 198\.51\.100\.253/"; then
    echo "another cluster is up (this host holds 198.51.100.253): 'hack/cluster.sh down' its directory first" >&2
    exit 1
  fi
  case $mode in nftables | iptables) ;; *) echo "KUBE_PROXY_MODE must be nftables or iptables" >&2; exit 2 ;; esac
  mkdir -p "$dir/run"
  dir=$(cd "$dir" && pwd)
  echo "$p" >"$dir/name"
  trap 'log "up failed: the logs'"'"' last lines, then teardown"; tail -n 15 "$dir"/run/*.log >&2 || true; down; exit 1' ERR

  network
  router
  certs
  control_plane
  log "control plane ready"
  for n in "${nodes[@]}"; do node_up "$n"; done
  wait_for "nodes" 120 kubectl wait --for=condition=Ready node --all --timeout=1s
  [[ $(kubectl get nodes -o name | wc -l) == "${#nodes[@]}" ]] || wait_for "all nodes registered" 60 \
    bash -c "[[ \$('$k8s/kubectl' --kubeconfig '$dir/kubeconfig' get nodes -o name | wc -l) == ${#nodes[@]} ]]"
  wait_for "nodes Ready" 120 kubectl wait --for=condition=Ready node --all --timeout=1s
  kubectl apply -f "$root/hack/cluster-dns.yaml" >/dev/null
  wait_for "the cluster's DNS" 120 kubectl -n kube-system wait --for=condition=Available deploy/coredns --timeout=1s
  cat >"$dir/env" <<EOF
KUBECONFIG=$dir/kubeconfig
CLIENT_NETNS=$p-client
ROUTER_NETNS=$p-rtr
NODE_NETNS="${nodes[*]/#/$p-n}"
LAN_POOL=$lan_pool
BGP_POOL=$bgp_pool
ROUTER_IP=192.0.2.1
ROUTER_ASN=64512
NODE_ASN=64513
ROUTER_VTY=$dir/frr
AGNHOST_IMAGE=$agnhost
KUBE_PROXY_MODE=$mode
ECMP_HASH=${ECMP_HASH:-l4}
EOF
  trap - ERR
  log "up: $(kubectl get nodes --no-headers | awk '{print $1 "=" $2}' | tr '\n' ' ')(kube-proxy $mode)"
}

# --- teardown --------------------------------------------------------------

# Every step is tried whatever the ones before it did: a failed 'up' or a
# half-removed cluster is torn down as far as it exists.
down() {
  [[ -d $dir ]] || return 0
  set +e
  trap - ERR
  dir=$(cd "$dir" && pwd)
  # Only what this directory's 'up' made: without its name file, 'up' stopped
  # before it made anything, and the names may belong to another cluster.
  [[ -f $dir/name ]] || { log "$dir holds no cluster: nothing to tear down"; return 0; }
  p=$(cat "$dir/name")
  local name n h f
  for n in "${nodes[@]}"; do stop "$dir/run/$p-n$n-kubelet.pid" "$dir/run/$p-n$n-kube-proxy.pid"; done
  # The pods' processes: runc shims of this lab's containerds, found by the
  # -address they were started with.
  for f in /proc/[0-9]*/cmdline; do
    if tr '\0' ' ' 2>/dev/null <"$f" | grep -q "containerd-shim.*-address /run/$p-n"; then
      kill -9 "$(basename "$(dirname "$f")")" 2>/dev/null || true
    fi
  done
  for n in "${nodes[@]}"; do stop "$dir/run/$p-n$n-containerd.pid" "$dir/run/$p-n$n-mounts.pid"; done
  stop "/run/$p-frr/bgpd.pid" "/run/$p-frr/zebra.pid"
  rm -rf "/run/$p-frr"
  stop "$dir"/run/kube-scheduler.pid "$dir"/run/kube-controller-manager.pid "$dir"/run/kube-apiserver.pid "$dir"/run/etcd.pid
  # Processes left in a node's cgroups (a container the shims' death orphaned).
  for n in "${nodes[@]}"; do
    name=$p-n$n
    while IFS= read -r f; do
      xargs -r kill -9 <"$f" 2>/dev/null || true
    done < <(find "/sys/fs/cgroup/pids/$name" -name cgroup.procs 2>/dev/null)
  done
  sleep 0.5
  for n in "${nodes[@]}"; do
    name=$p-n$n
    for h in "${cgroup_hierarchies[@]}"; do
      if [[ -d /sys/fs/cgroup/$h/$name ]]; then
        find "/sys/fs/cgroup/$h/$name" -depth -type d -exec rmdir {} + 2>/dev/null || true
      fi
    done
    # The pods' network namespaces were pinned in the node's mount namespace,
    # now gone; their names stay behind as empty files.
    for f in /run/netns/cni-*; do
      [[ -e $f ]] && ! mountpoint -q "$f" && rm -f "$f"
    done
    # A mount namespace goes a moment after its last process.
    for _ in $(seq 20); do rm -rf "/run/$name" 2>/dev/null && break; sleep 0.5; done
  done
  grep " $dir/" /proc/self/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  ip link del "$p-api" 2>/dev/null || true
  for ns in client rtr cp sw "${nodes[@]/#/n}"; do ip netns del "$p-$ns" 2>/dev/null || true; done
  rm -f /run/containerd/s/* 2>/dev/null || true
  rm -rf "$dir"
}

case $cmd in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down DIR" >&2; exit 2 ;;
esac
