import { describe, expect, it } from "vitest";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { decodeFleetFile, type FleetFile, fileProblem } from "../../../src/fleet/file-text.ts";
import { buildFleetModel, type FleetModel } from "../../../src/fleet/model.ts";
import { crFile } from "../../support/fleet-files.ts";
import { gatedActions, hubAt, NS, rolloutStage, twoCrs } from "./rollout-hub.ts";

// A policy that cannot be read is a policy that holds: whatever looks like a rollout policy by its path or
// its content, and fails to decode, parse or validate, holds every change as a paused policy would.

const POLICY = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeRollout
metadata:
  name: knative
spec:
  waves:
    - name: canary
      clusterProfiles: [{ namespace: fleet-system, name: c1 }]
  soak: 5s
`;
const utf8 = (text: string) => new TextEncoder().encode(text);

/** The two CRs at `version`, and the policy file as given. */
const fleet = (version: string, policy: FleetFile | undefined): FleetModel =>
  buildFleetModel([...twoCrs(version), ...(policy ? [policy] : [])], { defaultNamespace: NS });

/** What the rollout stage's gate does with the two CRs' changes from 1.21 to `after`'s. */
async function actionsAfter(after: FleetModel): Promise<string[]> {
  const stage = rolloutStage();
  try {
    return await gatedActions(stage, after, hubAt("1.21"));
  } finally {
    stage.stop();
  }
}

const BROKEN: [string, (path: string) => FleetFile][] = [
  ["a misspelled kind", (path) => ({ path, text: POLICY.replace("KnativeRollout", "KnativeRolout") })],
  ["the kind in lower case", (path) => ({ path, text: POLICY.replace("KnativeRollout", "knativerollout") })],
  ["no kind, but waves", (path) => ({ path, text: POLICY.replace("kind: KnativeRollout\n", "") })],
  ["an apiVersion typo", (path) => ({ path, text: POLICY.replace("v1alpha1", "v1alpa1") })],
  ["a wrong field", (path) => ({ path, text: POLICY.replace("soak: 5s", "soak: soon") })],
  ["a YAML error", (path) => ({ path, text: POLICY.replace("name: knative", 'name: "knative') })],
  ["CR line endings", (path) => decodeFleetFile(path, utf8(POLICY.replaceAll("\n", "\r")))],
  [
    "UTF-16 with a byte order mark",
    (path) => decodeFleetFile(path, new Uint8Array([0xff, 0xfe, ...Buffer.from(POLICY, "utf16le")])),
  ],
  ["UTF-16 without one", (path) => decodeFleetFile(path, new Uint8Array(Buffer.from(POLICY, "utf16le")))],
  [
    "one byte that is not UTF-8",
    (path) =>
      decodeFleetFile(path, new Uint8Array(Buffer.from(POLICY.replace("knative", "kn\u00e4tive"), "latin1"))),
  ],
  ["a NUL byte", (path) => decodeFleetFile(path, utf8(POLICY.replace("canary", "can\0ary")))],
  ["over the size limit", (path) => decodeFleetFile(path, utf8(`${POLICY}# ${"x".repeat(1024 * 1024)}\n`))],
];

describe("a rollout policy that cannot be read holds every change", () => {
  for (const [what, broken] of BROKEN) {
    it(`${what}, at a path that does not say 'rollout'`, async () => {
      const path = "clusters/policy.yaml";
      const model = fleet("1.22", broken(path));
      expect(model.files.find((f) => f.path === path)?.status).toBe("failed");
      expect(model.rollout).toEqual({ failedPaths: [path] });
      expect(await actionsAfter(model)).toEqual(["waiting", "waiting"]);
    });
  }

  it("a misspelled kind is told about as a rollout policy, not as a placement", () => {
    const model = fleet("1.22", {
      path: "clusters/policy.yaml",
      text: POLICY.replace("KnativeRollout", "KnativeRolout"),
    });
    expect(model.diagnostics.map(formatDiagnostic)).toEqual([
      'clusters/policy.yaml:2:7 kind: "KnativeRolout" is not a kind; did you mean KnativeRollout? A rollout policy that does not validate holds every change',
    ]);
  });

  it("a file named for a rollout policy that says nothing readable: a symlink, a truncated file", async () => {
    for (const file of [
      fileProblem("clusters/rollout.yaml", "a symbolic link where fleet files are read"),
      { path: "clusters/knative-rollout.yaml", text: "apiVersion: fleet.kna" },
      { path: "clusters/Rollout/policy.yaml", text: "apiVersion: fleet.knative.dev/v1alpha1\nkind: Knat" },
    ]) {
      const model = fleet("1.22", file);
      expect(model.rollout, file.path).toEqual({ failedPaths: [file.path] });
    }
    expect(await actionsAfter(fleet("1.22", { path: "clusters/rollout.yaml", text: "apiV" }))).toEqual([
      "waiting",
      "waiting",
    ]);
  });

  it("a broken policy beside a valid one: nothing uses the valid one, every change waits", async () => {
    const model = buildFleetModel(
      [
        ...twoCrs("1.22"),
        { path: "clusters/policy.yaml", text: POLICY },
        { path: "clusters/policy-2.yaml", text: POLICY.replace("KnativeRollout", "KnativeRolout") },
      ],
      { defaultNamespace: NS },
    );
    expect(model.rollout).toEqual({ failedPaths: ["clusters/policy-2.yaml"] });
    expect(await actionsAfter(model)).toEqual(["waiting", "waiting"]);
  });

  it("a broken file named for a rollout policy holds, whatever it says it is", () => {
    const path = "clusters/rollout-canary-serving.yaml";
    const broken = crFile({ name: "c3-serving", cluster: "c3", version: "1.22" }, path);
    const model = fleet("1.22", { path, text: broken.text.replace("version:", "versoin:") });
    expect(model.rollout).toEqual({ failedPaths: [path] });
  });

  it("is no rollout policy when it says it is something else and its name does not say rollout", async () => {
    const path = "clusters/spoke-3/knative-serving.yaml";
    const broken = crFile({ name: "c3-serving", cluster: "c3", version: "1.22" }, path);
    const model = fleet("1.22", { path, text: broken.text.replace("version:", "versoin:") });
    expect(model.files.find((f) => f.path === path)?.status).toBe("failed");
    expect(model.rollout).toEqual({ failedPaths: [] });
    expect(
      fleet("1.22", { path: "clusters/c3.yaml", text: "kind: KnativeServing\n  bad: [" }).rollout,
    ).toEqual({
      failedPaths: [],
    });
    expect(
      await actionsAfter(fleet("1.22", { path: "clusters/c3.yaml", text: 'kind: KnativeServing\nx: "' })),
    ).toEqual(["update", "update"]);
  });
});
