import { type Dispatcher, request } from "undici";
import { isRecord } from "../kube/object.ts";
import { type Sample, sampleValue } from "./threshold.ts";

// One Prometheus instant query (GET /api/v1/query, the HTTP API's v1): a vector or a scalar comes back as
// samples; a matrix or a string, an error status, a body that is not the API's JSON, a timeout or a refused
// connection is a failure with a reason. The bearer token goes in the Authorization header and nowhere else
// (no detail, no log line names it).

/** Bigger answers are refused: a gate's query is meant to return a few series, not a dump of the TSDB. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

interface PrometheusQuery {
  /** Prometheus' base URL; `/api/v1/query` is appended (a path prefix such as /prometheus is kept). */
  url: string;
  query: string;
  timeoutMs: number;
  bearerToken?: string | undefined;
  signal?: AbortSignal | undefined;
  dispatcher?: Dispatcher | undefined;
}

type QueryResult = { ok: true; samples: Sample[] } | { ok: false; reason: string };

/** The query endpoint under `base`. */
function queryEndpoint(base: string, query: string): URL {
  const endpoint = new URL("api/v1/query", base.endsWith("/") ? base : `${base}/`);
  endpoint.searchParams.set("query", query);
  return endpoint;
}

/** Runs the instant query; never throws. */
export async function queryPrometheus(q: PrometheusQuery): Promise<QueryResult> {
  const signal = q.signal
    ? AbortSignal.any([q.signal, AbortSignal.timeout(q.timeoutMs)])
    : AbortSignal.timeout(q.timeoutMs);
  let text: string;
  let status: number;
  try {
    const response = await request(queryEndpoint(q.url, q.query), {
      method: "GET",
      headers: {
        accept: "application/json",
        ...(q.bearerToken !== undefined && { authorization: `Bearer ${q.bearerToken}` }),
      },
      signal,
      ...(q.dispatcher && { dispatcher: q.dispatcher }),
    });
    status = response.statusCode;
    text = await readLimited(response.body);
  } catch (error) {
    if (signal.aborted && !q.signal?.aborted)
      return { ok: false, reason: `no answer within ${q.timeoutMs}ms` };
    return { ok: false, reason: describeError(error) };
  }
  return resultOf(status, text);
}

/** The API's answer as samples, or why it is none. */
export function resultOf(status: number, text: string): QueryResult {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { ok: false, reason: `answered ${status} with a body that is not JSON: ${excerpt(text)}` };
  }
  if (!isRecord(body) || body.status !== "success" || status < 200 || status > 299) {
    const error = isRecord(body) && typeof body.error === "string" ? body.error : excerpt(text);
    const type = isRecord(body) && typeof body.errorType === "string" ? `${body.errorType}: ` : "";
    return { ok: false, reason: `answered ${status}: ${type}${error}` };
  }
  const data = isRecord(body.data) ? body.data : {};
  if (data.resultType === "scalar") {
    const value = pointValue(data.result);
    return value === undefined ? malformed() : { ok: true, samples: [{ labels: {}, value }] };
  }
  if (data.resultType !== "vector") {
    return {
      ok: false,
      reason: `the query returns a ${String(data.resultType)}; a gate needs a vector or a scalar`,
    };
  }
  if (!Array.isArray(data.result)) return malformed();
  const samples: Sample[] = [];
  for (const series of data.result) {
    const value = isRecord(series) ? pointValue(series.value) : undefined;
    if (value === undefined || !isRecord(series)) return malformed();
    const metric = isRecord(series.metric) ? series.metric : {};
    const labels = Object.fromEntries(Object.entries(metric).filter(([, v]) => typeof v === "string"));
    samples.push({ labels: labels as Record<string, string>, value });
  }
  return { ok: true, samples };
}

const malformed = (): QueryResult => ({
  ok: false,
  reason: "answered a result that is not Prometheus' format",
});

/** `[ <time>, "<value>" ]` */
function pointValue(point: unknown): number | undefined {
  if (!Array.isArray(point) || point.length !== 2 || typeof point[1] !== "string") return undefined;
  return sampleValue(point[1]);
}

const excerpt = (text: string): string => {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line || "(empty)";
};

/** A body up to MAX_BODY_BYTES, as text; more is an error. */
export async function readLimited(body: AsyncIterable<Buffer>, limit = MAX_BODY_BYTES): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) throw new Error(`the answer is larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** An error's message with its cause's code (ECONNREFUSED …), the way undici nests it. */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? error.cause : undefined;
  const code = (cause as { code?: unknown } | undefined)?.code ?? (error as { code?: unknown }).code;
  const message = cause?.message ?? error.message;
  return typeof code === "string" && !message.includes(code) ? `${code}: ${message}` : message;
}
