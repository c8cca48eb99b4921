#!/usr/bin/env bash
# Builds Prometheus's promtool and Prometheus itself (github.com/prometheus/prometheus, pinned by
# hack/promtool/go.mod) from the Go module proxy into bin/promtool and bin/prometheus, once; later
# calls reuse them unless the pin changed. The alerting rules' tests (test/monitoring) run
# 'promtool check rules' and 'promtool test rules'; e2e TestPrometheusAlerts runs Prometheus
# scraping the lab's agents with the shipped rules. Prints promtool's path (prometheus is beside it).
#
#   hack/promtool.sh [BINDIR]     default BINDIR: <repo>/bin
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin}
mod=$root/hack/promtool
version=$(cd "$mod" && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)

if [[ -x "$out/promtool" && -x "$out/prometheus" && -f "$out/promtool.version" && "$(cat "$out/promtool.version")" == "$version" ]]; then
  echo "$out/promtool"; exit 0
fi
mkdir -p "$out"
# The version file is written last: an interrupted build is redone, not trusted.
rm -f "$out/promtool.version"
for cmd in promtool prometheus; do
  (cd "$mod" && go build -trimpath -ldflags "-X github.com/prometheus/common/version.Version=${version#v}" \
    -o "$out/$cmd.tmp" "github.com/prometheus/prometheus/cmd/$cmd") >&2
  mv "$out/$cmd.tmp" "$out/$cmd"
done
echo "$version" >"$out/promtool.version"
echo "$out/promtool"
