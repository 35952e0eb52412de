#!/usr/bin/env bash
# Downloads Flatcar's QEMU image for the e2e harness (FLATCAR_IMAGE=...), verified against the
# release's SHA-512 DIGESTS, cached by channel and version. Needs internet (this machine has none:
# it then says so and exits 1). Prints the image path on its last line; progress goes to stderr.
#
#   hack/fetch-flatcar-image.sh                  # stable, current
#   FLATCAR_CHANNEL=beta FLATCAR_VERSION=4593.1.0 hack/fetch-flatcar-image.sh
set -euo pipefail
CHANNEL="${FLATCAR_CHANNEL:-stable}"
VERSION="${FLATCAR_VERSION:-current}"
BASE="${FLATCAR_RELEASE_BASE:-https://$CHANNEL.release.flatcar-linux.net/amd64-usr}"
NAME=flatcar_production_qemu_image.img
CACHE_ROOT="${SLIPWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slipway}"
log() { printf '[fetch-flatcar-image] %s\n' "$*" >&2; }

case "$CHANNEL" in stable|beta|alpha|lts) ;; *) echo "FLATCAR_CHANNEL=$CHANNEL: use stable, beta, alpha or lts" >&2; exit 2;; esac
[[ "$VERSION" =~ ^(current|[0-9]+\.[0-9]+\.[0-9]+)$ ]] || { echo "FLATCAR_VERSION=$VERSION: use current or a version like 4593.2.5" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
url="$BASE/$VERSION"
log "fetching $url/version.txt"
if ! curl -fsSL --connect-timeout 10 -o "$tmp/version.txt" "$url/version.txt"; then
  echo "cannot reach $url: downloading Flatcar needs internet. On a machine without it, copy $NAME here and set FLATCAR_IMAGE=/path/to/it" >&2
  exit 1
fi
resolved=$(sed -n 's/^FLATCAR_VERSION=//p' "$tmp/version.txt")
[ -n "$resolved" ] || { echo "$url/version.txt has no FLATCAR_VERSION" >&2; exit 1; }
dir="$CACHE_ROOT/flatcar/$CHANNEL-$resolved"
if [ -f "$dir/$NAME" ]; then
  log "cached: $dir/$NAME"
  echo "$dir/$NAME"
  exit 0
fi
log "Flatcar $CHANNEL $resolved: downloading $NAME (~500 MB)"
curl -fSL --progress-bar -o "$tmp/$NAME" "$url/$NAME"
curl -fsSL -o "$tmp/$NAME.DIGESTS" "$url/$NAME.DIGESTS"
# DIGESTS holds "# SHA512 HASH" followed by "<hash>  <file>" lines (and other algorithms).
want=$(awk -v f="$NAME" '/^# SHA512 HASH/{s=1; next} /^#/{s=0} s && $2==f {print $1; exit}' "$tmp/$NAME.DIGESTS")
[ -n "$want" ] || { echo "no SHA512 for $NAME in $url/$NAME.DIGESTS" >&2; exit 1; }
got=$(sha512sum "$tmp/$NAME" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "SHA-512 mismatch for $url/$NAME: got $got, DIGESTS says $want; nothing kept" >&2
  exit 1
fi
mkdir -p "$dir"
mv "$tmp/$NAME" "$dir/$NAME"
log "verified (SHA-512) and cached: $dir/$NAME"
echo "$dir/$NAME"
