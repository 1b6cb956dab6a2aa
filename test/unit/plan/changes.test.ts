import { describe, expect, it } from "vitest";
import { PRUNE_ANNOTATION, PRUNE_DISABLED } from "../../../src/api/labels.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import { changedFiles, resourceChanges } from "../../../src/plan/changes.ts";
import { syncRevisions } from "../../../src/plan/plan.ts";
import { DEFAULT_FLEET_SETTINGS } from "../../../src/sync/settings.ts";
import { crText } from "../../support/fleet-files.ts";

const file = (name: string, extra: Partial<Parameters<typeof crText>[0]> = {}): FleetFile => ({
  path: `clusters/${name}/knative-serving.yaml`,
  text: crText({ name, cluster: name, ...extra }),
});
const revision = (ref: string, files: FleetFile[]) => ({ ref, commit: ref.padEnd(40, "0"), files });
/** The syncs of base and then head, dry, as plan runs them. */
const syncs = (base: FleetFile[], head: FleetFile[]) =>
  syncRevisions(
    { repository: "/fleet", base: revision("base", base), head: revision("head", head) },
    { settings: DEFAULT_FLEET_SETTINGS },
  );
const changesOf = async (base: FleetFile[], head: FleetFile[]) => {
  const { base: before, head: after } = await syncs(base, head);
  return resourceChanges(before, after, "5m");
};
const actions = async (base: FleetFile[], head: FleetFile[]) =>
  (await changesOf(base, head)).map(({ identity, action, path }) => ({ name: identity.name, action, path }));
const prune = async (base: FleetFile[], head: FleetFile[]) => (await syncs(base, head)).head.prune;

describe("resourceChanges", () => {
  it("finds created, updated and deleted CRs by identity; unchanged ones are left out", async () => {
    const [a, b, c] = [file("a"), file("b"), file("c")];
    expect(await actions([a, b], [a, { ...b, text: b.text.replace('"1.21"', '"1.22"') }, c])).toEqual([
      { name: "b", action: "update", path: "clusters/b/knative-serving.yaml" },
      { name: "c", action: "create", path: "clusters/c/knative-serving.yaml" },
    ]);
    expect(await actions([a, b], [a])).toEqual([
      { name: "b", action: "delete", path: "clusters/b/knative-serving.yaml" },
    ]);
  });

  it("a CR moved to another file unchanged is no change", async () => {
    const a = file("a");
    expect(await actions([a], [{ ...a, path: "clusters/renamed.yaml" }])).toEqual([]);
  });

  it("a CR in a file with errors is blocked, also when another file's edit makes it a duplicate", async () => {
    const [a, b] = [file("a"), file("b")];
    const broken = { ...a, text: a.text.replace("version:", "verison:") };
    expect(await actions([a, b], [broken, b])).toEqual([
      { name: "a", action: "blocked", path: "clusters/a/knative-serving.yaml" },
    ]);
    const copyOfA = { path: "clusters/copy.yaml", text: a.text };
    expect((await actions([a, b], [a, b, copyOfA])).map(({ action }) => action)).toEqual(["blocked"]);
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

describe("the prune of head's sync: the mirror's safeguards applied to the change", () => {
  const three = [file("a"), file("b"), file("c")];

  it("prunes a minority of CRs", async () => {
    expect(await prune(three, three.slice(1))).toMatchObject({
      state: "pruned",
      candidates: [{ name: "a" }],
    });
  });

  it("holds a prune of more than half the CRs for a person's confirmation, with its token", async () => {
    const report = await prune(three, three.slice(2));
    expect(report).toMatchObject({ state: "held", reason: "over-max-fraction" });
    expect(report.confirmation?.token).toMatch(/^[0-9a-f]{16}$/);
  });

  it("skips pruning while any file fails validation", async () => {
    const broken = { ...three[2]!, text: "kind: [" };
    expect(await prune(three, [three[1]!, broken])).toMatchObject({
      state: "skipped",
      reason: "invalid-files",
    });
  });

  it("retains a CR whose last state opts out of pruning", async () => {
    const kept = file("a", { annotations: { [PRUNE_ANNOTATION]: PRUNE_DISABLED } });
    expect(await prune([kept, ...three.slice(1)], three.slice(1))).toMatchObject({
      state: "none",
      retained: [{ name: "a" }],
    });
  });
});
