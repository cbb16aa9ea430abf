#!/usr/bin/env bash
# Installs the Debian packages the test suite needs, once. Idempotent: a package already present is skipped.
set -euo pipefail
need=()
command -v chromium >/dev/null || need+=(chromium)
command -v espeak-ng >/dev/null || need+=(espeak-ng)
command -v sox >/dev/null || need+=(sox)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# renders deploy/kubernetes (kubectl kustomize; Debian 12's 1.20 is too old for the manifests: the test then
# skips, saying so; kubectl 1.21+ from pkgs.k8s.io renders them)
command -v kubectl >/dev/null || need+=(kubernetes-client)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)  # the multi-replica test's proxy
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "installing Debian packages: ${need[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
