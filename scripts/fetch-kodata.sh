#!/bin/sh
# Downloads the Knative release manifests from their public release locations into the upstream Knative
# Operator's kodata layout:
#   <out>/knative-serving/<version>/NN-*.yaml, <out>/knative-eventing/<version>/NN-*.yaml,
#   <out>/ingress/<major.minor>/<ingress>/*.yaml, <out>/eventing-source/<major.minor>/<source>/*.yaml,
#   <out>/security-guard/<major.minor>/*.yaml
# Used by the image build (Dockerfile) and by the tests and demo when ../shared is not beside the checkout.
# Usage: fetch-kodata.sh [--base-url URL] [OUT_DIR]   (versions from the *_VERSIONS environment variables,
# defaults below; `none` fetches none of that kind; --help says more). --base-url (or KNATIVE_RELEASES_BASE_URL) replaces https://github.com: a mirror, or an
# air-gapped copy as file:///path, holding the same paths (<base>/knative/serving/releases/download/...).
# Nothing half-done is left behind: every file is fetched first, and only then does each release folder move
# into OUT_DIR, whole; a failed run changes nothing there.
: "${SERVING_VERSIONS:=1.20.3 1.21.3 1.22.1 1.23.0}"
: "${EVENTING_VERSIONS:=1.20.3 1.21.4 1.22.2 1.23.0}"
: "${KOURIER_VERSIONS:=1.20.1 1.21.1 1.22.1 1.23.0}"
: "${ISTIO_VERSIONS:=1.20.4 1.21.4 1.22.1 1.23.0}"
: "${CONTOUR_VERSIONS:=1.20.4 1.21.5 1.22.2 1.23.0}"
: "${GATEWAY_API_VERSIONS:=1.20.1 1.21.1 1.22.1 1.23.0}"
# KnativeEventing.spec.source: Kafka's source ships with eventing-kafka-broker; ceph, github, gitlab, rabbitmq
# and redis each release from their own repository, one version per Eventing minor.
: "${KAFKA_SOURCE_VERSIONS:=1.20.3 1.21.5 1.22.3 1.23.0}"
: "${EVENTING_SOURCE_VERSIONS:=1.20.0 1.21.1 1.22.1 1.23.0}"
# KnativeServing.spec.security.securityGuard: the guard's own releases, kept by minor as upstream keeps them.
: "${SECURITY_GUARD_VERSIONS:=0.3.0 0.4.1 0.5.0 0.6.0}"
set -eu
for kind in SERVING EVENTING KOURIER ISTIO CONTOUR GATEWAY_API KAFKA_SOURCE EVENTING_SOURCE SECURITY_GUARD; do
  eval "[ \"\$${kind}_VERSIONS\" != none ] || ${kind}_VERSIONS="
done
usage() {
  cat <<'USAGE'
Usage: fetch-kodata.sh [--base-url URL] [OUT_DIR]
Downloads the Knative release manifests into OUT_DIR (default /kodata) in the Knative Operator's kodata layout.
  --base-url URL   fetch from URL instead of https://github.com (also KNATIVE_RELEASES_BASE_URL): a mirror
                   (https://) or an air-gapped copy (file:///path) holding the same paths
Versions come from SERVING_VERSIONS, EVENTING_VERSIONS, KOURIER_VERSIONS, ISTIO_VERSIONS, CONTOUR_VERSIONS,
GATEWAY_API_VERSIONS, KAFKA_SOURCE_VERSIONS, EVENTING_SOURCE_VERSIONS and SECURITY_GUARD_VERSIONS
(space-separated; `none` fetches none of that kind). FETCH_KODATA_RETRIES: curl's retries over https (5).
USAGE
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
esac
base="${KNATIVE_RELEASES_BASE_URL:-https://github.com}"
if [ "${1:-}" = "--base-url" ]; then
  base="${2:?--base-url needs a URL}"
  shift 2
fi
base="${base%/}"
case "$base" in
  https://*) proto='=https' retries="${FETCH_KODATA_RETRIES:-5}" ;;
  file://*) proto='=file' retries=0 ;;
  *) echo "fetch-kodata: the base URL must be https:// or file://, got $base" >&2; exit 2 ;;
esac
out="${1:-/kodata}"
mkdir -p "$out"
staging="$(mktemp -d "$out/.fetch-kodata.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
# fetch PATH FILE: one release asset from the base URL into the staging folder, or the run fails.
fetch() {
  mkdir -p "$(dirname "$staging/$2")"
  curl -fsSL --retry "$retries" --retry-all-errors --proto "$proto" --tlsv1.2 -o "$staging/$2" "$base/$1" || {
    echo "fetch-kodata: could not fetch $base/$1; without access to it, --base-url URL (or" \
      "KNATIVE_RELEASES_BASE_URL) fetches from a mirror or an air-gapped copy (file:///path)" >&2
    exit 1
  }
}
minor() { echo "${1%.*}"; }
for v in $SERVING_VERSIONS; do
  url=knative/serving/releases/download/knative-v$v
  dir=knative-serving/$v
  fetch "$url/serving-crds.yaml" "$dir/1-serving-crds.yaml"
  fetch "$url/serving-core.yaml" "$dir/2-serving-core.yaml"
  fetch "$url/serving-hpa.yaml" "$dir/3-serving-hpa.yaml"
  fetch "$url/serving-post-install-jobs.yaml" "$dir/4-serving-post-install-jobs.yaml"
done
for v in $EVENTING_VERSIONS; do
  url=knative/eventing/releases/download/knative-v$v
  dir=knative-eventing/$v
  fetch "$url/eventing-crds.yaml" "$dir/1-eventing-crds.yaml"
  fetch "$url/eventing-core.yaml" "$dir/2-eventing-core.yaml"
  fetch "$url/eventing-tls-networking.yaml" "$dir/3-eventing-tls-networking.yaml"
  fetch "$url/in-memory-channel.yaml" "$dir/4-in-memory-channel.yaml"
  fetch "$url/mt-channel-broker.yaml" "$dir/5-mt-channel-broker.yaml"
  fetch "$url/eventing-post-install.yaml" "$dir/6-eventing-post-install.yaml"
done
ext=knative-extensions
for v in $KOURIER_VERSIONS; do
  fetch "$ext/net-kourier/releases/download/knative-v$v/kourier.yaml" "ingress/$(minor "$v")/kourier/kourier.yaml"
done
for v in $ISTIO_VERSIONS; do
  fetch "$ext/net-istio/releases/download/knative-v$v/net-istio.yaml" "ingress/$(minor "$v")/istio/net-istio.yaml"
done
for v in $CONTOUR_VERSIONS; do
  fetch "$ext/net-contour/releases/download/knative-v$v/net-contour.yaml" "ingress/$(minor "$v")/contour/net-contour.yaml"
done
for v in $GATEWAY_API_VERSIONS; do
  fetch "$ext/net-gateway-api/releases/download/knative-v$v/net-gateway-api.yaml" "ingress/$(minor "$v")/gateway-api/net-gateway-api.yaml"
done
for v in $KAFKA_SOURCE_VERSIONS; do
  for asset in eventing-kafka-controller.yaml eventing-kafka-post-install.yaml eventing-kafka-source.yaml; do
    fetch "$ext/eventing-kafka-broker/releases/download/knative-v$v/$asset" "eventing-source/$(minor "$v")/kafka/$asset"
  done
done
for v in $EVENTING_SOURCE_VERSIONS; do
  for source in ceph:ceph.yaml github:github.yaml gitlab:gitlab.yaml rabbitmq:rabbitmq-source.yaml redis:redis-source.yaml; do
    name=${source%%:*} asset=${source#*:}
    fetch "$ext/eventing-$name/releases/download/knative-v$v/$asset" "eventing-source/$(minor "$v")/$name/$asset"
  done
done
for v in $SECURITY_GUARD_VERSIONS; do
  for asset in gate-account.yaml guard-service.yaml guardian-crd.yaml queue-proxy.yaml service-account.yaml; do
    fetch "$ext/security-guard/releases/download/v$v/$asset" "security-guard/$(minor "$v")/$asset"
  done
done
chmod -R a+rX,go-w "$staging"
# Every file is here: each release folder replaces its old copy whole.
for dir in "$staging"/knative-serving/* "$staging"/knative-eventing/* "$staging"/ingress/*/* \
  "$staging"/eventing-source/*/* "$staging"/security-guard/*; do
  [ -d "$dir" ] || continue
  target="$out/${dir#"$staging"/}"
  mkdir -p "$(dirname "$target")"
  rm -rf "$target"
  mv "$dir" "$target"
done
chmod a+rX,go-w "$out"
