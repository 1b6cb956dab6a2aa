import { canonicalJson } from "../apply/compare.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { fleetFileContent } from "../fleet/file-text.ts";
import { formatIdentity, identityOf, type ResourceIdentity } from "../fleet/identity.ts";
import type { DesiredResource, FleetFile, FleetModel } from "../fleet/model.ts";
import {
  decideApplies,
  decidePrune,
  type MirrorOptions,
  MirrorOptionsSchema,
  type MirrorSource,
  type PruneReport,
} from "../mirror/decide.ts";

// What a change does to the fleet's CRs, from the fleet models of base and head alone: which files
// changed, which CRs are created, updated, deleted or blocked, and what the mirror's prune would do.

export interface ChangedFile {
  path: string;
  change: "added" | "modified" | "removed";
}

/** Fleet files whose text differs between base and head, by path. */
export function changedFiles(base: readonly FleetFile[], head: readonly FleetFile[]): ChangedFile[] {
  const before = new Map(base.map((file) => [file.path, fleetFileContent(file)]));
  const after = new Map(head.map((file) => [file.path, fleetFileContent(file)]));
  return [...new Set([...before.keys(), ...after.keys()])]
    .sort(compareStrings)
    .flatMap((path): ChangedFile[] => {
      const [was, will] = [before.get(path), after.get(path)];
      if (was === will) return [];
      return [{ path, change: was === undefined ? "added" : will === undefined ? "removed" : "modified" }];
    });
}

/**
 * `blocked`: head declares the CR in a file with errors, so the mirror leaves its hub CR (and cluster) at
 * the last good state.
 */
export type ResourceAction = "create" | "update" | "delete" | "blocked";

/** A CR whose desired state differs between base and head. */
export interface ResourceChange {
  identity: ResourceIdentity;
  action: ResourceAction;
  /** The CR as base declares it; absent when base declares it nowhere, or only in a file with errors. */
  base?: DesiredResource;
  /** The CR as head declares it; present for create and update. */
  head?: DesiredResource;
  /** The fleet file declaring it: head's, else base's. */
  path: string;
}

/**
 * The CRs a change touches, by identity, so a CR that moves to another file unchanged is no change. A CR
 * counts as touched when its content, or its file's validity, differs: an edit elsewhere that makes the
 * CR a duplicate blocks it although its own file is unchanged.
 */
export function resourceChanges(base: FleetModel, head: FleetModel): ResourceChange[] {
  const [baseValid, headValid] = [validByIdentity(base), validByIdentity(head)];
  const [baseFailed, headFailed] = [failedByIdentity(base), failedByIdentity(head)];
  const keys = new Set([
    ...baseValid.keys(),
    ...headValid.keys(),
    ...baseFailed.keys(),
    ...headFailed.keys(),
  ]);
  return [...keys].sort(compareStrings).flatMap((key): ResourceChange[] => {
    const [before, after, blocked] = [baseValid.get(key), headValid.get(key), headFailed.get(key)];
    const base = before ? { base: before } : {};
    if (blocked) return [{ identity: blocked.identity, action: "blocked", path: blocked.path, ...base }];
    if (after) {
      if (before && canonicalJson(before.resource) === canonicalJson(after.resource)) return [];
      const action = before || baseFailed.has(key) ? "update" : "create";
      return [{ identity: identityOf(after.resource), action, head: after, path: after.path, ...base }];
    }
    const removed = before
      ? { identity: identityOf(before.resource), path: before.path }
      : baseFailed.get(key)!;
    return [{ ...removed, action: "delete", ...base }];
  });
}

/**
 * What the mirror's prune would do once head is merged, behind its safeguards (mirror/decide.ts
 * `decidePrune`, default options): the hub is taken to hold base's CRs, mirrored from this repository.
 */
export function assessPrune(
  base: FleetModel,
  head: FleetModel,
  source: MirrorSource,
  options: MirrorOptions = MirrorOptionsSchema.parse({}),
): PruneReport {
  const hub = decideApplies(base.resources, source, []).flatMap((step) =>
    step.action === "create" ? [step.object] : [],
  );
  return decidePrune(
    {
      model: head,
      source,
      options,
      // Where a confirmation would be given; the plan reports only the token.
      namespace: "",
    },
    hub,
    { applyFailures: 0, confirmedToken: undefined },
  );
}

function validByIdentity(model: FleetModel): Map<string, DesiredResource> {
  return new Map(
    model.resources.map((resource) => [formatIdentity(identityOf(resource.resource)), resource]),
  );
}

function failedByIdentity(model: FleetModel): Map<string, { identity: ResourceIdentity; path: string }> {
  return new Map(
    model.files
      .filter((file) => file.status === "failed")
      .flatMap((file) =>
        file.declares.map((identity) => [formatIdentity(identity), { identity, path: file.path }]),
      ),
  );
}
