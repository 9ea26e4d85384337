# syntax=docker/dockerfile:1
#
# vk-sandbox: a static binary (CGO off) on a minimal, non-root base, for
# linux/amd64 and linux/arm64. The build stage runs on the builder's own
# platform and cross-compiles for the target, so no stage runs under
# emulation:
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) \
#     -t ghcr.io/cocoonstack/vk-sandbox:<version> --push .
#
# VERSION and COMMIT are stamped into the binary as the Makefile's LDFLAGS
# do (-X main.version, -X main.stampedCommit), so --version and
# vksandbox_build_info name them, and into the image's OCI labels.
#
# The state file needs a writable, persistent directory: mount one at
# /var/lib/vk-sandbox (the default --state-path is
# /var/lib/vk-sandbox/claims.json). manifests/daemonset.yaml uses a hostPath.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG COMMIT=unknown
# make build-linux: CGO_ENABLED=0 GOOS=linux, -trimpath, into bin/linux-<arch>/.
RUN [ "${TARGETOS}" = linux ] || { echo "vk-sandbox is built for linux only, not ${TARGETOS}" >&2; exit 1; } \
 && make build-linux GOARCH=${TARGETARCH} VERSION=${VERSION} COMMIT=${COMMIT} \
 && install -D -m 0755 bin/linux-${TARGETARCH}/vk-sandbox /out/vk-sandbox \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="vk-sandbox" \
      org.opencontainers.image.description="Virtual-kubelet provider for the node-local sandboxd warm pool" \
      org.opencontainers.image.source="https://github.com/cocoonstack/vk-sandbox" \
      org.opencontainers.image.url="https://github.com/cocoonstack/vk-sandbox" \
      org.opencontainers.image.documentation="https://github.com/cocoonstack/vk-sandbox/tree/main/docs" \
      org.opencontainers.image.vendor="cocoonstack" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/vk-sandbox /usr/bin/vk-sandbox
# Owned by the runtime user and 0700, so that a fresh volume is writable and
# not readable by others: the state file holds release tokens.
COPY --from=build --chown=65532:65532 --chmod=0700 /out/state/ /var/lib/vk-sandbox/
VOLUME /var/lib/vk-sandbox
USER 65532:65532
# 10260: kubelet API (TLS). 10261: /metrics, /healthz, /readyz.
EXPOSE 10260 10261
ENTRYPOINT ["/usr/bin/vk-sandbox"]
