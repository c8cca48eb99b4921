#!/usr/bin/env bash
# Builds MetalLB's controller and speaker (go.universe.tf/metallb v0.16.1, pinned by
# hack/metallb/go.mod) from the Go module proxy into bin/metallb, once; later calls reuse them,
# and a missing one (a bin/metallb from before the speaker was built) is built then. The MetalLB
# migration tests (test/metallb) run the controller against the local control plane; the
# hand-over tests (test/e2e) run a speaker in each lab node. MetalLB's CRDs are read from the
# same module's config/crd. Prints the directory holding 'controller', 'speaker' and 'crd/'.
#
#   hack/metallb.sh [BINDIR]     default BINDIR: <repo>/bin/metallb
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin/metallb}
mod=$root/hack/metallb
version=$(awk '$1 == "go.universe.tf/metallb" { print $2 }' "$mod/go.mod")

# bin/k8s may be a symlink into another checkout; bin/metallb is always a real directory of
# this one, so a build here never writes into someone else's bin.
if [[ -x "$out/controller" && -x "$out/speaker" && -f "$out/version" && "$(cat "$out/version")" == "$version" ]]; then
  echo "$out"; exit 0
fi
mkdir -p "$out"
# The version file is written last: an interrupted build is redone, not trusted.
rm -f "$out/version"
for cmd in controller speaker; do
  (cd "$mod" && go build -o "$out/$cmd.tmp" "go.universe.tf/metallb/$cmd") >&2
  mv "$out/$cmd.tmp" "$out/$cmd"
done
src=$(cd "$mod" && go list -m -f '{{.Dir}}' go.universe.tf/metallb)
rm -rf "$out/crd" && mkdir -p "$out/crd"
cp "$src"/config/crd/bases/*.yaml "$out/crd/" && chmod u+w "$out"/crd/*.yaml
echo "$version" >"$out/version"
echo "$out"
