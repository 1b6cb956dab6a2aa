#!/usr/bin/env bash
# Builds the sandbox's real servers and tools from Go modules, pinned, into a cache outside the repo.
# A binary is rebuilt only when its pinned version changes (the version is part of its file name).
# Usage: build-tools.sh [name ...]   (no names: all)   Prints the bin directory on its last line.
set -euo pipefail

KUBERNETES_VERSION=v1.35.4
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
CLUSTER_INVENTORY_API_VERSION=v0.1.2
HELM_VERSION=v3.22.0
GITEA_VERSION=v1.26.0

cache="${KNATIVE_FLEET_CACHE:-$HOME/.cache/knative-fleet}"
bin="$cache/bin"
src="$cache/src"
mkdir -p "$bin" "$src"
# One build at a time per cache: test projects and the demo may ask for the tools concurrently.
exec 9>"$cache/.build.lock"
flock 9
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

if ! command -v go >/dev/null 2>&1; then
  for d in /usr/local/go/bin /usr/lib/go/bin; do [ -x "$d/go" ] && PATH="$d:$PATH"; done
fi
command -v go >/dev/null 2>&1 || { echo "build-tools: the Go toolchain (go) is needed to build the sandbox binaries" >&2; exit 1; }

log() { printf 'build-tools: %s\n' "$*" >&2; }

# new_module DIR: an empty wrapper module in DIR (a fresh one per version, so a version bump starts clean).
new_module() {
  local dir=$1
  mkdir -p "$dir"
  if [ ! -f "$dir/go.mod" ]; then
    (cd "$dir" && go mod init knative-fleet.local/sandbox-tools >/dev/null 2>&1)
  fi
}

# build NAME VERSION MODULE_DIR PACKAGE [LDFLAGS] [TAGS]: go build PACKAGE inside MODULE_DIR into $bin/NAME-VERSION.
build() {
  local name=$1 version=$2 dir=$3 pkg=$4 ldflags=${5:-} tags=${6:-} out="$bin/$1-$2"
  local start=$SECONDS
  log "building $name $version"
  (cd "$dir" && go build -trimpath -tags="$tags" -ldflags="-s -w $ldflags" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  ln -sfn "$name-$version" "$bin/$name"
  log "built $name $version in $((SECONDS - start))s"
}

# What Kubernetes' own build (hack/lib/version.sh) stamps, so the servers report their real version: clients
# such as knative.dev/pkg refuse an apiserver that says v0.0.0-master, and a chart's kubeVersion needs it.
kubernetes_ldflags() {
  local v=$KUBERNETES_VERSION major minor p flags=""
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    flags+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

kubernetes() {
  local names=(kube-apiserver kube-controller-manager kube-scheduler) missing=0 n
  for n in "${names[@]}"; do [ -x "$bin/$n-$KUBERNETES_VERSION" ] || missing=1; done
  [ $missing = 1 ] || return 0
  kubernetes_module
  for n in "${names[@]}"; do
    [ -x "$bin/$n-$KUBERNETES_VERSION" ] || build "$n" "$KUBERNETES_VERSION" "$src/kubernetes-$KUBERNETES_VERSION" "k8s.io/kubernetes/cmd/$n" "$(kubernetes_ldflags)"
  done
}

# The wrapper module that builds Kubernetes' commands at $KUBERNETES_VERSION.
kubernetes_module() {
  local dir="$src/kubernetes-$KUBERNETES_VERSION"
  [ -f "$dir/.ready" ] && return 0
  new_module "$dir"
  # k8s.io/kubernetes replaces its staging modules with local paths, which a dependent module cannot
  # see: pin every one of them to the matching published v0.x.y instead.
  local gomod staging minor=${KUBERNETES_VERSION#v1.}
  gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$gomod")
  {
    echo "module knative-fleet.local/sandbox-tools"
    echo "go 1.25.0"
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo "replace ("
    for m in $staging; do echo "  $m => $m v0.$minor"; done
    echo ")"
  } >"$dir/go.mod"
  touch "$dir/.ready"
}

# The real node's kubelet: same module, version and stamp as the servers, but a target of its own (not in
# the default set), so only the sandboxes that boot a real node pay for its build.
kubelet() {
  [ -x "$bin/kubelet-$KUBERNETES_VERSION" ] && return 0
  kubernetes_module
  build kubelet "$KUBERNETES_VERSION" "$src/kubernetes-$KUBERNETES_VERSION" k8s.io/kubernetes/cmd/kubelet "$(kubernetes_ldflags)"
}

# kubectl, for the doc test that runs the guides' commands against the sandbox hub: same module and stamp.
kubectl() {
  [ -x "$bin/kubectl-$KUBERNETES_VERSION" ] && return 0
  kubernetes_module
  build kubectl "$KUBERNETES_VERSION" "$src/kubernetes-$KUBERNETES_VERSION" k8s.io/kubernetes/cmd/kubectl "$(kubernetes_ldflags)"
}

etcd() {
  [ -x "$bin/etcd-$ETCD_VERSION" ] && return 0
  local dir="$src/etcd-$ETCD_VERSION"
  new_module "$dir"
  # etcd's root module carries replace directives; its server module's etcdmain is the same program.
  cat >"$dir/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$dir" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1 && go mod tidy >/dev/null 2>&1)
  build etcd "$ETCD_VERSION" "$dir" .
}

# go_get_build NAME VERSION MODULE@VERSION PACKAGE
go_get_build() {
  local name=$1 version=$2 mod=$3 pkg=$4
  [ -x "$bin/$name-$version" ] && return 0
  local dir="$src/$name-$version"
  new_module "$dir"
  (cd "$dir" && go get "$mod" >/dev/null)
  build "$name" "$version" "$dir" "$pkg"
}

kwok() {
  go_get_build kwok "$KWOK_VERSION" "sigs.k8s.io/kwok@$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok
  local stages="$bin/kwok-stages-$KWOK_VERSION.yaml"
  [ -s "$stages" ] && return 0
  # kwok's own "fast" stages (what its kustomize/stage/fast bundles): nodes become Ready and keep a lease,
  # pods become Ready at once, Job pods complete, deleted pods go away.
  local dir
  dir=$(cd "$src/kwok-$KWOK_VERSION" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  local f
  for f in "$dir"/kustomize/stage/node/fast/*.yaml "$dir"/kustomize/stage/node/heartbeat-with-lease/*.yaml \
    "$dir"/kustomize/stage/pod/fast/*.yaml; do
    case "$f" in */kustomization.yaml) continue ;; esac
    printf -- '---\n'
    cat "$f"
  done >"$stages.tmp"
  mv "$stages.tmp" "$stages"
}
helm() { go_get_build helm "$HELM_VERSION" "helm.sh/helm/v3@$HELM_VERSION" helm.sh/helm/v3/cmd/helm; }
secretreader() {
  go_get_build secretreader "$CLUSTER_INVENTORY_API_VERSION" "sigs.k8s.io/cluster-inventory-api@$CLUSTER_INVENTORY_API_VERSION" \
    sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin
}
kubeconfig_secretreader() {
  go_get_build kubeconfig-secretreader "$CLUSTER_INVENTORY_API_VERSION" "sigs.k8s.io/cluster-inventory-api@$CLUSTER_INVENTORY_API_VERSION" \
    sigs.k8s.io/cluster-inventory-api/plugins/kubeconfig-secretreader/cmd/plugin
}

# A real Git forge for the forge tests (commit statuses, pull requests, webhooks): test/sandbox/gitea.ts.
# Gitea's go.mod carries replace directives, so it is built as the main module, from a writable copy of
# its module source; with cgo, for its sqlite driver. Without the bindata tag it reads options/, templates/
# and public/ from its static root at run time: a copy of those three sits next to the binary.
gitea() {
  local static="$bin/gitea-$GITEA_VERSION-static"
  [ -x "$bin/gitea-$GITEA_VERSION" ] && [ -d "$static" ] && return 0
  local dir="$src/gitea-$GITEA_VERSION"
  if [ ! -f "$dir/.ready" ]; then
    local mod
    mod=$(cd "$src" && go mod download -json "code.gitea.io/gitea@$GITEA_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    [ -n "$mod" ] || { log "could not download code.gitea.io/gitea@$GITEA_VERSION"; exit 1; }
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -R "$mod/." "$dir/"
    chmod -R u+w "$dir"
    touch "$dir/.ready"
  fi
  if [ ! -x "$bin/gitea-$GITEA_VERSION" ]; then
    command -v "${CC:-gcc}" >/dev/null 2>&1 || { log "gitea needs a C compiler (gcc) for its sqlite driver (cgo)"; exit 1; }
    CGO_ENABLED=1 build gitea "$GITEA_VERSION" "$dir" . "-X main.Version=${GITEA_VERSION#v}" "sqlite sqlite_unlock_notify"
  fi
  if [ ! -d "$static" ]; then
    rm -rf "$static.tmp"
    mkdir -p "$static.tmp"
    cp -R "$dir/options" "$dir/templates" "$dir/public" "$static.tmp/"
    mv "$static.tmp" "$static"
  fi
}

all=(etcd kubernetes kwok secretreader kubeconfig_secretreader helm gitea)
# Built only when named.
extra=(kubelet kubectl)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
total=$SECONDS
for t in "${targets[@]}"; do
  case " ${all[*]} ${extra[*]} " in
    *" ${t//-/_} "*) "${t//-/_}" ;;
    *) log "unknown tool: $t (known: ${all[*]} ${extra[*]})"; exit 2 ;;
  esac
done
log "all tools ready in $((SECONDS - total))s"
echo "$bin"
