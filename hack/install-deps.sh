#!/usr/bin/env bash
# Installs what `make test` needs on a fresh Debian machine: dbus-daemon (tests run private buses),
# Prometheus, amtool, rsvg-convert, aiosmtpd (an SMTP server for the e-mail tests).
# Go itself must already be there. Idempotent and quiet when everything is present.
set -euo pipefail
need=()
command -v dbus-daemon >/dev/null || need+=(dbus-daemon)
command -v git >/dev/null || need+=(git)
command -v prometheus >/dev/null || need+=(prometheus) # a real Prometheus for operator/blocker's alert tests
command -v amtool >/dev/null || need+=(prometheus-alertmanager) # amtool: deploy's Alertmanager inhibition example
command -v rsvg-convert >/dev/null || need+=(librsvg2-bin) # renders the history timeline in its test
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import aiosmtpd' 2>/dev/null || need+=(python3-aiosmtpd) # a real SMTP server for e-mail notifications
if [ ${#need[@]} -gt 0 ]; then
  echo "[install-deps] installing ${need[*]} with apt-get" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
command -v go >/dev/null || { echo "[install-deps] Go is not installed: install Go 1.26 (https://go.dev/dl/)" >&2; exit 1; }
