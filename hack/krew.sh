#!/usr/bin/env bash
# hack/krew.sh VERSION: the release archives of the kubectl plugin "kubectl vip"
# (bin/krew/kubectl-vip_vVERSION_OS_ARCH.tar.gz, the static binary named
# kubectl-vip) and deploy/krew/vip.yaml, krew's manifest of that release, with
# each archive's sha256. Upload the archives to the release vVERSION.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=v${1:?usage: hack/krew.sh VERSION}
repo=https://github.com/paas-org/vip-allocator-operator
out=$root/bin/krew
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

platforms=""
for platform in linux/amd64 linux/arm64; do
  os=${platform%/*} arch=${platform#*/}
  archive=kubectl-vip_${version}_${os}_${arch}.tar.gz
  mkdir -p "$work/$os-$arch"
  (cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X github.com/paas-org/vip-allocator-operator/cmd.version=$version" -o "$work/$os-$arch/kubectl-vip" .)
  tar -czf "$out/$archive" -C "$work/$os-$arch" kubectl-vip
  sha=$(sha256sum "$out/$archive" | cut -d' ' -f1)
  platforms+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $repo/releases/download/$version/$archive
    sha256: \"$sha\"
    bin: kubectl-vip
    files:
    - from: kubectl-vip
      to: .
"
done

cat > "$root/deploy/krew/vip.yaml" <<YAML
# krew's manifest of the kubectl plugin "kubectl vip" (written by hack/krew.sh).
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: vip
spec:
  version: $version
  homepage: $repo
  shortDescription: Explain why a LoadBalancer address answers or not
  description: |
    kubectl vip is the vip-allocator binary as a kubectl plugin. "kubectl vip
    explain svc/NAME" walks one Service from its IP allocation to each node's
    kernel and announcement, step by step, with what to do at a step that fails.
    It also takes "ip ADDRESS", "ipgroup NAME" and "node NAME", and -o json|yaml.
  caveats: |
    Completion of "kubectl vip" (kubectl 1.26 and later): link the plugin as
    kubectl_complete-vip on the PATH, e.g.
      ln -s "\$(command -v kubectl-vip)" "\$(dirname "\$(command -v kubectl-vip)")/kubectl_complete-vip"
    Explain reads the agents through the API server: bind the Role
    vip-allocator-explainer in the operator's namespace to the people who run it.
  platforms:
YAML
printf '%s' "$platforms" >>"$root/deploy/krew/vip.yaml"
echo "deploy/krew/vip.yaml for $version; archives in bin/krew"
