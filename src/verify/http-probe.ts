import { setTimeout as sleep } from "node:timers/promises";
import { type Dispatcher, request } from "undici";
import { formatDuration } from "../fleet/duration.ts";
import { describeError } from "./prometheus.ts";

// HTTP probes of one URL: `successes` GETs in a row, each answering one of the expected statuses within
// `maxLatency` (the body read too), `interval` apart, all within `timeoutMs`. The first probe that fails
// ends it: a gate passes on a streak, and a failure in the middle of one is a failure, not a restart.
// Redirects are not followed (a 3xx is a status like any other); a body is read up to 1 MiB, then dropped.

const MAX_BODY_BYTES = 1024 * 1024;

interface HttpProbeSpec {
  url: string;
  expectStatus: readonly number[];
  maxLatencyMs: number;
  successes: number;
  intervalMs: number;
  timeoutMs: number;
}

interface ProbeOutcome {
  passed: boolean;
  /** What happened, without the URL: "3 in a row answered 200 within 2s (slowest 4ms)". */
  detail: string;
  requests: number;
}

type Probe = { ok: true; status: number; ms: number } | { ok: false; why: string };

/** Runs the probes; never throws. `signal` cuts it short (a failure). */
export async function probeHttp(
  spec: HttpProbeSpec,
  options: { signal?: AbortSignal | undefined; dispatcher?: Dispatcher | undefined } = {},
): Promise<ProbeOutcome> {
  const deadline = AbortSignal.timeout(spec.timeoutMs);
  const overall = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
  const of = (n: number) => `probe ${n} of ${spec.successes}`;
  /** Why the probes stopped early, `succeeded` of them passed. */
  const cut = (succeeded: number) =>
    options.signal?.aborted
      ? "stopped: the evaluation was cancelled"
      : `the ${formatDuration(spec.timeoutMs)} deadline passed after ${succeeded} of ${spec.successes} probes succeeded`;
  let requests = 0;
  let slowest = 0;
  for (let n = 1; n <= spec.successes; n++) {
    if (n > 1) {
      try {
        await sleep(spec.intervalMs, undefined, { signal: overall });
      } catch {
        return { passed: false, detail: cut(n - 1), requests };
      }
    }
    requests++;
    const probe = await probeOnce(spec, overall, options.dispatcher);
    if (!probe.ok) {
      const detail = overall.aborted ? cut(n - 1) : `${of(n)} ${probe.why}`;
      return { passed: false, detail, requests };
    }
    if (!spec.expectStatus.includes(probe.status)) {
      return {
        passed: false,
        detail: `${of(n)} answered ${probe.status}, wanted ${statuses(spec)}`,
        requests,
      };
    }
    slowest = Math.max(slowest, probe.ms);
  }
  return {
    passed: true,
    detail:
      `${spec.successes} in a row answered ${statuses(spec)} within ${formatDuration(spec.maxLatencyMs)} ` +
      `(slowest ${Math.round(slowest)}ms)`,
    requests,
  };
}

const statuses = (spec: HttpProbeSpec): string => spec.expectStatus.join(" or ");

/** One GET, its body read, cut at maxLatency. */
async function probeOnce(spec: HttpProbeSpec, overall: AbortSignal, dispatcher?: Dispatcher): Promise<Probe> {
  const latency = AbortSignal.timeout(spec.maxLatencyMs);
  const started = performance.now();
  try {
    const response = await request(spec.url, {
      method: "GET",
      signal: AbortSignal.any([overall, latency]),
      ...(dispatcher && { dispatcher }),
    });
    let size = 0;
    for await (const chunk of response.body) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        response.body.destroy();
        break;
      }
    }
    const ms = performance.now() - started;
    if (ms > spec.maxLatencyMs) return { ok: false, why: tooSlow(spec) };
    return { ok: true, status: response.statusCode, ms };
  } catch (error) {
    if (latency.aborted && !overall.aborted) return { ok: false, why: tooSlow(spec) };
    return { ok: false, why: `failed: ${describeError(error)}` };
  }
}

const tooSlow = (spec: HttpProbeSpec): string => `took longer than ${formatDuration(spec.maxLatencyMs)}`;
