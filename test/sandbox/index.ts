import { readSandbox, type Sandbox } from "./sandbox.ts";

export type { Sandbox, SandboxCluster } from "./sandbox.ts";
export {
  CLUSTER_PROFILE_NAMESPACE,
  clusterProfileStatus,
  putClusterProfile,
  resumeApiserver,
  stopApiserver,
} from "./sandbox.ts";

/** Env var naming the state dir of the running sandbox (set by the vitest global setup). */
export const SANDBOX_ENV = "KNATIVE_FLEET_SANDBOX";

/** The sandbox the integration tests share; the vitest global setup starts it once. */
export function loadSandbox(): Sandbox {
  const stateDir = process.env[SANDBOX_ENV];
  if (!stateDir) {
    throw new Error(`${SANDBOX_ENV} is not set: run integration tests through vitest's integration project`);
  }
  const sandbox = readSandbox(stateDir);
  if (!sandbox)
    throw new Error(`no sandbox in ${stateDir} (${SANDBOX_ENV}); start one with 'npm run sandbox -- up'`);
  return sandbox;
}
