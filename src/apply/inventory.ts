import { z } from "zod";
import { INVENTORY_KEY } from "../api/labels.ts";
import { isRecord, type KubeObject, type ObjectRef, refKey } from "../kube/object.ts";

// The inventory: what an apply set has applied, recorded in a ConfigMap's data (one JSON ref a line, sorted),
// as cli-utils' inventory ConfigMap does. Prune and removal work from it.

export function encodeInventory(refs: readonly ObjectRef[]): string {
  const byKey = new Map(refs.map((r) => [refKey(r), r]));
  return [...byKey.keys()]
    .sort()
    .map((key) => {
      const { apiVersion, kind, namespace, name } = byKey.get(key)!;
      return JSON.stringify({ apiVersion, kind, namespace, name });
    })
    .join("\n");
}

const InventoryLine = z.object({
  apiVersion: z.string(),
  kind: z.string(),
  namespace: z.string(),
  name: z.string(),
});

/** The inventory an object records; lines that do not parse are skipped (never a reason to prune). */
export function decodeInventory(holder: KubeObject | undefined): ObjectRef[] {
  const data = holder?.data;
  const text = isRecord(data) && typeof data[INVENTORY_KEY] === "string" ? data[INVENTORY_KEY] : "";
  return text.split("\n").flatMap((line) => {
    try {
      const parsed = InventoryLine.safeParse(JSON.parse(line));
      return parsed.success ? [parsed.data] : [];
    } catch {
      return [];
    }
  });
}
