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
#   docker build --build-arg KODATA_FROM=local --build-context kodata-dir=DIR ...   (releases already at hand)
#
# Without a Docker engine, scripts/build-image.sh builds this file with buildah (and a local Node base).
#
# Release versions to bundle, space-separated; each ingress version goes to ingress/<its major.minor>/. Unset,
# scripts/fetch-kodata.sh's defaults apply: the upstream operator's window, its one list.
ARG SERVING_VERSIONS
ARG EVENTING_VERSIONS
ARG KOURIER_VERSIONS
ARG ISTIO_VERSIONS
ARG CONTOUR_VERSIONS
ARG GATEWAY_API_VERSIONS
ARG KAFKA_SOURCE_VERSIONS
ARG EVENTING_SOURCE_VERSIONS
ARG SECURITY_GUARD_VERSIONS
ARG NODE_IMAGE=node:24-slim
# Where the release manifests come from: "fetch" (their public release locations) or "local" (the build
# context named kodata-dir, a directory already in the kodata layout).
ARG KODATA_FROM=fetch

# ---- build: TypeScript to dist/ (the stages that produce platform-independent files run on the build host)
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# Scripts stay on: the `node` devDependency installs the pinned Node 24 that `npm run build` uses.
# `npm install` keeps to package-lock.json too, without `npm ci`'s demand for every platform's optional
# packages in the lock (see scripts/ensure-deps.mjs).
RUN --mount=type=cache,target=/root/.npm,sharing=locked npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# ---- prod-deps: runtime dependencies only (all pure JavaScript, so no install scripts are needed)
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS prod-deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm,sharing=locked npm install --omit=dev --ignore-scripts --no-audit --no-fund

# ---- kodata: the Knative release manifests, from their public release locations (KODATA_FROM=fetch)...
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS kodata-fetch
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
ARG SERVING_VERSIONS EVENTING_VERSIONS KOURIER_VERSIONS ISTIO_VERSIONS CONTOUR_VERSIONS GATEWAY_API_VERSIONS \
  KAFKA_SOURCE_VERSIONS EVENTING_SOURCE_VERSIONS SECURITY_GUARD_VERSIONS
COPY scripts/fetch-kodata.sh /usr/local/bin/fetch-kodata
RUN sh /usr/local/bin/fetch-kodata /kodata

# ... or from a local directory (KODATA_FROM=local); only the selected stage is built.
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS kodata-local
COPY --from=kodata-dir . /kodata
RUN chmod -R a+rX,go-w /kodata

FROM kodata-${KODATA_FROM} AS kodata

# ---- runtime
FROM ${NODE_IMAGE}
# tini as PID 1: forwards SIGTERM to Node and reaps the exited credential-plugin processes.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
# One malloc arena: Node's helper threads (GC, compiler, libuv) would each keep an arena of freed memory, several
# MiB of RSS apiece, for allocations that are rare here.
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=1 \
    KO_DATA_PATH=/opt/knative-fleet/kodata \
    HOME=/tmp
WORKDIR /opt/knative-fleet/app
COPY --from=prod-deps /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
COPY --from=kodata /kodata /opt/knative-fleet/kodata
# `knative-fleet` on PATH for `kubectl exec ... -- knative-fleet clusters`. The releases are parsed once here
# (kodata/.compiled/, see src/render/compiled.ts): `run` loads each with a JSON.parse.
RUN chmod 0755 dist/cli.js && ln -s /opt/knative-fleet/app/dist/cli.js /usr/local/bin/knative-fleet \
 && node dist/cli.js compile-kodata
LABEL org.opencontainers.image.title="knative-fleet" \
      org.opencontainers.image.description="GitOps reconciler for Knative Serving and Eventing on a fleet of clusters" \
      org.opencontainers.image.licenses="Apache-2.0"
# Numeric, so Kubernetes can verify runAsNonRoot; the chart runs the pod as the same user.
USER 65532:65532
EXPOSE 8080 9090
# Node's flags trade peak speed for memory; a reconciler waits on API servers, not on its CPU
# (scripts/bench-perf.ts, the 2-CR workload: peak RSS 163-173 -> 113-119 MiB, Ready as soon after the spoke):
# - a 1 MiB young generation: the allocations are bursty (apply passes, Git packs), and V8's default
#   semi-spaces (16 MiB) grow the RSS by tens of MiB for no gain here;
# - JavaScript stops at the baseline compiler (--max-opt=1: Sparkplug, no Maglev or TurboFan), and WebAssembly
#   at Liftoff: the optimizing compile of undici's HTTP parser (llhttp) alone took a 15 MiB compile zone;
# - --optimize-for-size: a slower-growing heap.
# V8 takes these on the command line only (NODE_OPTIONS refuses --max-opt and --optimize-for-size).
ENTRYPOINT ["/usr/bin/tini", "--", "node", "--max-semi-space-size=1", "--max-opt=1", "--liftoff-only", "--optimize-for-size", "/opt/knative-fleet/app/dist/cli.js"]
CMD ["run"]
