#!/usr/bin/env bash
# stage.sh NAME COMMAND...: runs COMMAND and says how long it took ("stage NAME took 12.3 s", or
# "failed after"), keeping its exit status. With $SLIPWAY_STAGES set, also appends the line there,
# for a summary at the end of `make test`.
set -uo pipefail
name=$1
shift
ms() { echo $(($(date +%s%N) / 1000000)); }
t0=$(ms)
"$@"
rc=$?
d=$(($(ms) - t0))
took=$(printf '%d.%d s' $((d / 1000)) $((d % 1000 / 100)))
if [ $rc -eq 0 ]; then
  line="stage $name took $took"
else
  line="stage $name FAILED (exit $rc) after $took"
fi
echo "$line" >&2
if [ -n "${SLIPWAY_STAGES:-}" ]; then
  echo "$line" >>"$SLIPWAY_STAGES"
fi
exit $rc
