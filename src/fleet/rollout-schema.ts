import { z } from "zod";
import { ClusterRefSchema, Dns1123LabelSchema, FleetMetadataSchema } from "./document-schema.ts";
import { durationMs } from "./duration.ts";
import { ClusterSelectorTermSchema, MAX_LISTED_CLUSTERS, MAX_TERMS } from "./placement-schema.ts";

// The rollout policy format (docs/rollout.md): ordered waves of clusters (a canary first), how many clusters
// of a wave change at once, a soak after a wave is healthy, a time limit per wave, the windows waves may open
// in, what a failure does, pause and the emergency "all at once". Its shape follows KubeFleet's staged
// update strategy (ordered stages by label selector, a wait after each) and Rancher Fleet's rollout strategy
// (maxUnavailable as a count or a percentage); the cluster selection is the placement format's.

export const ROLLOUT_API_VERSION = "fleet.knative.dev/v1alpha1";
export const ROLLOUT_KIND = "KnativeRollout";

const MAX_WAVES = 20;
const MAX_WINDOWS = 32;

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

function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

const WindowSchema = z
  .strictObject({
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
    timeZone: z
      .string()
      .refine(isTimeZone, { error: "must be UTC or an IANA time zone such as Europe/Berlin" })
      .default("UTC"),
  })
  .refine((window) => window.start !== window.end, {
    path: ["end"],
    error: "a window must not end when it starts; 00:00 to 23:59 is almost the whole day",
  });
export type RolloutWindow = z.infer<typeof WindowSchema>;

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
  })
  .refine((wave) => wave.clusterProfiles !== undefined || wave.clusterSelectorTerms !== undefined, {
    error: "a wave needs clusterProfiles or clusterSelectorTerms (a cluster either matches)",
  });
export type RolloutWave = z.infer<typeof WaveSchema>;

const ON_FAILURE = ["Halt", "HaltAndRevert"] as const;

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
      paused: z.boolean().default(false),
      allAtOnce: z.boolean().default(false),
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
    }),
});
export type RolloutDocument = z.infer<typeof RolloutDocumentSchema>;
export type RolloutSpec = RolloutDocument["spec"];

/** The implicit last wave: the clusters no wave selects (and CRs that install on the hub itself). */
export const REMAINING_WAVE = "remaining";
