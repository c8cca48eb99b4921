#!/usr/bin/env bash
# Builds the MetalLB controller (go.universe.tf/metallb v0.16.1, pinned by hack/metallb/go.mod)
# from the Go module proxy into bin/metallb, once; later calls reuse it. The MetalLB migration
# tests (test/metallb) run it against the local control plane, with MetalLB's CRDs read from the
# same module's config/crd. Prints the directory holding 'controller' and 'crd/'.
#
#   hack/metallb.sh [BINDIR]     default BINDIR: <repo>/bin/metallb
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin/metallb}
mod=$root/hack/metallb
version=$(awk '$1 == "go.universe.tf/metallb" { print $2 }' "$mod/go.mod")

# bin/k8s may be a symlink into another checkout; bin/metallb is always a real directory of
# this one, so a build here never writes into someone else's bin.
if [[ -x "$out/controller" && -f "$out/version" && "$(cat "$out/version")" == "$version" ]]; then
  echo "$out"; exit 0
fi
mkdir -p "$out"
(cd "$mod" && go build -o "$out/controller.tmp" go.universe.tf/metallb/controller) >&2
src=$(cd "$mod" && go list -m -f '{{.Dir}}' go.universe.tf/metallb)
rm -rf "$out/crd" && mkdir -p "$out/crd"
cp "$src"/config/crd/bases/*.yaml "$out/crd/" && chmod u+w "$out"/crd/*.yaml
mv "$out/controller.tmp" "$out/controller"
echo "$version" >"$out/version"
echo "$out"
