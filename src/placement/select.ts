import {
  type ClusterSelectorTerm,
  isDecimal,
  type LabelSelector,
  type PropertySelector,
} from "../fleet/placement-schema.ts";
import type { InventoryCluster } from "./inventory.ts";

// Label and property selection, with apimachinery's label-selector semantics: matchLabels and every
// matchExpression must hold; In needs the key present with one of the values, NotIn holds when the key is
// absent or has another value, Exists/DoesNotExist look at the key only. Properties (KEP-4322
// status.properties) work the same way by name, plus Gt/Lt for decimal values (a value that is not a
// decimal number never satisfies Gt/Lt).

type Requirement = { operator: string; values?: readonly string[] | undefined };

function holds(requirement: Requirement, value: string | undefined): boolean {
  const values = requirement.values ?? [];
  switch (requirement.operator) {
    case "In":
      return value !== undefined && values.includes(value);
    case "NotIn":
      return value === undefined || !values.includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    case "Gt":
    case "Lt": {
      if (value === undefined || !isDecimal(value)) return false;
      const observed = Number(value);
      const bound = Number(values[0]);
      return requirement.operator === "Gt" ? observed > bound : observed < bound;
    }
    default:
      // The schema admits no other operator; an unknown one never selects (fail closed).
      return false;
  }
}

export function matchesLabels(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (!Object.hasOwn(labels, key) || labels[key] !== value) return false;
  }
  return (selector.matchExpressions ?? []).every((requirement) =>
    holds(requirement, Object.hasOwn(labels, requirement.key) ? labels[requirement.key] : undefined),
  );
}

function matchesProperties(selector: PropertySelector, properties: ReadonlyMap<string, string>): boolean {
  return selector.matchExpressions.every((requirement) =>
    holds(requirement, properties.get(requirement.name)),
  );
}

/** Both selectors of a term must match; a term with neither is refused by the schema. */
export function matchesTerm(term: ClusterSelectorTerm, cluster: InventoryCluster): boolean {
  if (term.labelSelector === undefined && term.propertySelector === undefined) return false;
  return (
    (term.labelSelector === undefined || matchesLabels(term.labelSelector, cluster.labels)) &&
    (term.propertySelector === undefined || matchesProperties(term.propertySelector, cluster.properties))
  );
}
