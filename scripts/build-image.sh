#!/usr/bin/env bash
# Builds the knative-fleet image from the Dockerfile without a Docker engine, with buildah (Debian's
# package; root). Where the Dockerfile's base cannot be pulled, it first builds a local one with the same
# contents as node:24-slim: Debian bookworm minbase from the Debian mirror apt uses, plus the Node 24 binary
# the `node` npm package ships and npm from the npm registry. Both are cached: the base by its versions,
# the image's layers by buildah (--layers), the npm downloads in a cache mount; a rebuild with nothing
# changed reuses every layer.
#
# Usage: scripts/build-image.sh [--tag NAME] [--kodata DIR] [--archive FILE]
#   --tag NAME       image name (default localhost/knative-fleet:dev)
#   --kodata DIR     take the release manifests from DIR (the kodata layout) instead of fetching them
#   --archive FILE   also write the image as an OCI archive (for `ctr images import`), rewritten only when
#                    the image changed
# Environment: NODE_IMAGE=IMAGE uses that base as it is (e.g. node:24-slim where registries are reachable).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tag=localhost/knative-fleet:dev
kodata=""
archive=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=$2; shift 2 ;;
    --kodata) kodata=$(cd "$2" && pwd); shift 2 ;;
    --archive) archive=$2; shift 2 ;;
    *) echo "build-image: unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { printf 'build-image: %s\n' "$*" >&2; }
command -v buildah >/dev/null 2>&1 || { log "buildah is needed (scripts/install-prerequisites.sh --image)"; exit 1; }
[ "$(id -u)" = 0 ] || { log "needs root (buildah's overlay storage and the base's mmdebstrap)"; exit 1; }

cache="${KNATIVE_FLEET_CACHE:-$HOME/.cache/knative-fleet}/image"
mkdir -p "$cache"
# One build at a time: buildah's layer cache and the base are shared.
exec 9>"$cache/.lock"
flock 9
start=$SECONDS

# The Node 24 that `npm run …` uses: the `node` devDependency's platform package.
node_bin=$(readlink -f "$root/node_modules/.bin/node")
node_version=$("$node_bin" -p process.versions.node)
NPM_VERSION=11.19.1
DEBIAN_SUITE=bookworm

base_image() {
  local name="localhost/knative-fleet-node-base:${node_version}-npm${NPM_VERSION}-${DEBIAN_SUITE}"
  if buildah inspect --type image "$name" >/dev/null 2>&1; then
    echo "$name"
    return 0
  fi
  command -v mmdebstrap >/dev/null 2>&1 || { log "mmdebstrap is needed to build the base"; exit 1; }
  log "building the base $name"
  local work mirror ctr
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  # The mirror apt already uses on this machine (deb822 or one-line sources), else Debian's default.
  mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p; s/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) .*/\2/p' \
    /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | grep -v security | head -n1)
  mirror=${mirror:-http://deb.debian.org/debian}
  # What debian:bookworm-slim leaves out: documentation, man pages and translations.
  mmdebstrap --quiet --variant=minbase --mode=root \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    "$DEBIAN_SUITE" "$work/rootfs.tar" "$mirror" >&2
  # /usr/local as node:24-slim lays it out: bin/node, lib/node_modules/npm, bin/npm and bin/npx.
  mkdir -p "$work/local/bin" "$work/local/lib/node_modules"
  cp "$node_bin" "$work/local/bin/node"
  (cd "$work" && npm pack --silent "npm@$NPM_VERSION" >/dev/null)
  tar -xzf "$work/npm-$NPM_VERSION.tgz" -C "$work/local/lib/node_modules"
  mv "$work/local/lib/node_modules/package" "$work/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$work/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$work/local/bin/npx"
  ctr=$(buildah from scratch)
  buildah add --quiet "$ctr" "$work/rootfs.tar" / >/dev/null
  buildah copy --quiet "$ctr" "$work/local" /usr/local >/dev/null
  buildah config --env NODE_VERSION="$node_version" --cmd '["node"]' \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  buildah commit --quiet --rm "$ctr" "$name" >/dev/null
  echo "$name"
}

node_image=${NODE_IMAGE:-$(base_image)}
args=(--layers --network host --build-arg "NODE_IMAGE=$node_image" --tag "$tag" --file "$root/Dockerfile")
# A machine whose Node trusts an extra CA (NODE_EXTRA_CA_CERTS, e.g. a TLS-inspecting proxy's) lends it to
# npm in the RUN steps: bind mounts, so neither the CA nor the npmrc ends up in a layer.
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  printf 'cafile=/usr/local/etc/build-ca.crt\n' >"$cache/build-npmrc"
  args+=(--volume "$NODE_EXTRA_CA_CERTS:/usr/local/etc/build-ca.crt:ro" --volume "$cache/build-npmrc:/usr/local/etc/npmrc:ro")
fi
if [ -n "$kodata" ]; then
  args+=(--build-arg KODATA_FROM=local --build-context "kodata-dir=$kodata")
fi
log "building $tag on $node_image"
buildah build --quiet "${args[@]}" "$root" >&2
id=$(buildah inspect --type image --format '{{.FromImageID}}' "$tag")
if [ -n "$archive" ]; then
  # The archive carries the image id beside it, so an unchanged image is not written again.
  if [ ! -s "$archive" ] || [ "$(cat "$archive.id" 2>/dev/null)" != "$id" ]; then
    rm -f "$archive"
    buildah push --quiet "$tag" "oci-archive:$archive:$tag" >&2
    echo "$id" >"$archive.id"
  fi
fi
size=$(buildah inspect --type image --format '{{.FromImageID}}' "$tag" >/dev/null && buildah images --format '{{.Size}}' "$tag")
log "built $tag ($id, $size) in $((SECONDS - start))s"
echo "$tag"
