#!/usr/bin/env bash
# `make image`: Slipway's image for linux/amd64 and linux/arm64 (static, CGO_ENABLED=0, cross-compiled)
# as one OCI image index. With `docker buildx` where a Docker engine answers, with hack/ociimage (no
# Docker, no registry) everywhere else. Both write $OUT/slipway-$VERSION.oci.tar, an OCI image layout
# as a tar (push it with `skopeo copy --all oci-archive:FILE docker://REF`); ociimage also leaves the
# layout itself in $OUT/slipway-$VERSION.oci/. Prints the tar's path.
#
#   hack/build-image.sh [VERSION]
#   env: IMAGE (ghcr.io/slipway-dev/slipway), PLATFORMS (linux/amd64,linux/arm64; os/arch each),
#        OUT (bin/image), IMAGE_BUILDER (docker or ociimage; default: docker if an engine answers)
#
# The image: /update-operator (entrypoint) and /update-agent, and /bin/update-operator and
# /bin/update-agent as symbolic links to them (what FLUO's manifests start); user 65532:65532.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)}
IMAGE=${IMAGE:-ghcr.io/slipway-dev/slipway}
PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64}
OUT=${OUT:-bin/image}
BUILDER=${IMAGE_BUILDER:-}
if [ -z "$BUILDER" ]; then
  if docker info >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; then BUILDER=docker; else BUILDER=ociimage; fi
fi
mkdir -p "$OUT"
archive="$OUT/slipway-$VERSION.oci.tar"

case "$BUILDER" in
docker)
  # Docker's default "docker" driver cannot export several platforms at once; a docker-container
  # builder can (created once, reused). Its BuildKit image (moby/buildkit:buildx-stable-1, buildx's
  # default) and the Dockerfile's golang base are tags, not digests (see the Dockerfile): `make
  # release` builds with ociimage for that reason.
  docker buildx inspect slipway-image >/dev/null 2>&1 ||
    docker buildx create --name slipway-image --driver docker-container >/dev/null
  docker buildx build --builder slipway-image --platform "$PLATFORMS" --build-arg VERSION="$VERSION" \
    -t "$IMAGE:$VERSION" --output "type=oci,dest=$archive" . >&2
  ;;
ociimage)
  bins="$OUT/bin"
  for p in ${PLATFORMS//,/ }; do
    os=${p%%/*} arch=${p#*/}
    [ "$os" != "$p" ] && [ "${arch#*/}" = "$arch" ] || { echo "platform $p: want os/arch" >&2; exit 2; }
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
      -ldflags "-s -w -X github.com/slipway-dev/slipway/internal/version.Version=$VERSION" \
      -o "$bins/${os}_$arch/" ./agent/cmd/update-agent ./operator/cmd/update-operator
  done
  # hack/ociimage is a module of its own (its image library is no dependency of the product).
  CGO_ENABLED=0 go build -C hack/ociimage -trimpath -o "$(cd "$bins" && pwd)/ociimage" .
  "$bins/ociimage" -name "$IMAGE:$VERSION" -platforms "$PLATFORMS" \
    -layout "$OUT/slipway-$VERSION.oci" -out "$archive" -entrypoint /update-operator -user 65532:65532 \
    -link /bin/update-agent=../update-agent -link /bin/update-operator=../update-operator \
    /update-agent="$bins/{os}_{arch}/update-agent" /update-operator="$bins/{os}_{arch}/update-operator"
  ;;
*)
  echo "IMAGE_BUILDER=$BUILDER: want docker or ociimage" >&2
  exit 2
  ;;
esac
echo "$archive"
