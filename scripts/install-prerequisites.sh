#!/usr/bin/env bash
# System tools the sandbox and tests use: git (with http-backend), openssl, Prometheus and promtool (the
# alert rules' tests), and Go for building the sandbox binaries. Installs what is missing from Debian's packages (needs root); Node 24 itself comes
# from npm (the `node` devDependency).
#   --image   also what scripts/build-image.sh needs: buildah, and mmdebstrap for the local Node base
#   --node    also the sandbox's real node: containerd, runc, CNI plugins, a static busybox (the pause image
#             and the chart's plugin-copy initContainer)
set -euo pipefail
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need git git
# Gitea's sqlite driver is cgo: the sandbox's forge is built with a C compiler.
need gcc gcc
need openssl openssl
need npm npm
# The shells whose completion scripts `knative-fleet completion` writes (test/unit/cli/completion.test.ts).
need zsh zsh
need fish fish
for arg in "$@"; do
  case "$arg" in
    --image) need buildah buildah; need mmdebstrap mmdebstrap ;;
    --node)
      need containerd containerd; need runc runc; need busybox busybox-static
      [ -x /usr/lib/cni/loopback ] || missing+=(containernetworking-plugins) ;;
    *) echo "install-prerequisites: unknown option $arg" >&2; exit 2 ;;
  esac
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-prerequisites: installing ${missing[*]}" >&2
  if [ "$(id -u)" != 0 ]; then
    echo "install-prerequisites: need root (or sudo) to apt-get install ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Debian's prometheus package brings the server and promtool; without its recommends (node-exporter). Its
# service is not wanted here: the tests start their own server on loopback.
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  echo "install-prerequisites: installing prometheus" >&2
  if [ "$(id -u)" != 0 ]; then
    echo "install-prerequisites: need root (or sudo) to apt-get install prometheus" >&2
    exit 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi
# Every kube-apiserver, kubelet and containerd of the sandbox holds inotify instances; the kernel's default
# of 128 per user runs out with a few sandboxes at once (then containerd's CRI fails to load: "too many
# open files").
if [ "$(sysctl -n fs.inotify.max_user_instances 2>/dev/null || echo 1024)" -lt 1024 ]; then
  if [ "$(id -u)" = 0 ]; then
    sysctl -qw fs.inotify.max_user_instances=1024 ||
      echo "install-prerequisites: could not raise fs.inotify.max_user_instances to 1024" >&2
  else
    echo "install-prerequisites: fs.inotify.max_user_instances is below 1024; raise it (sysctl) for large sandboxes" >&2
  fi
fi
if ! git help -a 2>/dev/null | grep -q http-backend && [ ! -x "$(git --exec-path)/git-http-backend" ]; then
  echo "install-prerequisites: git http-backend is missing from this git installation" >&2
  exit 1
fi
# Gitea 1.26 needs Go 1.26.2 or newer (Kubernetes 1.35: 1.25): Debian's golang-go is older, so Go is not
# installed from there, and the sandbox builds with the machine's own Go (GOTOOLCHAIN=local).
PATH="$PATH:/usr/local/go/bin"
go_ok() {
  local v
  v=$(go env GOVERSION 2>/dev/null) || return 1
  [ "$(printf '%s\n%s\n' 1.26.2 "${v#go}" | sort -V | head -1)" = 1.26.2 ]
}
if ! command -v go >/dev/null 2>&1 || ! go_ok; then
  echo "install-prerequisites: Go 1.26.2+ is needed to build the sandbox binaries (https://go.dev/dl/)" >&2
  exit 1
fi
node scripts/ensure-deps.mjs
