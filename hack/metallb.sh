#!/usr/bin/env bash
# Builds MetalLB's controller and speaker (go.universe.tf/metallb v0.16.1, pinned by
# hack/metallb/go.mod) from the Go module proxy into bin/metallb, once; later calls reuse them,
# and a missing one (a bin/metallb from before the speaker was built) is built then. Static
# (CGO_ENABLED=0), as MetalLB's own images build them: the same binaries run as processes and
# in the images hack/images.sh makes of them. The MetalLB migration tests (test/metallb) run the
# controller against the local control plane; the hand-over tests (test/e2e) run a speaker in
# each lab node; the real cluster (test/cluster) runs MetalLB's images from its manifest. MetalLB's
# CRDs and its native-mode manifest are copied from the same module (config/crd,
# config/manifests/metallb-native.yaml). Prints the directory holding 'controller', 'speaker',
# 'crd/' and 'metallb-native.yaml'.
#
#   hack/metallb.sh [BINDIR]     default BINDIR: <repo>/bin/metallb
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin/metallb}
mod=$root/hack/metallb
# go.mod names the module on a one-line 'require go.universe.tf/metallb vX' or in a require block.
version=$(awk '$1 == "require" && $2 == "go.universe.tf/metallb" { print $3; exit }
  $1 == "go.universe.tf/metallb" { print $2; exit }' "$mod/go.mod")
[[ -n $version ]] || { echo "no go.universe.tf/metallb version in $mod/go.mod" >&2; exit 1; }

# bin/k8s may be a symlink into another checkout; bin/metallb is always a real directory of
# this one, so a build here never writes into someone else's bin.
# The version file says how the binaries were built too: older, dynamically linked ones are redone.
stamp="$version static"
if [[ -x "$out/controller" && -x "$out/speaker" && -f "$out/metallb-native.yaml" && -f "$out/version" && "$(cat "$out/version")" == "$stamp" ]]; then
  echo "$out"; exit 0
fi
mkdir -p "$out"
# The version file is written last: an interrupted build is redone, not trusted.
rm -f "$out/version"
for cmd in controller speaker; do
  (cd "$mod" && CGO_ENABLED=0 go build -o "$out/$cmd.tmp" "go.universe.tf/metallb/$cmd") >&2
  mv "$out/$cmd.tmp" "$out/$cmd"
done
src=$(cd "$mod" && go list -m -f '{{.Dir}}' go.universe.tf/metallb)
rm -rf "$out/crd" && mkdir -p "$out/crd"
cp "$src"/config/crd/bases/*.yaml "$out/crd/" && chmod u+w "$out"/crd/*.yaml
cp "$src/config/manifests/metallb-native.yaml" "$out/" && chmod u+w "$out/metallb-native.yaml"
echo "$stamp" >"$out/version"
echo "$out"
