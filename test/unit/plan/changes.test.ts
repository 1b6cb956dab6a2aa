import { describe, expect, it } from "vitest";
import { PRUNE_ANNOTATION, PRUNE_DISABLED } from "../../../src/api/labels.ts";
import { buildFleetModel, type FleetFile } from "../../../src/fleet/model.ts";
import { DEFAULT_NAMESPACE } from "../../../src/fleet/parse.ts";
import { assessPrune, changedFiles, resourceChanges } from "../../../src/plan/changes.ts";
import { crText } from "../../support/fleet-files.ts";

const file = (name: string, extra: Partial<Parameters<typeof crText>[0]> = {}): FleetFile => ({
  path: `clusters/${name}/knative-serving.yaml`,
  text: crText({ name, cluster: name, ...extra }),
});
const model = (files: FleetFile[]) => buildFleetModel(files, { defaultNamespace: DEFAULT_NAMESPACE });
const source = { repository: "/fleet", branch: "main", commit: "base" };
const actions = (base: FleetFile[], head: FleetFile[]) =>
  resourceChanges(model(base), model(head)).map(({ identity, action, path }) => ({
    name: identity.name,
    action,
    path,
  }));

describe("resourceChanges", () => {
  it("finds created, updated and deleted CRs by identity; unchanged ones are left out", () => {
    const [a, b, c] = [file("a"), file("b"), file("c")];
    expect(actions([a, b], [a, { ...b, text: b.text.replace('"1.21"', '"1.22"') }, c])).toEqual([
      { name: "b", action: "update", path: "clusters/b/knative-serving.yaml" },
      { name: "c", action: "create", path: "clusters/c/knative-serving.yaml" },
    ]);
    expect(actions([a, b], [a])).toEqual([
      { name: "b", action: "delete", path: "clusters/b/knative-serving.yaml" },
    ]);
  });

  it("a CR moved to another file unchanged is no change", () => {
    const a = file("a");
    expect(actions([a], [{ ...a, path: "clusters/renamed.yaml" }])).toEqual([]);
  });

  it("a CR in a file with errors is blocked, also when another file's edit makes it a duplicate", () => {
    const [a, b] = [file("a"), file("b")];
    const broken = { ...a, text: a.text.replace("version:", "verison:") };
    expect(actions([a, b], [broken, b])).toEqual([
      { name: "a", action: "blocked", path: "clusters/a/knative-serving.yaml" },
    ]);
    const copyOfA = { path: "clusters/copy.yaml", text: a.text };
    expect(actions([a, b], [a, b, copyOfA]).map(({ action }) => action)).toEqual(["blocked"]);
  });

  it("lists changed files by path", () => {
    const [a, b] = [file("a"), file("b")];
    expect(changedFiles([a, b], [{ ...a, text: `${a.text}# note\n` }, file("c")])).toEqual([
      { path: "clusters/a/knative-serving.yaml", change: "modified" },
      { path: "clusters/b/knative-serving.yaml", change: "removed" },
      { path: "clusters/c/knative-serving.yaml", change: "added" },
    ]);
  });
});

describe("assessPrune: the mirror's safeguards applied to the change", () => {
  const three = [file("a"), file("b"), file("c")];

  it("prunes a minority of CRs", () => {
    expect(assessPrune(model(three), model(three.slice(1)), source)).toMatchObject({
      state: "pruned",
      candidates: [{ name: "a" }],
    });
  });

  it("holds a prune of more than half the CRs for a person's confirmation, with its token", () => {
    const report = assessPrune(model(three), model(three.slice(2)), source);
    expect(report).toMatchObject({ state: "held", reason: "over-max-fraction" });
    expect(report.confirmation?.token).toMatch(/^[0-9a-f]{16}$/);
  });

  it("skips pruning while any file fails validation", () => {
    const broken = { ...three[2]!, text: "kind: [" };
    expect(assessPrune(model(three), model([three[1]!, broken]), source)).toMatchObject({
      state: "skipped",
      reason: "invalid-files",
    });
  });

  it("retains a CR whose last state opts out of pruning", () => {
    const kept = file("a", { annotations: { [PRUNE_ANNOTATION]: PRUNE_DISABLED } });
    expect(assessPrune(model([kept, ...three.slice(1)]), model(three.slice(1)), source)).toMatchObject({
      state: "none",
      retained: [{ name: "a" }],
    });
  });
});
