import type { Dispatcher } from "undici";
import { durationMs } from "../fleet/duration.ts";
import { clusterKey } from "../fleet/identity.ts";
import type { RolloutGate } from "../fleet/rollout-schema.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import { probeHttp } from "./http-probe.ts";
import { queryPrometheus } from "./prometheus.ts";
import { renderQuery, renderUrl } from "./template.ts";
import { judge, wanted } from "./threshold.ts";

// The verify stage's one entry: a policy's gates evaluated for one cluster, each to a result that says
// what was checked (the rendered query or URL), what came back and what was wanted, with its cost (requests
// made, time spent). Gates run side by side; none throws: a gate that cannot run (a placeholder the cluster
// has no value for, no Prometheus URL, a token that cannot be read) fails, with the reason.

export interface GateResult {
  gate: string;
  /** The cluster, `namespace/name` (clusterKey). */
  cluster: string;
  passed: boolean;
  /** `gate error-rate: sum(rate(…{cluster="spoke-1"}…)) = 0.31, wanted < 0.05` */
  detail: string;
  /** HTTP requests made (Prometheus queries, probes). */
  requests: number;
  durationMs: number;
}

/** A Secret key a Prometheus gate reads its bearer token from (in knative-fleet's namespace). */
export interface SecretKeyRef {
  name: string;
  key: string;
}

export interface GateOptions {
  /** Only the gates for this wave (a gate without `waves` is for every wave); all gates when absent. */
  wave?: string;
  /** The service config's Prometheus URL, for a prometheus gate without its own `url`. */
  prometheusUrl?: string;
  /** Reads a bearer token; needed by a gate with `bearerTokenSecretRef`. */
  readSecret?: (ref: SecretKeyRef) => Promise<string>;
  /** Cancels every gate still running (each then fails). */
  signal?: AbortSignal;
  /** undici dispatcher for every request (proxy, CA); the global one when absent. */
  dispatcher?: Dispatcher;
}

/** Whether a gate checks the clusters of `wave` (every gate when no wave is given). */
export const checksWave = (gate: RolloutGate, wave: string | undefined): boolean =>
  wave === undefined || gate.waves === undefined || gate.waves.includes(wave);

/** Evaluates the gates that apply to `options.wave` for `cluster`, in the policy's order; never rejects. */
export async function evaluateGates(
  gates: readonly RolloutGate[],
  cluster: InventoryCluster,
  options: GateOptions = {},
): Promise<GateResult[]> {
  return Promise.all(
    gates
      .filter((gate) => checksWave(gate, options.wave))
      .map((gate) => evaluateGate(gate, cluster, options)),
  );
}

type Evaluation = Pick<GateResult, "passed" | "requests"> & { what: string };

async function evaluateGate(
  gate: RolloutGate,
  cluster: InventoryCluster,
  options: GateOptions,
): Promise<GateResult> {
  const started = performance.now();
  let evaluation: Evaluation;
  try {
    evaluation = gate.prometheus
      ? await prometheusGate(gate.prometheus, cluster, options)
      : await httpGate(gate.http!, cluster, options);
  } catch (error) {
    // Nothing above throws by design; a bug must still fail the gate, never pass it or stop the others.
    evaluation = { passed: false, requests: 0, what: `could not be evaluated: ${String(error)}` };
  }
  return {
    gate: gate.name,
    cluster: clusterKey(cluster),
    passed: evaluation.passed,
    detail: `gate ${gate.name}: ${evaluation.what}`,
    requests: evaluation.requests,
    durationMs: Math.round(performance.now() - started),
  };
}

type PrometheusGate = NonNullable<RolloutGate["prometheus"]>;
type HttpGate = NonNullable<RolloutGate["http"]>;

async function prometheusGate(
  gate: PrometheusGate,
  cluster: InventoryCluster,
  options: GateOptions,
): Promise<Evaluation> {
  const rendered = renderQuery(gate.query, cluster);
  if ("problem" in rendered) return failed(`${gate.query}: ${rendered.problem}`);
  const query = rendered.text;
  const url = gate.url ?? options.prometheusUrl;
  if (url === undefined) {
    return failed(`${query}: no Prometheus URL (the gate's url, or the service config's Prometheus URL)`);
  }
  let bearerToken: string | undefined;
  if (gate.bearerTokenSecretRef) {
    const ref = gate.bearerTokenSecretRef;
    try {
      if (!options.readSecret) throw new Error("no Secret reader was given");
      bearerToken = await options.readSecret(ref);
    } catch (error) {
      return failed(
        `${query}: cannot read the bearer token (Secret ${ref.name}, key ${ref.key}): ${message(error)}`,
      );
    }
  }
  const result = await queryPrometheus({
    url,
    query,
    timeoutMs: durationMs(gate.timeout)!,
    bearerToken,
    signal: options.signal,
    dispatcher: options.dispatcher,
  });
  if (!result.ok)
    return { passed: false, requests: 1, what: `${query}: Prometheus at ${url} ${result.reason}` };
  const verdict = judge(result.samples, gate.threshold);
  const noData = verdict.passed === undefined;
  const passed = noData ? gate.onNoData === "Pass" : verdict.passed!;
  const onNoData = noData ? ` (onNoData: ${gate.onNoData})` : "";
  return {
    passed,
    requests: 1,
    what: `${query} = ${verdict.observed}, wanted ${wanted(gate.threshold)}${onNoData}`,
  };
}

async function httpGate(
  gate: HttpGate,
  cluster: InventoryCluster,
  options: GateOptions,
): Promise<Evaluation> {
  const rendered = renderUrl(gate.url, cluster);
  if ("problem" in rendered) return failed(`GET ${gate.url}: ${rendered.problem}`);
  const outcome = await probeHttp(
    {
      url: rendered.text,
      expectStatus: typeof gate.expectStatus === "number" ? [gate.expectStatus] : gate.expectStatus,
      maxLatencyMs: durationMs(gate.maxLatency)!,
      successes: gate.successes,
      intervalMs: durationMs(gate.interval)!,
      timeoutMs: durationMs(gate.timeout)!,
    },
    { signal: options.signal, dispatcher: options.dispatcher },
  );
  return {
    passed: outcome.passed,
    requests: outcome.requests,
    what: `GET ${rendered.text}: ${outcome.detail}`,
  };
}

const failed = (what: string): Evaluation => ({ passed: false, requests: 0, what });
const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));
