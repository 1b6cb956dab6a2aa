#!/usr/bin/env bash
# The images a real sandbox node needs besides knative-fleet's, built locally with buildah since no
# registry is reachable, each written once as an OCI archive for `ctr images import`:
#   pause          the pod sandbox image: Kubernetes' own pause.c (from the module build-tools.sh uses), static
#   busybox        a static busybox (Debian's busybox-static), what the chart's pluginCopyImage must be
#   secretreader, kubeconfig-secretreader
#                  the cluster-inventory-api plugins built by build-tools.sh, laid out like the official images
#                  (FROM scratch, the binary at /bin/<name>-plugin)
# Usage: node-images.sh BIN_DIR   Prints "name reference archive" per image.
set -euo pipefail
bin=$1
cache="${KNATIVE_FLEET_CACHE:-$HOME/.cache/knative-fleet}/image"
mkdir -p "$cache"
exec 9>"$cache/.node-images.lock"
flock 9
log() { printf 'node-images: %s\n' "$*" >&2; }

k8s_version=$(basename "$(readlink "$bin/kube-apiserver")"); k8s_version=${k8s_version#kube-apiserver-}
plugins_version=$(basename "$(readlink "$bin/secretreader")"); plugins_version=${plugins_version#secretreader-}
busybox_version=$(dpkg-query -W -f "\${Version}" busybox-static | sed "s/^[0-9]*://" | tr "~+" "--")

# image NAME REFERENCE FILE... : a FROM scratch image of FILE (src:dest pairs) with the given entrypoint.
image() {
  local name=$1 ref=$2 entrypoint=$3; shift 3
  local archive="$cache/$name-${ref##*:}.oci.tar"
  if [ ! -s "$archive" ]; then
    log "building $ref"
    local ctr pair
    ctr=$(buildah from scratch)
    for pair in "$@"; do buildah copy --quiet --chmod 0555 "$ctr" "${pair%%:*}" "${pair#*:}" >/dev/null; done
    [ -z "$entrypoint" ] || buildah config --entrypoint "$entrypoint" "$ctr"
    buildah config --user 65532:65532 "$ctr"
    buildah commit --quiet --rm "$ctr" "$ref" >/dev/null
    buildah push --quiet "$ref" "oci-archive:$archive.tmp:$ref" >&2
    mv "$archive.tmp" "$archive"
  fi
  echo "$name $ref $archive"
}

pause_bin="$cache/pause-$k8s_version"
if [ ! -x "$pause_bin" ]; then
  gomodcache=$(go env GOMODCACHE 2>/dev/null || echo "$HOME/go/pkg/mod")
  src="$gomodcache/k8s.io/kubernetes@$k8s_version/build/pause/linux/pause.c"
  [ -f "$src" ] || { log "no $src: build the sandbox tools first"; exit 1; }
  gcc -Os -static -DVERSION="$k8s_version" -o "$pause_bin.tmp" "$src"
  mv "$pause_bin.tmp" "$pause_bin"
fi
image pause "localhost/pause:$k8s_version" '["/pause"]' "$pause_bin:/pause"
image busybox "localhost/busybox:$busybox_version" '' /bin/busybox:/bin/busybox
for p in secretreader kubeconfig-secretreader; do
  image "$p" "localhost/$p:$plugins_version" '' "$(readlink -f "$bin/$p"):/bin/$p-plugin"
done
