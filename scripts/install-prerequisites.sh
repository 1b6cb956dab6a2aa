#!/usr/bin/env bash
# System tools the sandbox and tests use: git (with http-backend), openssl, and Go for building the
# sandbox binaries. Installs what is missing from Debian's packages (needs root); Node 24 itself comes
# from npm (the `node` devDependency).
set -euo pipefail
missing=()
command -v git >/dev/null 2>&1 || missing+=(git)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-prerequisites: installing ${missing[*]}" >&2
  if [ "$(id -u)" != 0 ]; then
    echo "install-prerequisites: need root (or sudo) to apt-get install ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! git help -a 2>/dev/null | grep -q http-backend && [ ! -x "$(git --exec-path)/git-http-backend" ]; then
  echo "install-prerequisites: git http-backend is missing from this git installation" >&2
  exit 1
fi
# Kubernetes 1.35 needs Go 1.25 or newer: Debian's golang-go is older, so Go is not installed from there.
PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null 2>&1; then
  echo "install-prerequisites: Go 1.25+ is needed to build the sandbox binaries (https://go.dev/dl/)" >&2
  exit 1
fi
node scripts/ensure-deps.mjs
