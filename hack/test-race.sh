#!/usr/bin/env bash
# test-race.sh: every test of the product module with the race detector, as `go test -race ./...`
# would run them, in less wall time. The operator package's real-API-server tests are the longest
# (~2.5 min, most of it waiting for the API server, informers and timers, not computing); go test
# starts a package's tests only once its test binary is linked, in package order, so they used to
# begin after most others had run. Here they start first, and the rest (links, then tests) run beside
# them. The race-mode dependency tree is compiled once, before both, so the two go commands never
# compile the same package twice on a cold cache. Prints the operator's results after the others',
# exits non-zero if either failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1
long=github.com/slipway-dev/slipway/operator

go build -race ./... || exit $?
log=$(mktemp)
trap 'rm -f "$log"' EXIT
go test -race -count=1 "$long" >"$log" 2>&1 &
pid=$!
# shellcheck disable=SC2046 # one argument per package
go test -race -count=1 $(go list ./... | grep -vx "$long")
rest=$?
wait $pid
first=$?
cat "$log"
[ $rest -eq 0 ] && [ $first -eq 0 ]
