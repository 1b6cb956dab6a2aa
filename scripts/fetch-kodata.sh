#!/bin/sh
# Downloads the Knative release manifests from their public release locations into the upstream Knative
# Operator's kodata layout:
#   <out>/knative-serving/<version>/NN-*.yaml, <out>/knative-eventing/<version>/NN-*.yaml,
#   <out>/ingress/<major.minor>/<ingress>/*.yaml
# Used by the image build (Dockerfile) and by the tests and demo when ../shared is not beside the checkout.
# Usage: fetch-kodata.sh [OUT_DIR]   (versions from the *_VERSIONS environment variables, defaults below)
: "${SERVING_VERSIONS:=1.20.3 1.21.3 1.22.1 1.23.0}"
: "${EVENTING_VERSIONS:=1.20.3 1.21.4 1.22.2 1.23.0}"
: "${KOURIER_VERSIONS:=1.20.1 1.21.1 1.22.1 1.23.0}"
: "${ISTIO_VERSIONS:=1.20.4 1.21.4 1.22.1 1.23.0}"
: "${CONTOUR_VERSIONS:=1.20.4 1.21.5 1.22.2 1.23.0}"
: "${GATEWAY_API_VERSIONS:=1.20.1 1.21.1 1.22.1 1.23.0}"
set -eu
out="${1:-/kodata}"
# fetch URL FILE: one release asset, or the build fails (no partial kodata).
fetch() {
  mkdir -p "$(dirname "$2")"
  curl -fsSL --retry 5 --retry-all-errors --proto '=https' --tlsv1.2 -o "$2" "$1"
}
minor() { echo "${1%.*}"; }
for v in $SERVING_VERSIONS; do
  url=https://github.com/knative/serving/releases/download/knative-v$v
  dir=$out/knative-serving/$v
  fetch "$url/serving-crds.yaml" "$dir/1-serving-crds.yaml"
  fetch "$url/serving-core.yaml" "$dir/2-serving-core.yaml"
  fetch "$url/serving-hpa.yaml" "$dir/3-serving-hpa.yaml"
  fetch "$url/serving-post-install-jobs.yaml" "$dir/4-serving-post-install-jobs.yaml"
done
for v in $EVENTING_VERSIONS; do
  url=https://github.com/knative/eventing/releases/download/knative-v$v
  dir=$out/knative-eventing/$v
  fetch "$url/eventing-crds.yaml" "$dir/1-eventing-crds.yaml"
  fetch "$url/eventing-core.yaml" "$dir/2-eventing-core.yaml"
  fetch "$url/eventing-tls-networking.yaml" "$dir/3-eventing-tls-networking.yaml"
  fetch "$url/in-memory-channel.yaml" "$dir/4-in-memory-channel.yaml"
  fetch "$url/mt-channel-broker.yaml" "$dir/5-mt-channel-broker.yaml"
  fetch "$url/eventing-post-install.yaml" "$dir/6-eventing-post-install.yaml"
done
ext=https://github.com/knative-extensions
for v in $KOURIER_VERSIONS; do
  fetch "$ext/net-kourier/releases/download/knative-v$v/kourier.yaml" "$out/ingress/$(minor "$v")/kourier/kourier.yaml"
done
for v in $ISTIO_VERSIONS; do
  fetch "$ext/net-istio/releases/download/knative-v$v/net-istio.yaml" "$out/ingress/$(minor "$v")/istio/net-istio.yaml"
done
for v in $CONTOUR_VERSIONS; do
  fetch "$ext/net-contour/releases/download/knative-v$v/net-contour.yaml" "$out/ingress/$(minor "$v")/contour/net-contour.yaml"
done
for v in $GATEWAY_API_VERSIONS; do
  fetch "$ext/net-gateway-api/releases/download/knative-v$v/net-gateway-api.yaml" "$out/ingress/$(minor "$v")/gateway-api/net-gateway-api.yaml"
done
chmod -R a+rX,go-w "$out"
