# The one image: the static vip-allocator binary (operator, agent and agent
# cleanup) on a root filesystem that holds only the iptables commands the agent
# runs and the libraries they load (hack/image-rootfs.sh). No shell, no package
# manager. Build: make docker-build IMG=<registry>/vip-allocator:<version>

ARG GO_VERSION=1.26
ARG DEBIAN=trixie

FROM golang:${GO_VERSION}-${DEBIAN} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Same flags as 'make build' (what the tests and benches run); the tests check it is static.
ARG VERSION=0.1.0
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/paas-org/vip-allocator-operator/cmd.version=v${VERSION}" -o /out/vip-allocator .

FROM debian:${DEBIAN}-slim AS rootfs
RUN apt-get update && apt-get install -y --no-install-recommends iptables && rm -rf /var/lib/apt/lists/*
COPY hack/image-rootfs.sh /usr/local/bin/image-rootfs.sh
RUN image-rootfs.sh /rootfs

FROM scratch
COPY --from=rootfs /rootfs/ /
COPY --from=build /out/vip-allocator /usr/local/bin/vip-allocator
ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin
# The operator runs as this user (restricted Pod Security, OpenShift restricted-v2
# picks its own UID instead); the operator runs the agent as root explicitly.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/vip-allocator"]
CMD ["operator"]
