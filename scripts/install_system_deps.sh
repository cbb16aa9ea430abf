#!/usr/bin/env bash
# Installs the Debian packages the test suite needs, once. Idempotent: a package already present is skipped.
set -euo pipefail
need=()
command -v chromium >/dev/null || need+=(chromium)
command -v espeak-ng >/dev/null || need+=(espeak-ng)
command -v sox >/dev/null || need+=(sox)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "installing Debian packages: ${need[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
