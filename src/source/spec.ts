import { z } from "zod";
import { DEFAULT_FILE_SELECTION } from "../fleet/select.ts";

/** Where a secret lives: a file (a mounted Kubernetes Secret, re-read on every use) or an env variable. */
/** A shallow fleet checkout is kilobytes; this leaves room for documentation and tooling beside it. */
export const DEFAULT_MAX_FETCH_BYTES = 32 * 1024 * 1024;

const secretRefSchema = z.union([
  z.strictObject({ file: z.string().min(1) }),
  z.strictObject({ env: z.string().min(1) }),
]);

/**
 * Git credentials. For GitHub and GitLab tokens use `basic` with the token as the password
 * (any username for GitHub, `oauth2` for GitLab); `bearer` sends `Authorization: Bearer <token>`.
 */
const gitAuthSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("basic"), username: z.string().min(1), password: secretRefSchema }),
  z.strictObject({ type: z.literal("bearer"), token: secretRefSchema }),
]);

export const gitSourceSpecSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/ }),
  branch: z.string().min(1).default("main"),
  /** The glob of the files that make up the fleet (`{a,b}` alternates). */
  pathGlob: z.string().min(1).default(DEFAULT_FILE_SELECTION.pathGlob),
  /** The folder the status write-back owns; its files are never fleet content. */
  statusDir: z.string().default(DEFAULT_FILE_SELECTION.statusDir),
  auth: gitAuthSchema.optional(),
  /** PEM bundle of the CAs that may sign the server's certificate (instead of the system's). */
  caFile: z.string().min(1).optional(),
  /** Deadline of each git operation (ls-refs, fetch, push), like Flux's `spec.timeout`. */
  timeoutMs: z.number().int().positive().default(60_000),
  /**
   * The largest pack a fetch may bring when the server cannot filter out large blobs (no
   * `uploadpack.allowFilter`): the fetch fails with a clear error past it, instead of growing the process
   * by several times the pack.
   */
  maxFetchBytes: z.number().int().positive().default(DEFAULT_MAX_FETCH_BYTES),
});

export type SecretRef = z.infer<typeof secretRefSchema>;
export type GitAuth = z.infer<typeof gitAuthSchema>;
export type GitSourceSpec = z.infer<typeof gitSourceSpecSchema>;
