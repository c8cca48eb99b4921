#!/usr/bin/env bash
# Builds the images the cluster's nodes run, as docker-archive tarballs that
# `ctr images import` reads (hack/imagetar): this machine reaches no registry,
# so every image is made here, under the exact name a manifest asks for.
#
#   hack/images.sh OUT [vip-allocator|pause|agnhost|coredns|metallb ...]   (default: all)
#
# vip-allocator  the project's image: hack/image-rootfs.sh's root filesystem plus
#                bin/vip-allocator, configured by the Dockerfile's final stage,
#                tagged IMG (default: the reference deploy/bundle.yaml holds);
#                rebuilt every time (the binary changes)
# pause          the sandbox image, pause.c of the Kubernetes module built static
# agnhost        the upstream e2e test image, built from its Go package, on a
#                root filesystem with the shell tools the e2e specs exec (curl,
#                GNU wget, nc, dash as /bin/sh: busybox's sh would run its own
#                applets, and Debian's static busybox wget crashes)
# coredns        the cluster's DNS, hack/coredns (the plugins a cluster's own
#                names need)
# metallb        MetalLB's controller and speaker (metallb/controller.tar,
#                metallb/speaker.tar), the static binaries hack/metallb.sh builds
#                from the pinned module, each on a root filesystem like the
#                distroless/static base MetalLB's Dockerfiles use (passwd, group,
#                /tmp; nothing to exec: the speaker in native mode runs no other
#                program), tagged as MetalLB's metallb-native.yaml names them, so
#                that manifest applies unchanged. In a directory of their own:
#                hack/cluster.sh imports OUT/*.tar into every node, and only the
#                tests that run MetalLB import these (about 90 MB each)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: $0 OUT [image ...]}
shift
images=("$@")
[[ ${#images[@]} -gt 0 ]] || images=(vip-allocator pause agnhost coredns metallb)
mkdir -p "$out"
out=$(cd "$out" && pwd)
k8s_src() { (cd "$root/hack/controlplane" && go list -m -f '{{.Dir}}' k8s.io/kubernetes); }
img=${IMG:-$(awk '$1 == "image:" && $2 ~ /vip-allocator/ {print $2; exit}' "$root/deploy/bundle.yaml")}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
imagetar=$work/imagetar
(cd "$root" && CGO_ENABLED=0 go build -o "$imagetar" ./hack/imagetar)

# with_libs copies each program and the shared libraries it loads into the
# root filesystem DEST at the same paths, symlinks followed.
with_libs() {
  local dest=$1 p
  shift
  for p in "$@"; do
    cp -L --parents "$p" "$dest"
    { ldd "$p" 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
      while read -r lib; do [[ -e $dest$lib ]] || cp -L --parents "$lib" "$dest"; done
  done
}

for image in "${images[@]}"; do
  case $image in
  vip-allocator)
    [[ -x $root/bin/vip-allocator ]] || { echo "bin/vip-allocator is missing: run 'make build'" >&2; exit 1; }
    "$root/hack/image-rootfs.sh" "$work/vip-allocator" >/dev/null
    install -D -m 0755 "$root/bin/vip-allocator" "$work/vip-allocator/usr/local/bin/vip-allocator"
    "$imagetar" -rootfs "$work/vip-allocator" -tag "$img" -dockerfile "$root/Dockerfile" -o "$out/vip-allocator.tar"
    ;;
  pause)
    [[ -s $out/pause.tar ]] && continue
    mkdir -p "$work/pause"
    gcc -Os -static -DVERSION=3.10.2 -o "$work/pause/pause" "$(k8s_src)/build/pause/linux/pause.c"
    "$imagetar" -rootfs "$work/pause" -tag registry.k8s.io/pause:3.10.2 -entrypoint /pause -o "$out/pause.tar"
    ;;
  agnhost)
    [[ -s $out/agnhost.tar ]] && continue
    r=$work/agnhost
    mkdir -p "$r"/{bin,usr/bin,etc,tmp}
    chmod 1777 "$r/tmp"
    (cd "$root/hack/controlplane" && CGO_ENABLED=0 go build -ldflags '-s -w' -o "$r/agnhost" k8s.io/kubernetes/test/images/agnhost)
    ln -s agnhost "$r/agnhost-2"
    with_libs "$r" /usr/bin/curl /usr/bin/wget /bin/nc.openbsd /bin/bash /bin/dash /bin/busybox
    for applet in $(/bin/busybox --list); do
      [[ -e $r/bin/$applet || -e $r/usr/bin/$applet ]] || ln -s busybox "$r/bin/$applet"
    done
    ln -sf /bin/nc.openbsd "$r/usr/bin/nc"
    ln -sf dash "$r/bin/sh"
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$r/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
    # One try per call: the specs time a request to a dropped VIP, and wget's
    # default of 20 tries turns each such call into minutes.
    printf 'tries = 1\n' >"$r/etc/wgetrc"
    "$imagetar" -rootfs "$r" -tag registry.k8s.io/e2e-test-images/agnhost:2.63.0 -entrypoint /agnhost -cmd pause -o "$out/agnhost.tar"
    ;;
  coredns)
    [[ -s $out/coredns.tar ]] && continue
    mkdir -p "$work/coredns/etc"
    (cd "$root/hack/coredns" && CGO_ENABLED=0 go build -ldflags '-s -w' -o "$work/coredns/coredns" .)
    printf 'root:x:0:0:root:/root:/sbin/nologin\n' >"$work/coredns/etc/passwd"
    "$imagetar" -rootfs "$work/coredns" -tag registry.k8s.io/coredns/coredns:v1.15.0 -entrypoint /coredns -o "$out/coredns.tar"
    ;;
  metallb)
    mlb=$("$root/hack/metallb.sh")
    for c in controller speaker; do
      # The reference the manifest's Deployment or DaemonSet asks for.
      ref=$(awk -v c="$c" '$1 == "image:" && $2 ~ ("/metallb/" c ":") {print $2; exit}' "$mlb/metallb-native.yaml")
      [[ -n $ref ]] || { echo "no $c image in $mlb/metallb-native.yaml" >&2; exit 1; }
      mkdir -p "$out/metallb"
      tar=$out/metallb/$c.tar
      # Rebuilt when the binary is newer (hack/metallb.sh rebuilt it).
      [[ -s $tar && $tar -nt $mlb/$c ]] && { echo "$tar"; continue; }
      r=$work/metallb-$c
      mkdir -p "$r"/{etc,tmp}
      chmod 1777 "$r/tmp"
      install -m 0755 "$mlb/$c" "$r/$c"
      printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$r/etc/passwd"
      printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$r/etc/group"
      "$imagetar" -rootfs "$r" -tag "$ref" -entrypoint "/$c" -o "$tar"
      echo "$tar"
    done
    continue
    ;;
  *) echo "unknown image $image" >&2; exit 2 ;;
  esac
  echo "$out/$image.tar"
done
