# syntax=docker/dockerfile:1.7
#
# knative-fleet image: the reconciler (Node.js 24) plus the Knative release manifests it installs, laid out
# like the upstream Knative Operator's kodata:
#   /opt/knative-fleet/kodata/knative-serving/<version>/NN-*.yaml
#   /opt/knative-fleet/kodata/knative-eventing/<version>/NN-*.yaml
#   /opt/knative-fleet/kodata/ingress/<major.minor>/<ingress>/*.yaml
#
#   docker build -t knative-fleet .
#   docker build --build-arg SERVING_VERSIONS="1.22.1" --build-arg EVENTING_VERSIONS="1.22.2" ...
#
# Release versions to bundle, space-separated. Each ingress version goes to ingress/<its major.minor>/.
ARG SERVING_VERSIONS="1.21.3 1.22.1"
ARG EVENTING_VERSIONS="1.21.4 1.22.2"
ARG KOURIER_VERSIONS="1.21.1 1.22.1"
ARG ISTIO_VERSIONS="1.21.4 1.22.1"
ARG CONTOUR_VERSIONS="1.21.5 1.22.2"
ARG GATEWAY_API_VERSIONS="1.21.1 1.22.1"
ARG NODE_IMAGE=node:24-slim

# ---- build: TypeScript to dist/ (the stages that produce platform-independent files run on the build host)
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# Scripts stay on: the `node` devDependency installs the pinned Node 24 that `npm run build` uses.
# `npm install` keeps to package-lock.json too, without `npm ci`'s demand for every platform's optional
# packages in the lock (see scripts/ensure-deps.mjs).
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# ---- prod-deps: runtime dependencies only (all pure JavaScript, so no install scripts are needed)
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS prod-deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm install --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# ---- kodata: the Knative release manifests, from their public release locations
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS kodata
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
ARG SERVING_VERSIONS EVENTING_VERSIONS KOURIER_VERSIONS ISTIO_VERSIONS CONTOUR_VERSIONS GATEWAY_API_VERSIONS
RUN <<'EOF'
set -eu
out=/kodata
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
EOF

# ---- runtime
FROM ${NODE_IMAGE}
# tini as PID 1: forwards SIGTERM to Node and reaps the exited credential-plugin processes.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    KO_DATA_PATH=/opt/knative-fleet/kodata \
    HOME=/tmp
WORKDIR /opt/knative-fleet/app
COPY --from=prod-deps /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
COPY --from=kodata /kodata /opt/knative-fleet/kodata
# `knative-fleet` on PATH for `kubectl exec ... -- knative-fleet clusters`.
RUN chmod 0755 dist/cli.js && ln -s /opt/knative-fleet/app/dist/cli.js /usr/local/bin/knative-fleet
LABEL org.opencontainers.image.title="knative-fleet" \
      org.opencontainers.image.description="GitOps reconciler for Knative Serving and Eventing on a fleet of clusters" \
      org.opencontainers.image.licenses="Apache-2.0"
# Numeric, so Kubernetes can verify runAsNonRoot; the chart runs the pod as the same user.
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/opt/knative-fleet/app/dist/cli.js"]
CMD ["run"]
