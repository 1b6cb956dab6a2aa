import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { admitHubCr, type HubCrPolicy } from "../admission/hub-cr.ts";
import type { KnativeKind } from "../api/knative.ts";
import {
  type Diagnostic,
  type FieldPath,
  formatFieldPath,
  type SourcePosition,
} from "../fleet/diagnostic.ts";
import type { FleetFile } from "../fleet/file-text.ts";
import { formatIdentity, identityOf } from "../fleet/identity.ts";
import type { DesiredResource } from "../fleet/model.ts";
import { type DeclaredPlacement, hasPath } from "../fleet/placement-document.ts";
import { PLACEMENT_KINDS } from "../fleet/placement-schema.ts";
import { locateField, parseYamlFile, type SourceDocument } from "../fleet/yaml-source.ts";
import type { Inventory } from "../placement/inventory.ts";
import { inventoryOf, readSnapshotObjects } from "../placement/plan.ts";
import { COMPONENT_OF_KIND, type Component, type ManifestSource, resolveVersion } from "../render/index.ts";
import { UsageError } from "./command.ts";

// The checks `validate` adds to the fleet model's own, each diagnostic at the field it is about: for a CR a
// placement made, the placement's field that wrote it (an override's patch, else the template).

/** A check validate could not run, and why: said on stderr and in -o json, never silently left out. */
export interface SkippedCheck {
  check: "versions" | "settings" | "placement";
  message: string;
  file?: string;
  line?: number;
}

/** Where the fields of the model's CRs are written: a per-cluster document, or the placement that made it. */
export class FieldLocator {
  readonly #documents = new Map<string, SourceDocument[]>();
  readonly #placements = new Map<string, DeclaredPlacement>();

  readonly #files: readonly FleetFile[];

  constructor(files: readonly FleetFile[], placements: readonly DeclaredPlacement[]) {
    this.#files = files;
    for (const declared of placements) this.#placements.set(documentKey(declared), declared);
  }

  /** The placement that made `desired`, if a placement did. */
  placementOf(desired: DesiredResource): DeclaredPlacement | undefined {
    return this.#placements.get(documentKey(desired));
  }

  /** A diagnostic at `field` of `desired`'s source, or at its document's line when that cannot be read. */
  diagnostic(desired: DesiredResource, field: FieldPath, message: string): Diagnostic {
    const declared = this.placementOf(desired);
    if (declared !== undefined) {
      const written = placementField(declared, field);
      return {
        path: desired.path,
        ...locateField(declared.source, written, "key"),
        field: formatFieldPath(written),
        message,
      };
    }
    const document = this.#document(desired);
    const position: SourcePosition = document
      ? locateField(document, field, "key")
      : { line: desired.line, column: 1 };
    return { path: desired.path, ...position, field: formatFieldPath(field), message };
  }

  #document(desired: DesiredResource): SourceDocument | undefined {
    let documents = this.#documents.get(desired.path);
    if (documents === undefined) {
      const text = this.#files.find((file) => file.path === desired.path)?.text;
      documents = text === undefined ? [] : parseYamlFile(desired.path, text).documents;
      this.#documents.set(desired.path, documents);
    }
    return documents.find((document) => document.index === desired.documentIndex);
  }
}

const documentKey = (at: { path: string; documentIndex: number }) => `${at.documentIndex}:${at.path}`;

/**
 * A CR field as a placement writes it: metadata is the placement's own; a spec field is the last override
 * patch that sets it, else the template's; the cluster comes from how the placement selects.
 */
function placementField(declared: DeclaredPlacement, field: FieldPath): FieldPath {
  if (field[0] !== "spec") return field;
  const specPath = field.slice(1);
  const { spec } = declared.placement;
  if (specPath[0] === "clusterProfileRef") {
    const selectedBy = (["clusterProfiles", "clusterSelectorTerms", "placementDecisionRef"] as const).find(
      (key) => spec[key] !== undefined,
    );
    return ["spec", selectedBy ?? "clusterProfiles"];
  }
  const overrides = spec.overrides ?? [];
  for (let index = overrides.length - 1; index >= 0; index--) {
    if (hasPath(overrides[index]!.patch, specPath)) return ["spec", "overrides", index, "patch", ...specPath];
  }
  return ["spec", "template", "spec", ...specPath];
}

/** `spec.manifests[0].URL` -> `["spec", "manifests", 0, "URL"]`; an annotation's name is one key. */
function parseFieldPath(field: string): FieldPath {
  const annotations = "metadata.annotations.";
  if (field.startsWith(annotations)) return ["metadata", "annotations", field.slice(annotations.length)];
  return field
    .split(/\.|(?=\[)/)
    .map((segment) => (/^\[\d+\]$/.test(segment) ? Number(segment.slice(1, -1)) : segment));
}

/**
 * What the hub admission refuses, as the mirror decides it. A placement's CRs refused for the same field
 * and reason are one diagnostic at the placement, naming the first and how many more.
 */
export function admissionDiagnostics(
  resources: readonly DesiredResource[],
  policy: HubCrPolicy,
  locator: FieldLocator,
): Diagnostic[] {
  const refused = new Map<string, { diagnostic: Diagnostic; crs: string[] }>();
  for (const desired of resources) {
    const refusal = admitHubCr(desired.resource, policy);
    if (refusal === undefined) continue;
    const diagnostic = locator.diagnostic(desired, parseFieldPath(refusal.field), refusal.message);
    const key = JSON.stringify([
      diagnostic.path,
      diagnostic.line,
      diagnostic.column,
      diagnostic.field,
      refusal.message,
    ]);
    const entry = refused.get(key) ?? { diagnostic, crs: [] };
    entry.crs.push(formatIdentity(identityOf(desired.resource)));
    refused.set(key, entry);
  }
  return [...refused.values()].map(({ diagnostic, crs }) => ({
    ...diagnostic,
    message: `${diagnostic.message}; the hub refuses ${crs[0]}${crs.length > 1 ? ` and ${crs.length - 1} more` : ""}`,
  }));
}

/**
 * A spec.version no release has: the service refuses such a CR (VersionMigrationEligible False), so validate
 * does too, listing the versions there are. Per-cluster CRs by their own field; placements by their
 * template's and each override's version, whether or not they could be expanded. With spec.manifests the
 * CR brings its own release.
 */
export async function versionDiagnostics(
  resources: readonly DesiredResource[],
  placements: readonly DeclaredPlacement[],
  source: ManifestSource,
  locator: FieldLocator,
): Promise<Diagnostic[]> {
  const available = new Map<Component, readonly string[]>();
  const problem = async (kind: KnativeKind, version: string | undefined): Promise<string | undefined> => {
    const component = COMPONENT_OF_KIND[kind];
    if (!available.has(component)) available.set(component, await source.componentVersions(component));
    try {
      resolveVersion(version, available.get(component)!, kind);
      return undefined;
    } catch (error) {
      return (error as Error).message;
    }
  };
  const diagnostics: Diagnostic[] = [];
  for (const desired of resources) {
    const { spec } = desired.resource;
    if (locator.placementOf(desired) !== undefined || (spec.manifests ?? []).length > 0) continue;
    const message = await problem(desired.resource.kind, spec.version);
    if (message !== undefined) diagnostics.push(locator.diagnostic(desired, ["spec", "version"], message));
  }
  for (const declared of placements) {
    const { spec, kind } = declared.placement;
    const crKind = PLACEMENT_KINDS[kind];
    const template = spec.template.spec as { version?: string; manifests?: readonly unknown[] };
    const versions: [FieldPath, string | undefined][] = [
      [["spec", "template", "spec", "version"], template.version],
      ...(spec.overrides ?? []).flatMap(({ patch }, index): [FieldPath, string][] => {
        const version = (patch as { version?: unknown } | undefined)?.version;
        return typeof version === "string"
          ? [[["spec", "overrides", index, "patch", "version"], version]]
          : [];
      }),
    ];
    if ((template.manifests ?? []).length > 0) continue;
    for (const [field, version] of versions) {
      const message = await problem(crKind, version);
      if (message === undefined) continue;
      diagnostics.push({
        path: declared.path,
        ...locateField(declared.source, field, "value"),
        field: formatFieldPath(field),
        message,
      });
    }
  }
  return diagnostics;
}

/**
 * The ClusterProfiles and PlacementDecisions placements select from, offline: one snapshot file (a kubectl
 * -o yaml list, as `plan --cluster-profiles` takes it) or every YAML/JSON file of a directory.
 */
export async function readClusterProfiles(path: string): Promise<Inventory> {
  const stats = await stat(path).catch(() => undefined);
  if (stats === undefined) throw new UsageError(`--cluster-profiles ${path} does not exist`);
  const paths = stats.isDirectory()
    ? (await readdir(path))
        .filter((name) => /\.(ya?ml|json)$/i.test(name))
        .sort()
        .map((name) => join(path, name))
    : [path];
  const objects = [];
  for (const file of paths) {
    try {
      objects.push(...readSnapshotObjects(file, await readFile(file, "utf8")));
    } catch (error) {
      throw new UsageError(`--cluster-profiles: ${(error as Error).message}`);
    }
  }
  return inventoryOf(objects);
}
