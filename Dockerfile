# Slipway: one small image with both binaries (the DaemonSet runs /update-agent, the Deployment
# /update-operator). Build: docker build --build-arg VERSION=$(git describe --tags --always) -t slipway .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.0.0-dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/slipway-dev/slipway/internal/version.Version=${VERSION}" \
      -o /out/ ./agent/cmd/update-agent ./operator/cmd/update-operator

# Static binaries need nothing from a distribution: no shell, no libc, no package manager.
FROM scratch
COPY --from=build /out/update-agent /out/update-operator /
USER 65532:65532
ENTRYPOINT ["/update-operator"]
