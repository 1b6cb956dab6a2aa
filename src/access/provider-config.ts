import { readFile } from "node:fs/promises";
import { z } from "zod";
import { formatFieldPath, lowercaseFirst } from "../fleet/diagnostic.ts";

/**
 * The access-provider file of sigs.k8s.io/cluster-inventory-api pkg/access (`--clusterprofile-provider-file`):
 * which exec credential plugins this reconciler may run, by the provider names ClusterProfiles publish.
 * Objects are strict: upstream's Go decoder drops unknown keys silently, so a typo such as
 * `provideClusterinfo` would quietly turn cluster info off; here it is an error naming the field.
 */

const EXEC_API_VERSIONS = [
  "client.authentication.k8s.io/v1",
  "client.authentication.k8s.io/v1beta1",
] as const;
export type ExecApiVersion = (typeof EXEC_API_VERSIONS)[number];

const EnvVarSchema = z.strictObject({ name: z.string().min(1), value: z.string() });
export type EnvVar = z.infer<typeof EnvVarSchema>;

const ExecConfigSchema = z.strictObject({
  apiVersion: z.enum(EXEC_API_VERSIONS),
  command: z.string().min(1),
  // Go marshals empty slices as null: accept it as "none".
  args: z
    .array(z.string())
    .nullish()
    .transform((args) => args ?? []),
  env: z
    .array(EnvVarSchema)
    .nullish()
    .transform((env) => env ?? []),
  provideClusterInfo: z.boolean().default(false),
  // Plugins always run without a terminal here (as upstream forces "Never"); any valid mode is accepted.
  interactiveMode: z.enum(["Never", "IfAvailable", "Always"]).optional(),
  installHint: z.string().optional(),
});

/** How a ClusterProfile's `.../exec/additional-args` extension is used (KEP 5339). */
const CliArgsPolicySchema = z.enum(["Append", "Ignore"]).default("Ignore");
/** How a ClusterProfile's `.../exec/additional-envs` extension is used (KEP 5339). */
const EnvVarsPolicySchema = z.enum(["AppendIfNotExists", "Replace", "Ignore"]).default("Ignore");

const ProviderSchema = z.strictObject({
  name: z.string().min(1),
  execConfig: ExecConfigSchema,
  profileSourcedCLIArgsPolicy: CliArgsPolicySchema,
  profileSourcedEnvVarsPolicy: EnvVarsPolicySchema,
});
export type AccessProviderConfig = z.infer<typeof ProviderSchema>;

const ProviderFileSchema = z.strictObject({ providers: z.array(ProviderSchema) }).superRefine((file, ctx) => {
  const firstIndex = new Map<string, number>();
  file.providers.forEach((provider, index) => {
    const first = firstIndex.get(provider.name);
    if (first === undefined) firstIndex.set(provider.name, index);
    else
      ctx.addIssue({
        code: "custom",
        path: ["providers", index, "name"],
        message: `duplicate provider name "${provider.name}" (first at providers[${first}])`,
      });
  });
});

/** The providers in file order: the first one a ClusterProfile offers is the one used. */
export interface ProviderConfig {
  path: string;
  providers: readonly AccessProviderConfig[];
}

/** Whether multicluster access is on: it is off without a provider file, which is not an error. */
export type ProviderConfigState = { enabled: true; config: ProviderConfig } | { enabled: false; why: string };

export class ProviderConfigError extends Error {
  override name = "ProviderConfigError";
}

/** Parses and validates the provider file's text; throws a ProviderConfigError naming the file and fields. */
export function parseProviderConfig(text: string, path: string): ProviderConfig {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ProviderConfigError(`${path}: not valid JSON: ${(err as Error).message}`);
  }
  const result = ProviderFileSchema.safeParse(json);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => {
      const field = formatFieldPath(issue.path);
      return `${field === "" ? "(top level)" : field}: ${lowercaseFirst(issue.message)}`;
    });
    throw new ProviderConfigError(`${path}: ${problems.join("; ")}`);
  }
  return { path, providers: result.data.providers };
}

/**
 * Reads the provider file. No path, or a path that does not exist, turns multicluster access off (the
 * reason says which); an unreadable or invalid file is an error, because a typo must not silently
 * disable every spoke.
 */
export async function loadProviderConfig(path: string | undefined): Promise<ProviderConfigState> {
  if (path === undefined || path === "") {
    return { enabled: false, why: "--clusterprofile-provider-file is not set" };
  }
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      return {
        enabled: false,
        why: `the access-provider file ${path} (--clusterprofile-provider-file) does not exist`,
      };
    }
    throw new ProviderConfigError(`${path}: cannot read the access-provider file: ${(err as Error).message}`);
  }
  return { enabled: true, config: parseProviderConfig(text, path) };
}
