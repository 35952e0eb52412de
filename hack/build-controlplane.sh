#!/usr/bin/env bash
# Builds the real control-plane binaries Slipway's integration tests run (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl) from the Go module proxy alone, and caches them
# outside the repository keyed by version, so a second run only checks that they exist.
#
# Why a wrapper module: k8s.io/kubernetes cannot be `go install`ed because its go.mod replaces every
# k8s.io/X staging module with ./staging/src/k8s.io/X. We require it from a tiny module of our own and
# point each of those replaces at the published k8s.io/X v0.<minor>.<patch> instead.
#
# Usage: hack/build-controlplane.sh [binary ...]   (default: all; kubeadm validates terraform/'s configs)
# Prints the cache directory on its last line (stdout); progress goes to stderr.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.35.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
CACHE_ROOT="${SLIPWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slipway}"
OUT="$CACHE_ROOT/controlplane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kubeadm)

start=$(date +%s)
log() { printf '[build-controlplane +%ss] %s\n' "$(( $(date +%s) - start ))" "$*" >&2; }

missing=()
for b in "${want[@]}"; do
  [ -x "$OUT/$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -eq 0 ]; then
  log "cached: ${want[*]} in $OUT"
  echo "$OUT"
  exit 0
fi
command -v go >/dev/null || { echo "go is not on PATH: install Go 1.26 first" >&2; exit 1; }
mkdir -p "$OUT"
# Parallel test packages may ask at once: one builds, the others wait and then find it cached.
exec 9>"$OUT/.lock"
flock 9
missing=()
for b in "${want[@]}"; do
  [ -x "$OUT/$b" ] || missing+=("$b")
done
work="$CACHE_ROOT/controlplane/src"
mkdir -p "$work"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

build_etcd() {
  local dir="$work/etcd-$ETCD_VERSION"
  mkdir -p "$dir"
  if [ ! -f "$dir/go.mod" ]; then
    (cd "$dir" && go mod init slipway.local/etcdbuild >/dev/null 2>&1 && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2)
  fi
  log "building etcd $ETCD_VERSION (cold: ~2-3 min on 2 cores)"
  (cd "$dir" && go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$OUT/etcd.tmp" go.etcd.io/etcd/server/v3) && mv "$OUT/etcd.tmp" "$OUT/etcd"
}

k8s_module() {
  local dir="$work/kubernetes-$K8S_VERSION"
  if [ -f "$dir/go.mod" ]; then echo "$dir"; return; fi
  mkdir -p "$dir"
  log "preparing wrapper module for k8s.io/kubernetes $K8S_VERSION (staging modules at $STAGING_VERSION)"
  local modfile
  modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module slipway.local/k8sbuild"
    echo
    echo "go 1.25"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    # Keep kubernetes' own pins for everything it requires, so the build is what upstream tested.
    sed -n '/^require (/,/^)/p' "$modfile"
    echo
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*#\t\1 => \1 '"$STAGING_VERSION"'#p' "$modfile"
    echo ")"
  } > "$dir/go.mod"
  echo "$dir"
}

# The Kubernetes binaries in one go build: they share most packages, and one build keeps both cores
# busy while another binary links, where one build per binary would link them one after another.
build_k8s() {
  local dir pkgs=() b
  dir=$(k8s_module)
  for b in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  log "building $* $K8S_VERSION (cold: ~12 min on 2 cores; warm: ~30 s)"
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitMajor=1"
  local tmp="$OUT/.build.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # No DWARF: the binaries are stripped anyway, and the compiler then skips writing it.
  (cd "$dir" && go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ld" -o "$tmp/" "${pkgs[@]}")
  for b in "$@"; do mv "$tmp/$b" "$OUT/$b"; done
  rmdir "$tmp"
}

k8s=()
etcd_pid=
for b in "${missing[@]}"; do
  case "$b" in
    etcd)
      # etcd is a module of its own (nothing shared with Kubernetes' build): built alongside it, it
      # fills the cores while the other build links.
      build_etcd & etcd_pid=$! ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet|kubeadm) k8s+=("$b") ;;
    *) echo "unknown binary $b (known: etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kubeadm)" >&2; exit 2 ;;
  esac
done
[ ${#k8s[@]} -eq 0 ] || build_k8s "${k8s[@]}"
[ -z "$etcd_pid" ] || wait "$etcd_pid"
log "done: ${want[*]} in $OUT"
echo "$OUT"
