# syntax=docker/dockerfile:1
#
# vk-sandbox: a static binary (CGO off) on a minimal, non-root base.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t vk-sandbox .
#
# The state file needs a writable, persistent directory: mount one at
# /var/lib/vk-sandbox (the default --state-path is
# /var/lib/vk-sandbox/claims.json). manifests/daemonset.yaml uses a hostPath.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETARCH=amd64
ARG VERSION=dev
# make build-linux: CGO_ENABLED=0 GOOS=linux, -trimpath, into bin/linux-<arch>/.
RUN make build-linux GOARCH=${TARGETARCH} VERSION=${VERSION} \
 && install -D -m 0755 bin/linux-${TARGETARCH}/vk-sandbox /out/vk-sandbox \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/vk-sandbox /usr/local/bin/vk-sandbox
# Owned by the runtime user and 0700, so that a fresh volume is writable and
# not readable by others: the state file holds release tokens.
COPY --from=build --chown=65532:65532 --chmod=0700 /out/state/ /var/lib/vk-sandbox/
VOLUME /var/lib/vk-sandbox
USER 65532:65532
# 10260: kubelet API (TLS). 10261: /metrics, /healthz, /readyz.
EXPOSE 10260 10261
ENTRYPOINT ["/usr/local/bin/vk-sandbox"]
