# Slipway: one small image with both binaries (the DaemonSet runs /update-agent, the Deployment
# /update-operator; /bin/update-agent and /bin/update-operator link to them, as FLUO's manifests
# start them). `make image` builds linux/amd64 and linux/arm64 with `docker buildx` (or without
# Docker, hack/ociimage: hack/build-image.sh). One platform:
#   docker build --build-arg VERSION=$(git describe --tags --always) -t slipway .
#
# Not pinned by digest yet: golang:1.26-bookworm is a tag, which its publisher can point at other
# bytes. No container registry was reachable where the pin was to be made, so no digest could be read
# or checked, and a made-up one would only break the build. Pin it (golang:1.26-bookworm@sha256:…,
# the digest `docker buildx imagetools inspect golang:1.26-bookworm` prints) and remove its entry in
# hack/release/dockerfile_test.go, whose TestDockerfileBasesPinned fails on any other FROM without a
# digest and skips, saying why, on this one. `make release` does not use this file: it builds the
# image with hack/ociimage on a scratch base.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.0.0-dev
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# Cross-compiled on the build machine's platform: static Go needs no emulation.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/slipway-dev/slipway/internal/version.Version=${VERSION}" \
      -o /rootfs/ ./agent/cmd/update-agent ./operator/cmd/update-operator && \
    mkdir /rootfs/bin && \
    ln -s ../update-agent /rootfs/bin/update-agent && \
    ln -s ../update-operator /rootfs/bin/update-operator

# Static binaries need nothing from a distribution: no shell, no libc, no package manager.
FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/update-operator"]
