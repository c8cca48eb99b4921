#!/usr/bin/env bash
# Builds Prometheus's promtool (github.com/prometheus/prometheus, pinned by hack/promtool/go.mod)
# from the Go module proxy into bin/promtool, once; later calls reuse it unless the pin changed.
# The alerting rules' tests (test/monitoring) run 'promtool check rules' and 'promtool test rules'.
# Prints the binary's path.
#
#   hack/promtool.sh [BINDIR]     default BINDIR: <repo>/bin
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin}
mod=$root/hack/promtool
version=$(cd "$mod" && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)

if [[ -x "$out/promtool" && -f "$out/promtool.version" && "$(cat "$out/promtool.version")" == "$version" ]]; then
  echo "$out/promtool"; exit 0
fi
mkdir -p "$out"
# The version file is written last: an interrupted build is redone, not trusted.
rm -f "$out/promtool.version"
(cd "$mod" && go build -trimpath -ldflags "-X github.com/prometheus/common/version.Version=${version#v}" \
  -o "$out/promtool.tmp" github.com/prometheus/prometheus/cmd/promtool) >&2
mv "$out/promtool.tmp" "$out/promtool"
echo "$version" >"$out/promtool.version"
echo "$out/promtool"
