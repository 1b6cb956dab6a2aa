// Times the fleet model over a generated fleet: `node --expose-gc scripts/bench-parse.ts [files]`
// (default 1000). Each file holds one realistic CR (config maps, registry, workload overrides), half
// Serving, half Eventing, each on its own cluster. Prints the median of several runs and the heap the
// resulting model keeps (exact with --expose-gc, which collects garbage before each heap reading).
import { buildFleetModel, type FleetFile } from "../src/fleet/model.ts";
import { DEFAULT_NAMESPACE } from "../src/fleet/parse.ts";

const fileCount = Number(process.argv[2] ?? 1000);
const RUNS = 5;

function fleetFile(i: number): FleetFile {
  const cluster = `spoke-${i}`;
  const serving = i % 2 === 0;
  const kind = serving ? "KnativeServing" : "KnativeEventing";
  const component = serving ? "serving" : "eventing";
  const ingress = serving ? "  ingress:\n    kourier:\n      enabled: true\n" : "";
  const text = `apiVersion: operator.knative.dev/v1beta1
kind: ${kind}
metadata:
  name: ${cluster}-${component}
  namespace: knative-fleet
  labels:
    fleet.knative.dev/region: eu-${i % 7}
spec:
  version: "1.21"
  clusterProfileRef:
    name: ${cluster}
    namespace: fleet-system
${ingress}  registry:
    default: registry.example.com/knative/\${NAME}:v1.21
    imagePullSecrets:
      - name: registry-credentials
  config:
    features:
      kubernetes.podspec-affinity: enabled
      kubernetes.podspec-tolerations: enabled
    autoscaler:
      enable-scale-to-zero: "true"
      scale-to-zero-grace-period: 30s
  workloads:
    - name: controller
      replicas: 2
      resources:
        - container: controller
          requests: {cpu: 100m, memory: 128Mi}
          limits: {cpu: "1", memory: 512Mi}
  high-availability:
    replicas: 2
`;
  return { path: `clusters/${cluster}/knative-${component}.yaml`, text };
}

const files = Array.from({ length: fileCount }, (_, i) => fleetFile(i));
const bytes = files.reduce((sum, file) => sum + Buffer.byteLength(file.text), 0);

const collectGarbage = (globalThis as { gc?: () => void }).gc ?? (() => {});
collectGarbage();
const heapBefore = process.memoryUsage().heapUsed;
let model = buildFleetModel(files, { defaultNamespace: DEFAULT_NAMESPACE }); // warm-up: JIT, zod caches
const timings: number[] = [];
for (let run = 0; run < RUNS; run++) {
  const start = performance.now();
  model = buildFleetModel(files, { defaultNamespace: DEFAULT_NAMESPACE });
  timings.push(performance.now() - start);
}
collectGarbage();
const heapAfter = process.memoryUsage().heapUsed;
if (model.diagnostics.length > 0 || model.resources.length !== fileCount) {
  throw new Error(`the generated fleet should be valid: ${model.diagnostics.length} errors`);
}

const median = timings.sort((a, b) => a - b)[Math.floor(RUNS / 2)]!;
const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
console.log(`${fileCount} files (${mib(bytes)} of YAML), ${model.resources.length} resources`);
console.log(
  `parse+validate: median ${median.toFixed(0)} ms over ${RUNS} runs (${((median / fileCount) * 1000).toFixed(0)} µs per file)`,
);
console.log(`heap: ${mib(heapAfter - heapBefore)} kept by the model, ${mib(heapAfter)} used in all`);
