#!/usr/bin/env bash
# `make unit`: every pure test of every Go module (`go test -short -count=1`), with nothing real
# started: no etcd, kube-apiserver, kube-controller-manager, dbus-daemon, Prometheus, QEMU, terraform,
# helm or kubectl binary, and no `go build`/`go install`/`go run`.
#
# Two guards make "nothing real" a checked claim, not a hope:
#   - in the tests: internal/testsupport/testenv refuses to start any of those under -short (an error, so the test
#     fails) and tests that need them skip first (testenv.NeedRealParts);
#   - here: every one of those commands is shadowed on PATH (and $SLIPWAY_CONTROLPLANE_DIR) by a stub
#     that records the attempt and fails, `go` by a wrapper that refuses build/install/run; and a
#     sampler looks for such processes of this run (by name, ten times a second, even when started by
#     absolute path) while the tests run. Any attempt fails the run and is listed.
#
# Why not plain `go test -short -count=1 ./...`: with -count=1 the go command relinks every test binary
# on every run (it caches compiled packages and test results, not linked test executables), and
# linking ~30 binaries that carry client-go is ~25 s of a warm run on 2 cores. `go test -c -o DIR/`
# relinks only what changed (the binaries in DIR keep their build IDs), so this builds every module's
# test binaries that way into the cache and runs them, each in its package's directory like go test,
# $(nproc) at a time, with -test.short -test.count=1: every test really runs every time. (go test's
# built-in vet subset does not run here; `make lint` runs all of go vet.)
# Prints each module's time and the total.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
modules=(. e2e hack/ociimage butane deploy/helmtest hack/release)

guard=$(mktemp -d "${TMPDIR:-/tmp}/slipway-unit-guard.XXXXXX")
attempts="$guard/attempts"
: >"$attempts"
sampler=
cleanup() {
  [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
  rm -rf "$guard"
}
trap cleanup EXIT

real_go=$(command -v go)
mkdir -p "$guard/bin"
real_parts=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kubeadm dbus-daemon
  prometheus promtool qemu-system-x86_64 qemu-img terraform tofu helm virsh libvirtd mmdebstrap)
for b in "${real_parts[@]}"; do
  cat >"$guard/bin/$b" <<EOF
#!/bin/sh
echo "$b \$*" >>"$attempts"
echo "make unit: $b is a real part; the fast tier must not start it (the test must skip under -short)" >&2
exit 1
EOF
  chmod +x "$guard/bin/$b"
done
cat >"$guard/bin/go" <<EOF
#!/bin/sh
case "\$1" in
build|install|run)
  echo "go \$*" >>"$attempts"
  echo "make unit: go \$1 under the fast tier (the test must skip under -short)" >&2
  exit 1 ;;
esac
exec "$real_go" "\$@"
EOF
chmod +x "$guard/bin/go"

# Every process this run starts carries this token in its environment (tests that set their own
# environment start from os.Environ()); the sampler recognises ours by it, also when a daemon has left
# its parent, and leaves other runs' processes alone (the machine may be shared).
token=$$-$RANDOM$RANDOM
export SLIPWAY_UNIT_RUN=$token
(
  set +e # a failed round must not end the sampler (the test jobs' `wait -n` would take it for one)
  # Process names as the kernel keeps them (at most 15 characters).
  names="etcd kube-apiserver kube-controller kube-scheduler kubelet dbus-daemon prometheus qemu-system-x86 terraform"
  while :; do
    pids=$(ps -eo pid=,comm= | awk -v names="$names" 'BEGIN { split(names, a, " "); for (i in a) n[a[i]] = 1 } ($2 in n) { print $1 }')
    if [ -n "$pids" ]; then
      for f in $(cd /proc && grep -lzx "SLIPWAY_UNIT_RUN=$token" $(printf '%s/environ ' $pids) 2>/dev/null); do
        pid=${f%%/*}
        echo "process $(cat "/proc/$pid/comm" 2>/dev/null) (pid $pid) $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" >>"$attempts"
      done
    fi
    sleep 0.1
  done
) &
sampler=$!

ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }
jobs=$(nproc 2>/dev/null || echo 2)
# One directory of test binaries per checkout (a second worktree would otherwise relink them back and
# forth) and module.
cache="${SLIPWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slipway}/unit/$(printf %s "$root" | md5sum | cut -c1-12)"

# unit_module MODULE BINDIR: builds the test binary of every package of MODULE that has tests into
# BINDIR (relinking only what changed) and runs them, $jobs at a time, printing go test's ok/FAIL line
# for each (and the output of those that fail).
unit_module() {
  local m=$1 bindir=$2 logs rc=0 running=0 dir pkg list out
  logs=$(mktemp -d "$guard/logs.XXXXXX")
  list=$(cd "$root/$m" && go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{"\t"}}{{.ImportPath}}{{end}}' ./...) || return 1
  [ -n "$list" ] || return 0
  if ! out=$(cd "$root/$m" && go test -c -o "$bindir/" $(cut -f2 <<<"$list") 2>&1); then
    echo "$out" >&2
    return 1
  fi
  while IFS=$'\t' read -r dir pkg; do
    [ -n "$dir" ] || continue
    (
      t0=$(ms)
      bin="$bindir/${pkg##*/}.test"
      if [ ! -x "$bin" ]; then
        echo "FAIL	$pkg [no test binary $bin]"
        exit 1
      fi
      if (cd "$dir" && "$bin" -test.short -test.count=1 -test.timeout=10m -test.paniconexit0) >"$logs/${pkg//\//_}" 2>&1; then
        echo "ok  	$pkg	$(secs $(($(ms) - t0)))s"
      else
        cat "$logs/${pkg//\//_}"
        echo "FAIL	$pkg	$(secs $(($(ms) - t0)))s"
        exit 1
      fi
    ) &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
      wait -n || rc=1
      running=$((running - 1))
    fi
  done <<<"$list"
  while [ "$running" -gt 0 ]; do
    wait -n || rc=1
    running=$((running - 1))
  done
  return $rc
}

export PATH="$guard/bin:$PATH" SLIPWAY_CONTROLPLANE_DIR="$guard/bin"
start=$(ms)
failed=()
for m in "${modules[@]}"; do
  t0=$(ms)
  bindir="$cache/module-${m//\//_}"
  mkdir -p "$bindir"
  if ! unit_module "$m" "$bindir"; then
    failed+=("$m")
  fi
  echo "unit: module $m took $(secs $(($(ms) - t0))) s"
done
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=
elapsed=$(secs $(($(ms) - start)))
if [ -s "$attempts" ]; then
  echo "unit: real parts were started under -short:" >&2
  sort -u "$attempts" | sed 's/^/  /' >&2
  failed+=("guard")
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "unit: FAILED (${failed[*]}) after $elapsed s" >&2
  exit 1
fi
echo "unit: ok, ${#modules[@]} modules, nothing real started, in $elapsed s"
