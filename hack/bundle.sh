#!/usr/bin/env bash
# Renders the install files from config/ (kustomize, as embedded in kubectl).
#
#   hack/bundle.sh yaml [IMAGE]   deploy/bundle.yaml and deploy/bundle-openshift.yaml; with
#                                 IMAGE, first points config/manager (the only image
#                                 reference) at it. Also deploy/monitoring.yaml (opt-in:
#                                 alerts, ServiceMonitors, Grafana dashboard) and
#                                 deploy/admission-policies.yaml (OLM installs). Then the
#                                 Helm chart's generated templates and its image values
#                                 (charts/vip-allocator) from those files (hack/chart)
#   hack/bundle.sh olm VERSION    the OLM bundle: bundle/ and bundle.Dockerfile (operator-sdk)
#
# KUBECTL and OPERATOR_SDK name the binaries (the Makefile passes them).
set -euo pipefail
cd "$(dirname "$0")/.."
kubectl=${KUBECTL:-bin/k8s/kubectl}
operator_sdk=${OPERATOR_SDK:-bin/operator-sdk}

# set_image writes IMAGE (repo:tag or repo@sha256:digest) into config/manager.
set_image() {
  local img=$1 name ref
  if [[ $img == *@sha256:* ]]; then
    name=${img%@*} ref="  digest: ${img#*@}"
  elif [[ ${img##*/} == *:* ]]; then
    name=${img%:*} ref="  newTag: ${img##*:}"
  else
    echo "IMG=$img names no tag or digest: use <registry>/vip-allocator:<version>" >&2; exit 2
  fi
  cat > config/manager/kustomization.yaml <<KUSTOMIZATION
resources:
- manager.yaml
# The only image reference: 'make bundle-yaml IMG=...' rewrites it.
images:
- name: vip-allocator
  newName: $name
$ref
KUSTOMIZATION
}

# operator_image is the image config/ currently deploys.
operator_image() {
  "$kubectl" kustomize config/manager | sed -n 's/^ *image: //p' | head -1
}

header() {
  cat <<HEADER
# vip-allocator-operator $1 - generated from config/ by 'make bundle-yaml'; do not edit.
# Image: $(operator_image)
# Install:   kubectl create namespace vip-allocator-operator && kubectl create -f $2
#            (or: kubectl apply --server-side -f $2)
# Upgrade:   kubectl apply --server-side --force-conflicts -f $2   (the new file)
# Uninstall: kubectl delete -f $2   (every agent removes its rules on the way out)
HEADER
}

# render WHAT DIR FILE: the header naming FILE, then kustomize's rendering of DIR, into FILE.
render() {
  # shellcheck disable=SC2094 # header prints FILE's name; nothing reads FILE
  { header "$1" "$3"; "$kubectl" kustomize "$2"; } >"$3"
}

yaml() {
  [[ -n ${1:-} ]] && set_image "$1"
  mkdir -p deploy
  render "for Kubernetes" config/default deploy/bundle.yaml
  render "for OpenShift" config/openshift deploy/bundle-openshift.yaml
  {
    echo "# vip-allocator-operator monitoring - generated from config/ by 'make bundle-yaml'; do not edit."
    echo "# Needs prometheus-operator's CRDs; applied on top of deploy/bundle.yaml (docs/metrics.md)."
    echo "# Install:   kubectl apply -f deploy/monitoring.yaml"
    "$kubectl" kustomize config/monitoring
  } > deploy/monitoring.yaml
  # OLM installs: an OLM bundle cannot carry the admission policies, so an
  # administrator applies them; the operator only checks them (--admission-policies).
  {
    echo "# vip-allocator-operator admission policies - generated from config/admission by 'make bundle-yaml'; do not edit."
    echo "# For OLM installs (deploy/bundle.yaml and the chart carry them). They name the ServiceAccounts"
    echo "# of the namespace vip-allocator-operator; for OLM's namespace NS (docs/install.md, OLM):"
    echo "#   sed 's/system:serviceaccount:vip-allocator-operator:/system:serviceaccount:NS:/' deploy/admission-policies.yaml |"
    echo "#     kubectl apply --server-side -f -"
    "$kubectl" kustomize config/admission
  } > deploy/admission-policies.yaml
  # The chart installs the same objects (make verify compares them: hack/chartdiff).
  go run ./hack/chart -deploy deploy -chart charts/vip-allocator
}

olm() {
  local version=${1:?usage: $0 olm VERSION} img
  img=$(operator_image)
  rm -rf bundle
  "$kubectl" kustomize config/manifests | sed "s|@OPERATOR_IMAGE@|$img|g" |
    "$operator_sdk" generate bundle -q --overwrite --version "$version" --package vip-allocator-operator \
      --extra-service-accounts vip-allocator-agent --channels stable --default-channel stable
  local csv=bundle/manifests/vip-allocator-operator.clusterserviceversion.yaml
  # operator-sdk lists related images only when it resolves digests (online);
  # the one image is known, so name it. createdAt would make every run differ.
  sed -i -e '/^    createdAt: /d' \
    -e "/^  version: /i\\  relatedImages:\\n  - image: $img\\n    name: vip-allocator" "$csv"
  "$operator_sdk" bundle validate ./bundle
}

case "${1:-}" in
  yaml) yaml "${2:-}" ;;
  olm) olm "${2:-}" ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
