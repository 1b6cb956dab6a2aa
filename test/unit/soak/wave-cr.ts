import type { WaveCr } from "../../soak/checks.ts";

/** A CR as the wave check sees it: in the last wave, changed and unhealthy since 1 s, unless told otherwise. */
export const waveCr = (key: string, more: Partial<WaveCr> = {}): WaveCr => ({
  key,
  wave: "remaining",
  hash: "new",
  baseline: "old",
  healthy: false,
  member: true,
  unhealthySince: 1_000,
  changedAt: 1_000,
  ...more,
});
