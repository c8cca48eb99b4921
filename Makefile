# vip-allocator-operator. `make demo` and `make test` are the two commands that
# matter; everything they need is built into bin/ on first use and reused after.

SHELL := /usr/bin/env bash -o pipefail
BIN   := $(CURDIR)/bin
K8S   := $(BIN)/k8s
VERSION ?= 0.1.0
# The operator image; the agent runs the same one. 'make bundle-yaml IMG=...' writes it into config/.
IMG   ?= ghcr.io/paas-org/vip-allocator:$(VERSION)

CONTROLLER_GEN := $(BIN)/controller-gen
CONTROLLER_GEN_VERSION := v0.23.0
OPERATOR_SDK := $(BIN)/operator-sdk
OPERATOR_SDK_VERSION := v1.33.0
GOLANGCI_LINT := $(BIN)/golangci-lint
HELM := $(BIN)/helm
CONTAINER_TOOL ?= $(shell command -v podman >/dev/null && echo podman || echo docker)
KUBECTL := $(K8S)/kubectl
export KUBEBUILDER_ASSETS := $(K8S)
# TEST_TAGS turns on the tests behind build tags: 'root' (network namespaces, nftables/iptables,
# chroot; root) and 'envtest' (a control plane, promtool, operator-sdk or MetalLB from bin/).
TEST_TAGS := root,envtest

.PHONY: metallb all build generate manifests verify lint golangci-lint unit test demo bench-alloc bench-groups bench-migrate bench-dataplane bench-steering bench-failover bench-bgp bench-bgp-prefixes bench-announce bench-watch bench-arpflood bench-membership bench-agent controlplane kube-proxy packages clean
.PHONY: cluster-binaries images cluster cluster-down e2e-cluster e2e-upstream
.PHONY: bundle-yaml bundle bundle-validate operator-sdk docker-build verify-install-files verify-chart promtool helm

all: build

## build: the one binary, bin/vip-allocator, built as the image builds it (static, no libc; no
## symbol table): the tests, benches and the demo run, and the benches measure, what ships
build:
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/paas-org/vip-allocator-operator/cmd.version=v$(VERSION)" -o $(BIN)/vip-allocator .

## generate: the IPGroup addresses CEL rules (hack/ipgroupcel) and deepcopy code in api/
generate: $(CONTROLLER_GEN)
	go run ./hack/ipgroupcel
	$(CONTROLLER_GEN) object paths=./api/...

## manifests: CRDs and RBAC in config/ from the markers in api/, controllers/ (and the internal/ packages they share) and nodeagent/
manifests: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=vip-allocator-operator paths="{./controllers/...,./migration/...,./internal/metricsauth/...,./internal/reserved/...}" output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=vip-allocator-agent paths="{./nodeagent/...,./internal/metricsauth/...}" output:rbac:artifacts:config=config/rbac/agent
	mv config/rbac/agent/role.yaml config/rbac/agent_role.yaml && rmdir config/rbac/agent

## verify: generated code, manifests, deploy/, bundle/ and the chart are current, code is formatted, vetted and linted
verify: $(CONTROLLER_GEN) $(KUBECTL) $(OPERATOR_SDK) $(HELM) $(GOLANGCI_LINT) packages
	@before=$$(mktemp -d) && cp -r api config $$before/ && \
	  $(MAKE) --no-print-directory generate manifests >/dev/null && \
	  diff -r $$before/api api && diff -r $$before/config config && rm -rf $$before || \
	  { echo "generated files were stale (now regenerated): review and commit them"; exit 1; }
	@$(MAKE) --no-print-directory verify-install-files
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run gofmt -w"; exit 1; }
	go vet -tags $(TEST_TAGS) ./...
	@$(MAKE) --no-print-directory lint

## lint: golangci-lint (.golangci.yaml; every build tag) over the Go code, shellcheck over the scripts
lint: $(GOLANGCI_LINT) packages
	$(GOLANGCI_LINT) run ./...
	shellcheck hack/*.sh .ci/run

## golangci-lint: built from its module source (hack/golangci-lint pins it) into bin/
golangci-lint: $(GOLANGCI_LINT)
$(GOLANGCI_LINT): hack/golangci-lint/go.mod
	cd hack/golangci-lint && go build -o $@ \
	  -ldflags "-X main.version=$$(go list -m -f '{{.Version}}' github.com/golangci/golangci-lint/v2)" \
	  github.com/golangci/golangci-lint/v2/cmd/golangci-lint

## unit: the quick tier, as any user: every test that needs neither root nor the binaries built
## into bin/ (the tests that do carry the build tags 'root' and 'envtest': docs/development.md)
unit:
	go test ./... -timeout 5m

## test: the whole suite (what CI runs), every tier; the tests tagged 'root' need root
test: verify bundle-validate controlplane cluster-binaries images build packages promtool
	go test -tags $(TEST_TAGS) ./... -count=1 -timeout 60m 2>&1 | hack/test-summary.sh

## demo: a local control plane, the operator, a sample IPGroup and Services
demo: build controlplane packages
	hack/demo.sh

## bench-alloc: allocation throughput against the API server's limit (the same two writes per
## Service from a client with no client-side limit, 32 at once), ROUNDS times between two baselines
## (the median ratio is the verdict), restart safety, RSS. OPERATOR_ARGS adds operator flags. Every bench-* also runs at a smoke
## size in 'make test' (bench/*/main_test.go, e2e TestBench*Smoke).
bench-alloc: build controlplane
	go run ./bench/alloc -n $${N:-3000} -rounds $${ROUNDS:-3} -operator-args "$${OPERATOR_ARGS:-}"

## packages: Debian packages the agent, the data-path tests and 'make lint' use, installed when missing
packages:
	@missing=""; for p in iptables:iptables-restore iproute2:ip curl:curl socat:socat iputils-arping:arping conntrack:conntrack frr:vtysh \
	  containerd:containerd runc:runc containernetworking-plugins:/usr/lib/cni/ptp busybox-static:busybox wget:wget netcat-openbsd:nc.openbsd shellcheck:shellcheck; do \
	  command -v $${p#*:} >/dev/null || missing="$$missing $${p%%:*}"; done; \
	if [ -n "$$missing" ]; then apt-get update && apt-get install -y $$missing; fi

## metallb: MetalLB v0.16.1's controller, speaker and CRDs from its Go module, into bin/metallb
## (test/metallb and the e2e hand-over tests build them on first use too; about 5 minutes once, reused)
metallb:
	hack/metallb.sh

## promtool: Prometheus' promtool and Prometheus (hack/promtool/go.mod pins them) from their Go module
## into bin/, once; test/monitoring checks and unit-tests the alerting rules with promtool, e2e
## TestPrometheusAlerts scrapes the lab's agents with Prometheus
promtool:
	hack/promtool.sh >/dev/null

## controlplane: kube-apiserver, etcd, kubectl and kube-proxy (bench-agent's peer) from the Go
## module proxy, into bin/k8s; 'make kube-proxy K8S=DIR' builds kube-proxy alone into DIR
controlplane: $(K8S)/kube-apiserver $(K8S)/etcd $(K8S)/kubectl $(K8S)/kube-proxy
kube-proxy: $(K8S)/kube-proxy

## cluster-binaries: the rest of a real cluster (kubelet, kube-controller-manager, kube-scheduler)
cluster-binaries: controlplane $(K8S)/kubelet $(K8S)/kube-controller-manager $(K8S)/kube-scheduler

# Every Kubernetes binary reports the release it is built from (the module alone says v0.0.0-master).
K8S_VERSION := v1.36.3
K8S_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) -X k8s.io/component-base/version.gitMajor=1 \
  -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean \
  -X k8s.io/client-go/pkg/version.gitVersion=$(K8S_VERSION)
K8S_PKG_etcd := go.etcd.io/etcd/server/v3
$(K8S)/%: hack/controlplane/go.mod
	cd hack/controlplane && go build -ldflags "$(K8S_LDFLAGS)" -o $@ $(or $(K8S_PKG_$*),k8s.io/kubernetes/cmd/$*)
## e2e.test: the upstream Kubernetes e2e suite binary (vet off: it is not our code, and vetting
## its 1,900 packages is half the build)
$(K8S)/e2e.test: hack/controlplane/go.mod
	cd hack/controlplane && go test -c -vet=off -ldflags "$(K8S_LDFLAGS)" -o $@ k8s.io/kubernetes/test/e2e

## images: the images the cluster's nodes import (our image, pause, agnhost, coredns, MetalLB's
## controller and speaker: hack/metallb.sh builds them once) into bin/images
images: build packages
	hack/images.sh $(BIN)/images

## cluster: a three-node cluster in network namespaces (hack/cluster.sh), kube-proxy in
## KUBE_PROXY_MODE (nftables), its kubeconfig and env in CLUSTER_DIR; 'make cluster-down' removes it
CLUSTER_DIR ?= /tmp/vip-cluster
cluster: cluster-binaries images packages
	KUBE_PROXY_MODE=$${KUBE_PROXY_MODE:-nftables} hack/cluster.sh up $(CLUSTER_DIR)
cluster-down:
	hack/cluster.sh down $(CLUSTER_DIR)

## e2e-cluster: the operator installed from deploy/bundle.yaml on real clusters, one per kube-proxy
## mode: Services reachable from the LAN's client, failover, drain, install and removal, the switch
## from MetalLB; the full set (CLUSTER_TESTS=full), where 'make test' runs the long ones' smoke part
e2e-cluster: cluster-binaries images packages
	CLUSTER_TESTS=full go test -tags $(TEST_TAGS) ./test/cluster -count=1 -timeout 90m -v -run "$${RUN:-.}"

## e2e-upstream: the upstream Kubernetes LoadBalancer e2e specs against our L2 group, in both
## kube-proxy modes (MODES=nftables iptables); prints the runner's summary and 'N passed, N failed'
e2e-upstream: cluster-binaries images packages $(K8S)/e2e.test
	hack/e2e-upstream.sh $${MODES:-nftables iptables}

## verify-install-files: deploy/, bundle/, bundle.Dockerfile and the chart's generated part are what
## config/ renders, and the chart installs what deploy/ does (verify-chart)
verify-install-files: $(KUBECTL) $(OPERATOR_SDK) $(HELM)
	@before=$$(mktemp -d) && mkdir -p deploy bundle && cp -r deploy bundle charts $$before/ && \
	  { cp bundle.Dockerfile $$before/ 2>/dev/null || true; } && \
	  $(MAKE) --no-print-directory bundle-yaml bundle >/dev/null 2>&1 && \
	  diff -r $$before/deploy deploy && diff -r $$before/bundle bundle && diff -r $$before/charts charts && \
	  diff $$before/bundle.Dockerfile bundle.Dockerfile && rm -rf $$before || \
	  { echo "deploy/, bundle/, bundle.Dockerfile or charts/ were stale relative to config/ (now regenerated): review and commit them"; exit 1; }
	@$(MAKE) --no-print-directory verify-chart

## verify-chart: 'helm lint' passes, and the chart renders deploy/bundle.yaml with its defaults,
## deploy/bundle-openshift.yaml with openshift.scc, and deploy/monitoring.yaml added with
## monitoring.enabled, but for the labels and annotation it adds (hack/chartdiff)
CHART := charts/vip-allocator
CHART_TEMPLATE = $(HELM) template vip-allocator $(CHART) --namespace vip-allocator-operator
verify-chart: $(HELM)
	@$(HELM) lint --strict --quiet $(CHART) --namespace vip-allocator-operator
	@$(CHART_TEMPLATE) | go run ./hack/chartdiff deploy/bundle.yaml
	@$(CHART_TEMPLATE) --set openshift.scc=true | go run ./hack/chartdiff deploy/bundle-openshift.yaml
	@$(CHART_TEMPLATE) --set monitoring.enabled=true | go run ./hack/chartdiff deploy/bundle.yaml deploy/monitoring.yaml

## bundle-yaml: deploy/bundle.yaml, deploy/bundle-openshift.yaml, deploy/monitoring.yaml (opt-in) and
## deploy/admission-policies.yaml (OLM installs)
## from config/; with IMG=<mirror>/vip-allocator:<version> it first rewrites the one image reference
bundle-yaml: $(KUBECTL)
	KUBECTL=$(KUBECTL) hack/bundle.sh yaml $(if $(filter command line environment,$(origin IMG)),$(IMG))

## bundle: the OLM bundle (bundle/, bundle.Dockerfile) for VERSION, generated and validated by operator-sdk
bundle: $(KUBECTL) $(OPERATOR_SDK)
	KUBECTL=$(KUBECTL) OPERATOR_SDK=$(OPERATOR_SDK) hack/bundle.sh olm $(VERSION)

## bundle-validate: operator-sdk's checks of bundle/, with the OperatorHub suite (offline)
bundle-validate: $(OPERATOR_SDK)
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework

## operator-sdk: built from its module source (hack/operatorsdk pins it) into bin/
operator-sdk: $(OPERATOR_SDK)
$(OPERATOR_SDK): hack/operatorsdk/go.mod
	cd hack/operatorsdk && go build -o $@ \
	  -ldflags "-X github.com/operator-framework/operator-sdk/internal/version.Version=$(OPERATOR_SDK_VERSION) -X github.com/operator-framework/operator-sdk/internal/version.GitVersion=$(OPERATOR_SDK_VERSION)" \
	  github.com/operator-framework/operator-sdk/cmd/operator-sdk

## helm: Helm (hack/helm/go.mod pins it) from its Go module into bin/helm; it lints, renders and
## installs charts/vip-allocator
helm: $(HELM)
$(HELM): hack/helm/go.mod
	cd hack/helm && v=$$(go list -m -f '{{.Version}}' helm.sh/helm/v4) && \
	  go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$$v" -o $@ helm.sh/helm/v4/cmd/helm

## docker-build: the one image (Dockerfile) as IMG, with podman or docker
docker-build:
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) -t $(IMG) .

$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

clean:
	rm -rf $(BIN)

## bench-groups: the IPGroup reconciler's CPU for one Node annotation change and one IPGroup edit
## among GROUPS IPGroups holding ADDRESSES addresses, against one reconcile of one group
bench-groups: controlplane
	go run ./bench/groups -groups $${GROUPS:-5000} -addresses $${ADDRESSES:-100000} -rounds $${ROUNDS:-5}

## bench-migrate: 300 and 1,000 legacy VirtualIPs migrated at once against the bare writes (N=300,1000)
bench-migrate: build controlplane
	go run ./bench/migrate -n $${N:-300,1000}

## bench-dataplane: the nftables data plane and the iptables-restore one (both backends) at 1,000
## and 10,000 Services, against one go-iptables call per rule, with ratios (root; it works only
## inside network namespaces it creates and deletes)
bench-dataplane:
	go run ./bench/dataplane

## bench-steering: the steering tables of 10,000 Services on 3 and on 100 nodes: elements on a
## node, memory, rebuild time (pure: no root, no namespaces)
bench-steering:
	go run ./bench/steering

## bench-failover: layer-2 failover in three node namespaces (SIGKILL, link down, planned moves),
## tuned liveness timers against memberlist's LAN defaults (root)
bench-failover: build controlplane packages
	go test -tags $(TEST_TAGS) ./test/e2e -run '^$$' -bench BenchmarkFailover -benchtime 1x -timeout 30m -count 1

## bench-bgp: BGP in the lab (root): a Service's IP to its route in FRR for 1 and 1,000 Services,
## withdrawal on drain, agent memory with 1,000 routes and 2 peers, against a bare GoBGP speaker;
## a hung node (SIGSTOP) until its routes leave both routers, BFD (300 ms x 3) against the hold timer (3 s),
## with static neighbours and with the routers' listen ranges (lines "bfd-static:" and "bfd-dynamic:")
bench-bgp: build controlplane packages
	go test -tags $(TEST_TAGS) ./test/e2e -run '^$$' -bench BenchmarkBGP -benchtime 1x -timeout 20m -count 1

## bench-bgp-prefixes: a router sends PREFIXES=100000 routes to one BGP speaker, each in a network
## namespace (root): the agent's speaker (reject all, prefix limit) against a bare GoBGP with its
## default accept-all policies (the baseline) and one that only rejects all; memory growth and ratios
bench-bgp-prefixes:
	go run ./bench/bgpprefixes -prefixes $${PREFIXES:-100000}

## bench-announce: 1,000 LoadBalancer Services created at once in the three-node L2 lab (root):
## until every VIP is answered (NDP: IPv6, the IPv4 documentation ranges are too small) by the one
## node the ledger names, and by no other
bench-announce: build controlplane packages
	go test -tags $(TEST_TAGS) ./test/e2e -run '^$$' -bench BenchmarkAnnounce -benchtime 1x -timeout 20m -count 1

## bench-watch: one agent's watch traffic (bytes and events a second) with 2,000 Nodes reporting
## their status at the kubelet's rate and 10,000 Services, against kube-proxy's informer set in the
## same run, multiplied out for the API server: the agent as shipped (own Node + NodeViews), before
## NodeViews (every Node), and before with the Nodes' metadata only
bench-watch: controlplane
	go run ./bench/watch -nodes $${NODES:-2000} -services $${SERVICES:-10000} -duration $${DURATION:-2m}

## bench-arpflood: 10,000 forged ARP claims a second for 30 s at an owned VIP, in the L2 lab (root):
## the owner agent's RSS and CPU idle, during and after, and whether the VIP kept answering; the
## same flood against the agent of ARPFLOOD_BASELINE (the commit before the claim gate), built first
ARPFLOOD_BASELINE ?= aa025aa
bench-arpflood: build controlplane packages
	rm -rf $(BIN)/baseline-src && mkdir -p $(BIN)/baseline-src
	git archive $(ARPFLOOD_BASELINE) | tar -x -C $(BIN)/baseline-src
	cd $(BIN)/baseline-src && go build -o ../vip-allocator-baseline .
	VIPA_BASELINE_BIN=$(abspath $(BIN))/vip-allocator-baseline go test -tags $(TEST_TAGS) ./test/e2e -run '^$$' -bench BenchmarkARPFlood -benchtime 1x -timeout 20m -count 1

## bench-agent: the agent's whole path against kube-proxy in nftables mode (root), each in a node
## namespace, one control plane with N=10000 IPv6 Services x 2 ports x 5 endpoints: cold start until
## every endpoint is in the kernel, one endpoint change in the API until the kernel holds it (p50,
## p99 over CHANGES=200), CPU and RSS over 50 changes/s for 60 s; ratios ours/kube-proxy
bench-agent: build controlplane packages
	go run ./bench/agent -n $${N:-10000} -changes $${CHANGES:-200}

## bench-membership: how fast the agents' liveness layer declares a dead member dead, with our
## tuned memberlist timers against memberlist's LAN defaults, members simulated on loopback
## (SIZES=3,50 for a quick run; KILLS per size and way of dying). Clusters of BIG_SIZES share this
## machine's two cores, so they run with every timer DILATE times slower (detection times are
## divided back): without it, CPU starvation alone makes members look dead.
bench-membership:
	go run ./bench/membership -sizes $${SIZES:-3,50} -kills $${KILLS:-5}
	go run ./bench/membership -sizes $${BIG_SIZES:-500} -timers tuned -kills $${KILLS:-3} -dilate $${DILATE:-20}
