# vip-allocator-operator. `make demo` and `make test` are the two commands that
# matter; everything they need is built into bin/ on first use and reused after.

SHELL := /usr/bin/env bash -o pipefail
BIN   := $(CURDIR)/bin
K8S   := $(BIN)/k8s
IMG   ?= vip-allocator:latest

CONTROLLER_GEN := $(BIN)/controller-gen
CONTROLLER_GEN_VERSION := v0.23.0
KUBECTL := $(K8S)/kubectl
export KUBEBUILDER_ASSETS := $(K8S)

.PHONY: all build generate manifests verify test demo bench-alloc bench-migrate bench-dataplane controlplane packages clean

all: build

## build: the one binary, bin/vip-allocator
build:
	go build -o $(BIN)/vip-allocator .

## generate: deepcopy code from api/
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object paths=./api/...

## manifests: CRDs and RBAC in config/ from the markers in api/ and controllers/
manifests: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=vip-allocator-operator paths="{./controllers/...,./migration/...}" output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=vip-allocator-agent paths=./nodeagent/... output:rbac:artifacts:config=config/rbac/agent
	mv config/rbac/agent/role.yaml config/rbac/agent_role.yaml && rmdir config/rbac/agent

## verify: generated code and manifests are current, code is formatted and vetted
verify: $(CONTROLLER_GEN)
	@before=$$(mktemp -d) && cp -r api config $$before/ && \
	  $(MAKE) --no-print-directory generate manifests >/dev/null && \
	  diff -r $$before/api api && diff -r $$before/config config && rm -rf $$before || \
	  { echo "generated files were stale (now regenerated): review and commit them"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w"; exit 1; }
	go vet ./...

## test: the whole suite (what CI runs); the data-path tests need root
test: verify controlplane build packages
	go test ./... -count=1 -timeout 20m

## demo: a local control plane, the operator, a sample IPGroup and Services
demo: build controlplane packages
	hack/demo.sh

## bench-alloc: allocation throughput against raw API writes, restart safety, RSS
bench-alloc: build controlplane
	go run ./bench/alloc -n $${N:-3000}

## packages: Debian packages the agent and the data-path tests use, installed when missing
packages:
	@missing=""; for p in iptables:iptables-restore iproute2:ip curl:curl socat:socat; do \
	  command -v $${p#*:} >/dev/null || missing="$$missing $${p%%:*}"; done; \
	if [ -n "$$missing" ]; then apt-get update && apt-get install -y $$missing; fi

## controlplane: kube-apiserver, etcd and kubectl from the Go module proxy, into bin/k8s
controlplane: $(K8S)/kube-apiserver $(K8S)/etcd $(K8S)/kubectl

$(K8S)/kube-apiserver: hack/controlplane/go.mod
	cd hack/controlplane && go build -o $@ k8s.io/kubernetes/cmd/kube-apiserver
$(K8S)/kubectl: hack/controlplane/go.mod
	cd hack/controlplane && go build -o $@ k8s.io/kubernetes/cmd/kubectl
$(K8S)/etcd: hack/controlplane/go.mod
	cd hack/controlplane && go build -o $@ go.etcd.io/etcd/server/v3

$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

clean:
	rm -rf $(BIN)

## bench-migrate: 300 and 1,000 legacy VirtualIPs migrated at once against the bare writes (N=300,1000)
bench-migrate: build controlplane
	go run ./bench/migrate -n $${N:-300,1000}

## bench-dataplane: the iptables data plane at 1,000 and 10,000 Services against one call per rule
## (root; it works only inside network namespaces it creates and deletes)
bench-dataplane:
	go run ./bench/dataplane
