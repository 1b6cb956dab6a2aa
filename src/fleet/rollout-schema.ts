import { z } from "zod";
import {
  ClusterRefSchema,
  Dns1123LabelSchema,
  Dns1123SubdomainSchema,
  FleetMetadataSchema,
} from "./document-schema.ts";
import { durationMs } from "./duration.ts";
import { httpUrlProblem, promqlTemplateProblem, urlTemplateProblem } from "./gate-template.ts";
import { ClusterSelectorTermSchema, MAX_LISTED_CLUSTERS, MAX_TERMS } from "./placement-schema.ts";

// The rollout policy format (docs/rollout.md): ordered waves of clusters (a canary first), how many clusters
// of a wave change at once, a soak after a wave is healthy, a time limit per wave, the windows waves may open
// in, what a failure does, pause and the emergency "all at once". Its shape follows KubeFleet's staged
// update strategy (ordered stages by label selector, a wait after each) and Rancher Fleet's rollout strategy
// (maxUnavailable as a count or a percentage); the cluster selection is the placement format's.

export const ROLLOUT_API_VERSION = "fleet.knative.dev/v1alpha1";
export const ROLLOUT_KIND = "KnativeRollout";
/** A wave's approval in Git (approval-document.ts). */
export const APPROVAL_KIND = "KnativeRolloutApproval";

const MAX_WAVES = 20;
const MAX_WINDOWS = 32;
const MAX_GATES = 16;
const MAX_STATUSES = 16;
const MAX_SUCCESSES = 100;
const MAX_QUERY_LENGTH = 4096;
const MAX_URL_LENGTH = 2048;

const DurationSchema = z
  .string()
  .refine((text) => durationMs(text) !== undefined, {
    error: "must be a duration such as 30s, 10m or 1h30m",
  })
  .meta({ format: "duration" });

/** A count of clusters (at least 1) or a percentage of the wave ("25%", rounded down, at least 1). */
const MAX_UNAVAILABLE_ERROR = "must be a count of clusters (1 or more) or a percentage from 1% to 100%";
const MaxUnavailableSchema = z.union(
  [
    z.number().int().min(1, { error: MAX_UNAVAILABLE_ERROR }),
    z.string().regex(/^([1-9][0-9]?|100)%$/, { error: MAX_UNAVAILABLE_ERROR }),
  ],
  { error: MAX_UNAVAILABLE_ERROR },
);
export type MaxUnavailable = z.infer<typeof MaxUnavailableSchema>;

export const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"] as const;
export type Weekday = (typeof WEEKDAYS)[number];

const TIME_OF_DAY = /^([01][0-9]|2[0-3]):[0-5][0-9]$/;

export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

const TimeZoneSchema = z
  .string()
  .refine(isTimeZone, { error: "must be UTC or an IANA time zone such as Europe/Berlin" });

const windowFields = {
  days: z
    .array(z.enum(WEEKDAYS, { error: `must be one of ${WEEKDAYS.join(", ")}` }))
    .min(1)
    .max(7)
    .optional()
    .describe("The days the window starts on; every day when absent."),
  start: z.string().regex(TIME_OF_DAY, { error: 'must be a time of day "HH:MM" (00:00 to 23:59)' }),
  end: z
    .string()
    .regex(TIME_OF_DAY, { error: 'must be a time of day "HH:MM" (00:00 to 23:59)' })
    .describe("Earlier than start: the window runs past midnight into the next day."),
};

const notEmpty = {
  path: ["end"],
  error: "a window must not end when it starts; 00:00 to 23:59 is almost the whole day",
};

const WindowSchema = z
  .strictObject({ ...windowFields, timeZone: TimeZoneSchema.default("UTC") })
  .refine((window) => window.start !== window.end, notEmpty);
export type RolloutWindow = z.infer<typeof WindowSchema>;

/** A cluster's window: without a time zone of its own, it is read in the cluster's (its property) or UTC. */
const ClusterWindowSchema = z
  .strictObject({ ...windowFields, timeZone: TimeZoneSchema.optional() })
  .refine((window) => window.start !== window.end, notEmpty);

const PROPERTY_NAME = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/**
 * Maintenance windows of the clusters a selection picks (by name, or by their ClusterProfile's labels and
 * properties): such a cluster takes new content only inside one of them, whatever wave is open.
 */
const ClusterWindowsSchema = z
  .strictObject({
    name: Dns1123LabelSchema,
    clusterProfiles: z.array(ClusterRefSchema).min(1).max(MAX_LISTED_CLUSTERS).optional(),
    clusterSelectorTerms: z.array(ClusterSelectorTermSchema).min(1).max(MAX_TERMS).optional(),
    windows: z.array(ClusterWindowSchema).min(1).max(MAX_WINDOWS),
    timeZoneProperty: z
      .string()
      .max(316)
      .regex(PROPERTY_NAME, { error: "must be a ClusterProfile property name such as example.com/time-zone" })
      .optional()
      .describe(
        "A ClusterProfile status property holding the cluster's IANA time zone: windows without a timeZone are read in it (UTC when the cluster has no such property).",
      ),
  })
  .refine((entry) => entry.clusterProfiles !== undefined || entry.clusterSelectorTerms !== undefined, {
    error: "clusterWindows need clusterProfiles or clusterSelectorTerms (a cluster either matches)",
  });

const APPROVALS = ["None", "Required"] as const;

/** What a wave may override of the policy's defaults. */
const WaveTimingSchema = {
  maxUnavailable: MaxUnavailableSchema.optional(),
  soak: DurationSchema.optional(),
  timeLimit: DurationSchema.optional(),
};

const WaveSchema = z
  .strictObject({
    name: Dns1123LabelSchema,
    clusterProfiles: z.array(ClusterRefSchema).min(1).max(MAX_LISTED_CLUSTERS).optional(),
    clusterSelectorTerms: z.array(ClusterSelectorTermSchema).min(1).max(MAX_TERMS).optional(),
    ...WaveTimingSchema,
    approval: z
      .enum(APPROVALS, { error: `must be ${APPROVALS.join(" or ")}` })
      .default("None")
      .describe(
        "Required: the wave opens only once the tracked branch holds a KnativeRolloutApproval for the rollout's commit and this wave (docs/approvals.md).",
      ),
  })
  .refine((wave) => wave.clusterProfiles !== undefined || wave.clusterSelectorTerms !== undefined, {
    error: "a wave needs clusterProfiles or clusterSelectorTerms (a cluster either matches)",
  });
export type RolloutWave = z.infer<typeof WaveSchema>;

/** A string a refinement checks, its problem reported at the field (file:line). */
const checkedString = (max: number, problemOf: (text: string) => string | undefined) =>
  z
    .string()
    .min(1)
    .max(max)
    .superRefine((text, ctx) => {
      const problem = problemOf(text);
      if (problem) ctx.addIssue({ code: "custom", input: text, message: problem });
    });

export const THRESHOLD_OPS = ["<", "<=", ">", ">=", "==", "!="] as const;
export type ThresholdOp = (typeof THRESHOLD_OPS)[number];

const SecretKeyRefSchema = z
  .strictObject({
    name: Dns1123SubdomainSchema.describe("A Secret in knative-fleet's own namespace on the hub."),
    key: z
      .string()
      .max(253)
      .regex(/^[-._a-zA-Z0-9]+$/, { error: "must be a Secret data key: letters, digits, '-', '_' and '.'" }),
  })
  .describe("The Secret key holding the bearer token sent to Prometheus.");

const PrometheusGateSchema = z
  .strictObject({
    url: checkedString(MAX_URL_LENGTH, httpUrlProblem)
      .optional()
      .describe("Prometheus' base URL (without /api/v1); the service config's Prometheus URL when absent."),
    query: checkedString(MAX_QUERY_LENGTH, promqlTemplateProblem).describe(
      'An instant PromQL query; placeholders such as cluster="{{ .cluster.name }}" go inside string literals.',
    ),
    threshold: z
      .strictObject({
        op: z.enum(THRESHOLD_OPS, { error: `must be one of ${THRESHOLD_OPS.join(" ")}` }),
        // z.number() refuses YAML's .inf with "expected number, got number"; this says why.
        value: z.custom<number>((v) => typeof v === "number" && Number.isFinite(v), {
          error: "must be a finite number",
        }),
      })
      .describe("The gate passes when every value of the result compares true: `value op threshold`."),
    onNoData: z
      .enum(["Fail", "Pass"], { error: "must be Fail or Pass" })
      .default("Fail")
      .describe("An empty result, or NaN, fails the gate unless Pass."),
    bearerTokenSecretRef: SecretKeyRefSchema.optional(),
    timeout: DurationSchema.default("10s").describe("How long the query may take."),
  })
  .describe("A Prometheus instant query compared with a threshold.");

const STATUS_ERROR = "must be an HTTP status code (100-599)";
const StatusCodeSchema = z
  .number({ error: STATUS_ERROR })
  .int({ error: STATUS_ERROR })
  .min(100, { error: STATUS_ERROR })
  .max(599, { error: STATUS_ERROR });

const HttpGateSchema = z
  .strictObject({
    url: checkedString(MAX_URL_LENGTH, urlTemplateProblem).describe(
      "The http or https URL to GET; placeholder values are percent-encoded.",
    ),
    expectStatus: z
      .union([StatusCodeSchema, z.array(StatusCodeSchema).min(1).max(MAX_STATUSES)], {
        error: "must be an HTTP status code (100-599) or a list of them",
      })
      .default(200)
      .describe("The status (or statuses) a probe must answer with; redirects are not followed."),
    maxLatency: DurationSchema.default("2s").describe("How long each probe may take, its body included."),
    successes: z
      .number()
      .int()
      .min(1)
      .max(MAX_SUCCESSES)
      .default(3)
      .describe("How many probes in a row must succeed; the first failure fails the gate."),
    interval: DurationSchema.default("1s").describe("The wait between two probes."),
    timeout: DurationSchema.default("30s").describe("The deadline for all the probes together."),
  })
  .refine(
    (http) => {
      const [interval, maxLatency, timeout] = [http.interval, http.maxLatency, http.timeout].map(durationMs);
      // A field that is no duration has its own error already.
      if (interval === undefined || maxLatency === undefined || timeout === undefined) return true;
      return (http.successes - 1) * interval + maxLatency <= timeout;
    },
    {
      path: ["timeout"],
      error: "is too short for the probes: it must be at least (successes - 1) x interval + maxLatency",
    },
  )
  .describe("HTTP probes: successes in a row, each with an expected status within maxLatency.");

const GateSchema = z
  .strictObject({
    name: Dns1123LabelSchema,
    waves: z
      .array(z.string())
      .min(1)
      .max(MAX_WAVES + 1)
      .optional()
      .describe("The waves whose clusters the gate checks (remaining included); every wave when absent."),
    prometheus: PrometheusGateSchema.optional(),
    http: HttpGateSchema.optional(),
  })
  .refine((gate) => (gate.prometheus === undefined) !== (gate.http === undefined), {
    error: "a gate needs exactly one of prometheus or http",
  })
  .describe("A check a wave's clusters must pass before the next wave opens.");
export type RolloutGate = z.infer<typeof GateSchema>;

const ON_FAILURE = ["Halt", "HaltAndRevert"] as const;
const ON_PREFLIGHT_FAILURE = ["Wait", "HoldWave"] as const;

export const RolloutDocumentSchema = z.strictObject({
  apiVersion: z.literal(ROLLOUT_API_VERSION),
  kind: z.literal(ROLLOUT_KIND),
  metadata: FleetMetadataSchema,
  spec: z
    .strictObject({
      waves: z.array(WaveSchema).min(1).max(MAX_WAVES),
      maxUnavailable: MaxUnavailableSchema.default(1),
      soak: DurationSchema.default("5m"),
      timeLimit: DurationSchema.default("30m"),
      onFailure: z.enum(ON_FAILURE, { error: `must be ${ON_FAILURE.join(" or ")}` }).default("Halt"),
      windows: z.array(WindowSchema).min(1).max(MAX_WINDOWS).optional(),
      clusterWindows: z
        .array(ClusterWindowsSchema)
        .min(1)
        .max(MAX_WINDOWS)
        .optional()
        .describe(
          "Per-cluster maintenance windows: a cluster takes new content only inside a window of every entry that selects it.",
        ),
      paused: z.boolean().default(false),
      allAtOnce: z.boolean().default(false),
      onPreflightFailure: z
        .enum(ON_PREFLIGHT_FAILURE, { error: `must be ${ON_PREFLIGHT_FAILURE.join(" or ")}` })
        .default("Wait")
        .describe(
          "A cluster the spoke preflight finds unready for its change: Wait (it waits, its wave goes on) or HoldWave (its wave is not done until it took the change).",
        ),
      gates: z
        .array(GateSchema)
        .min(1)
        .max(MAX_GATES)
        .optional()
        .describe("Verification gates (Prometheus queries, HTTP probes) each cluster of a wave must pass."),
    })
    .superRefine((spec, ctx) => {
      const seen = new Set<string>();
      spec.waves.forEach((wave, index) => {
        if (seen.has(wave.name) || wave.name === REMAINING_WAVE) {
          ctx.addIssue({
            code: "custom",
            path: ["waves", index, "name"],
            input: wave.name,
            message:
              wave.name === REMAINING_WAVE
                ? `"${REMAINING_WAVE}" names the wave of clusters no wave selects; choose another name`
                : `wave "${wave.name}" is named twice`,
          });
        }
        seen.add(wave.name);
      });
      gateProblems(spec, ctx);
    }),
});
export type RolloutDocument = z.infer<typeof RolloutDocumentSchema>;
export type RolloutSpec = RolloutDocument["spec"];

/** The implicit last wave: the clusters no wave selects (and CRs that install on the hub itself). */
export const REMAINING_WAVE = "remaining";

/** Gates named twice, and gates naming a wave the policy does not have. */
function gateProblems(
  spec: { waves: readonly { name: string }[]; gates?: readonly RolloutGate[] | undefined },
  ctx: z.RefinementCtx,
): void {
  const waves = new Set([...spec.waves.map((w) => w.name), REMAINING_WAVE]);
  const seen = new Set<string>();
  spec.gates?.forEach((gate, index) => {
    if (seen.has(gate.name)) {
      ctx.addIssue({
        code: "custom",
        path: ["gates", index, "name"],
        input: gate.name,
        message: `gate "${gate.name}" is named twice`,
      });
    }
    seen.add(gate.name);
    gate.waves?.forEach((wave, at) => {
      if (waves.has(wave)) return;
      ctx.addIssue({
        code: "custom",
        path: ["gates", index, "waves", at],
        input: wave,
        message: `"${wave}" is no wave of this policy (${[...waves].join(", ")})`,
      });
    });
  });
}
