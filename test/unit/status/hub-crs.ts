import type { Condition } from "../../../src/api/knative.ts";
import {
  SOURCE_COMMIT_ANNOTATION,
  SOURCE_PATH_ANNOTATION,
  SOURCE_REPOSITORY_ANNOTATION,
} from "../../../src/api/labels.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { StatusSync } from "../../../src/status/summary.ts";

// Hub CRs and sync results as the status files and the commit statuses read them.

export const COMMIT = "0123456789abcdef0123456789abcdef01234567";
export const OLDER = "fedcba9876543210fedcba9876543210fedcba98";

export interface CrOptions {
  kind?: string;
  cluster?: string;
  conditions?: Condition[];
  version?: string;
  generation?: number;
  observedGeneration?: number;
  commit?: string;
  mirrored?: boolean;
}

export function hubCr(name: string, options: CrOptions = {}): KubeObject {
  const generation = options.generation ?? 1;
  return {
    apiVersion: "operator.knative.dev/v1beta1",
    kind: options.kind ?? "KnativeServing",
    metadata: {
      name,
      namespace: "knative-fleet",
      generation,
      uid: `uid-${name}`,
      labels: options.mirrored === false ? {} : { "app.kubernetes.io/managed-by": "knative-fleet" },
      annotations: {
        [SOURCE_REPOSITORY_ANNOTATION]: "https://git.example/fleet.git",
        [SOURCE_PATH_ANNOTATION]: `clusters/${name}.yaml`,
        [SOURCE_COMMIT_ANNOTATION]: options.commit ?? COMMIT,
      },
    },
    spec: options.cluster ? { clusterProfileRef: { namespace: "fleet-system", name: options.cluster } } : {},
    status: {
      observedGeneration: options.observedGeneration ?? generation,
      ...(options.version ? { version: options.version } : {}),
      conditions: options.conditions ?? [],
    },
  };
}

export const ready: Condition[] = [
  { type: "DeploymentsAvailable", status: "True" },
  { type: "Ready", status: "True" },
];

export function mirrorResult(overrides: Partial<StatusSync> = {}): StatusSync {
  return {
    source: { repository: "https://git.example/fleet.git", branch: "main", commit: COMMIT },
    resources: [],
    prune: { state: "none", candidates: [], retained: [] },
    diagnostics: [],
    failedFiles: [],
    ...overrides,
  };
}

/** The rollout's halt on c1's Serving in the canary wave, for `reason`. */
export const haltOnC1 = (reason: string) => ({
  wave: "canary",
  waveIndex: 0,
  resource: "KnativeServing knative-fleet/c1-serving",
  cluster: "fleet-system/c1",
  hash: "ab",
  commit: COMMIT,
  reason,
  at: "2026-11-28T00:00:00Z",
});
