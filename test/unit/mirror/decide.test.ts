import { describe, expect, it } from "vitest";
import type { HubCrPolicy } from "../../../src/admission/hub-cr.ts";
import { LocationPolicySchema, VERSION_VARIABLE } from "../../../src/admission/locations.ts";
import {
  ADOPT_ANNOTATION,
  PRUNE_ANNOTATION,
  PRUNE_DISABLED,
  SOURCE_COMMIT_ANNOTATION,
  SOURCE_PATH_ANNOTATION,
  SOURCE_REPOSITORY_ANNOTATION,
} from "../../../src/api/labels.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import {
  type ApplyStep,
  decideApplies,
  decidePrune,
  HeldPruneSchema,
  heldPruneRecord,
  type MirrorInput,
  pruneToken,
} from "../../../src/mirror/decide.ts";
import {
  type CrOptions,
  crText,
  crFile as sharedCrFile,
  TEST_REPOSITORY,
} from "../../support/fleet-files.ts";
import { crFile, mirrorInput } from "./support.ts";

const NS = "fleet";
const COMMIT_1 = "1".repeat(40);
const COMMIT_2 = "2".repeat(40);

/** The hub after a sync: what was applied, as the API server returns it (server fields, a status). */
function hubAfter(steps: readonly ApplyStep[], previous: readonly KubeObject[] = []): KubeObject[] {
  const applied = steps.flatMap((step) => ("object" in step ? [step.object] : []));
  const untouched = previous.filter(
    (object) => !applied.some((a) => a.kind === object.kind && a.metadata.name === object.metadata.name),
  );
  return [
    ...untouched,
    ...applied.map((object) => ({
      ...object,
      metadata: {
        ...object.metadata,
        uid: `uid-${object.metadata.name}`,
        resourceVersion: "7",
        generation: 1,
      },
      status: { observedGeneration: 1, conditions: [{ type: "Ready", status: "True" }] },
    })),
  ];
}

function sync(input: MirrorInput, live: readonly KubeObject[]) {
  return decideApplies(input.model.resources, input.source, live, input.admission);
}

/** The hub holding `names`, each mirrored from its own file at COMMIT_1. */
function mirroredHub(names: readonly string[], annotations: Record<string, Record<string, string>> = {}) {
  const files = names.map((name) => crFile(name, { namespace: NS, annotations: annotations[name] }));
  return hubAfter(sync(mirrorInput(files, NS, COMMIT_1), []));
}

const handMade = (name: string): KubeObject => ({
  apiVersion: "operator.knative.dev/v1beta1",
  kind: "KnativeServing",
  metadata: { name, namespace: NS, uid: "hand", labels: { team: "platform" } },
  spec: { version: "1.21" },
});

const actions = (steps: readonly ApplyStep[]) => steps.map((step) => [step.name, step.action]);

describe("decideApplies", () => {
  it("refuses fleet.knative.dev/abandon-cleanup from a fleet file: the hub CR keeps its last state", () => {
    const live = mirroredHub(["alpha"]);
    const files = ["alpha", "beta", "gamma"].map((name) => crFile(name, { namespace: NS }));
    const input = mirrorInput(files, NS, COMMIT_2);
    // Validation refuses the annotation at the file; the mirror's own check stands behind it.
    const abandoning = input.model.resources.map((desired) =>
      desired.resource.metadata.name === "gamma"
        ? desired
        : {
            ...desired,
            resource: {
              ...desired.resource,
              metadata: {
                ...desired.resource.metadata,
                annotations: { "fleet.knative.dev/abandon-cleanup": "true" },
              },
            },
          },
    );
    const steps = decideApplies(abandoning, input.source, live);
    expect(actions(steps)).toEqual([
      ["alpha", "refused"],
      ["beta", "refused"],
      ["gamma", "create"],
    ]);
    expect(steps[0]).toMatchObject({
      error:
        "clusters/alpha.yaml:1: metadata.annotations.fleet.knative.dev/abandon-cleanup: cannot come from a fleet " +
        "file (a push could make a removal leave the cluster as it is); a hub operator sets it on the hub CR",
    });
    expect(
      hubAfter(steps, live).map((o) => o.metadata.annotations?.["fleet.knative.dev/abandon-cleanup"]),
    ).toEqual([undefined, undefined]);
  });

  it("creates a missing CR labelled as mirrored and annotated with its repository, file and commit", () => {
    const [step] = sync(mirrorInput([crFile("alpha", { namespace: NS })], NS, COMMIT_1), []);
    expect(step!.action).toBe("create");
    const { metadata } = (step as ApplyStep & { object: KubeObject }).object;
    expect(metadata.labels).toEqual({ "app.kubernetes.io/managed-by": "knative-fleet" });
    expect(metadata.annotations).toMatchObject({
      [SOURCE_REPOSITORY_ANNOTATION]: TEST_REPOSITORY,
      [SOURCE_PATH_ANNOTATION]: "clusters/alpha.yaml",
      [SOURCE_COMMIT_ANNOTATION]: COMMIT_1,
    });
  });

  it("leaves an unchanged CR alone at a new commit, and keeps the commit that last changed it", () => {
    const live = mirroredHub(["alpha", "beta"]);
    const files = [crFile("alpha", { namespace: NS }), crFile("beta", { namespace: NS, version: "1.23" })];
    const steps = sync(mirrorInput(files, NS, COMMIT_2), live);
    expect(actions(steps)).toEqual([
      ["alpha", "unchanged"],
      ["beta", "update"],
    ]);
    const after = hubAfter(steps, live);
    const commitOf = (name: string) =>
      after.find((o) => o.metadata.name === name)!.metadata.annotations![SOURCE_COMMIT_ANNOTATION];
    expect([commitOf("alpha"), commitOf("beta")]).toEqual([COMMIT_1, COMMIT_2]);
  });

  it("updates a CR whose file moved, and one whose hub copy was edited by hand", () => {
    const live = mirroredHub(["alpha", "beta"]).map((object) =>
      object.metadata.name === "beta"
        ? { ...object, spec: { ...(object.spec as object), version: "0.1" } }
        : object,
    );
    const moved = { ...crFile("alpha", { namespace: NS }), path: "clusters/eu/alpha.yaml" };
    const steps = sync(mirrorInput([moved, crFile("beta", { namespace: NS })], NS, COMMIT_2), live);
    expect(actions(steps)).toEqual([
      ["alpha", "update"],
      ["beta", "update"],
    ]);
  });

  it("reports a hand-made CR of the same kind and name as a conflict and a deleting one as terminating", () => {
    const terminating = mirroredHub(["beta"]).map((object) => ({
      ...object,
      metadata: { ...object.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" },
    }));
    const files = [crFile("alpha", { namespace: NS }), crFile("beta", { namespace: NS })];
    const steps = sync(mirrorInput(files, NS, COMMIT_1), [handMade("alpha"), ...terminating]);
    expect(actions(steps)).toEqual([
      ["alpha", "conflict"],
      ["beta", "terminating"],
    ]);
    // What the person who made it by hand reads: the label that is missing, and the two ways out.
    expect(steps[0]).toMatchObject({
      reason:
        "a CR of this kind and name exists on the hub without the label app.kubernetes.io/managed-by: " +
        "knative-fleet (made by hand); delete it, or add the label to hand it over",
    });
  });

  it("orders its steps by kind, then namespace, then name, whatever the files' order", () => {
    const files = [
      crFile("b", { namespace: "ns-2" }),
      crFile("a", { namespace: "ns-2", kind: "KnativeEventing" }),
      crFile("c", { namespace: "ns-1" }),
      crFile("a", { namespace: "ns-2" }),
    ];
    const steps = sync(mirrorInput(files, NS, COMMIT_1), []);
    expect(steps.map((s) => `${s.kind} ${s.namespace}/${s.name}`)).toEqual([
      "KnativeEventing ns-2/a",
      "KnativeServing ns-1/c",
      "KnativeServing ns-2/a",
      "KnativeServing ns-2/b",
    ]);
  });
});

describe("decideApplies: the admission, the same in every mode", () => {
  // What the service gives the mirror with defaults: CRs in its own namespace only, ClusterProfiles in
  // fleet-system only, no URL location, local paths inside kodata only. With `reconciler: external` the
  // mirror is the only check before the upstream operator acts on a CR.
  const admission: HubCrPolicy = {
    crNamespaces: [NS],
    clusterProfileNamespaces: ["fleet-system"],
    hubInstall: false,
    locations: LocationPolicySchema.parse({}),
    kodataDir: "/opt/knative-fleet/kodata",
  };
  const cr = (name: string, options: Partial<CrOptions> = {}) =>
    sharedCrFile({ name, namespace: NS, cluster: name, ...options });
  const admitted = (files: FleetFile[], live: readonly KubeObject[] = []) =>
    sync({ ...mirrorInput(files, NS, COMMIT_1), admission }, live);

  it("refuses a metadata-service URL, another team's ClusterProfile namespace, another hub namespace and the hub itself", () => {
    const steps = admitted([
      cr("metadata", { spec: { manifests: [{ URL: "http://169.254.169.254/latest/meta-data/" }] } }),
      cr("other-team", { clusterNamespace: "team-b" }),
      cr("elsewhere", { namespace: "kube-system" }),
      cr("local", { spec: { additionalManifests: [{ URL: "/var/run/secrets/kubernetes.io/token" }] } }),
      cr("on-the-hub", { cluster: null }),
      cr("fine"),
    ]);
    expect(Object.fromEntries(steps.map((step) => [step.name, step.error ?? step.action]))).toEqual({
      metadata:
        "clusters/metadata.yaml:1: spec.manifests[0].URL: manifest location http://169.254.169.254/latest/meta-data/ " +
        "is refused: it matches no prefix in manifestLocations.allowedPrefixes (none is set)",
      "other-team":
        "clusters/other-team.yaml:1: spec.clusterProfileRef.namespace: ClusterProfiles in namespace team-b may " +
        "not be targeted (allowedClusterProfileNamespaces: fleet-system)",
      elsewhere:
        "clusters/elsewhere.yaml:1: metadata.namespace: kube-system is not a hub namespace whose CRs knative-fleet " +
        `reconciles (tenancy.crNamespaces: ${NS}); delete the metadata.namespace line (the CR then goes to ` +
        "the fleet's namespace), or add kube-system to tenancy.crNamespaces in the service's config (the chart's value " +
        "tenancy.crNamespaces)",
      local:
        "clusters/local.yaml:1: spec.additionalManifests[0].URL: manifest location /var/run/secrets/kubernetes.io/token " +
        "is refused: a local path must name a regular file or folder inside the kodata directory",
      "on-the-hub":
        "clusters/on-the-hub.yaml:1: spec.clusterProfileRef: is required: installing on the hub itself is " +
        "disabled (hubInstall.enabled is false); name the ClusterProfile of the cluster to install on",
      fine: "create",
    });
    expect(steps.filter((step) => step.action === "refused")).toHaveLength(5);
  });

  it("checks an allowed prefix's URLs for a literal private address and credentials, the version filled in", () => {
    const open: HubCrPolicy = {
      ...admission,
      locations: LocationPolicySchema.parse({
        allowedPrefixes: [
          "https://10.0.0.1/",
          "https://u:p@example.com/",
          "https://releases.example/v1.22.0/",
        ],
      }),
    };
    const steps = sync(
      {
        ...mirrorInput(
          [
            cr("private", { spec: { additionalManifests: [{ URL: "https://10.0.0.1/x.yaml" }] } }),
            cr("userinfo", { spec: { additionalManifests: [{ URL: "https://u:p@example.com/x.yaml" }] } }),
            cr("versioned", {
              version: "1.22.0",
              spec: {
                additionalManifests: [{ URL: `https://releases.example/v${VERSION_VARIABLE}/x.yaml` }],
              },
            }),
          ],
          NS,
          COMMIT_1,
        ),
        admission: open,
      },
      [],
    );
    expect(steps.map((step) => [step.name, step.error ?? step.action])).toEqual([
      [
        "private",
        "clusters/private.yaml:1: spec.additionalManifests[0].URL: manifest location host 10.0.0.1 resolves to " +
          "10.0.0.1, a loopback, link-local or private address (manifestLocations.allowPrivateNetworks)",
      ],
      [
        "userinfo",
        "clusters/userinfo.yaml:1: spec.additionalManifests[0].URL: manifest location https://example.com/x.yaml " +
          "is refused: it carries credentials",
      ],
      ["versioned", "create"],
    ]);
  });

  it("a refused CR keeps its hub copy as it was, and holds back the prune", () => {
    const live = mirroredHub(["alpha", "beta"]);
    // alpha now targets another team's ClusterProfile; beta's file is gone.
    const moved = {
      ...crFile("alpha", { namespace: NS }),
      text: crText({ name: "alpha", namespace: NS, cluster: "alpha", clusterNamespace: "team-b" }),
    };
    const input = { ...mirrorInput([moved], NS, COMMIT_2), admission };
    const steps = sync(input, live);
    expect(actions(steps)).toEqual([["alpha", "refused"]]);
    expect(hubAfter(steps, live)).toEqual(live);
    const applyFailures = steps.filter((step) => step.error !== undefined).length;
    expect(decidePrune(input, live, { applyFailures, confirmedToken: undefined })).toMatchObject({
      state: "skipped",
      reason: "apply-failed",
    });
  });
});

describe("decideApplies: a repository owns its CRs", () => {
  const OTHER = "https://git.example/team-b/fleet.git";
  const fromOther = (names: string[], annotations: Record<string, string> = {}) =>
    hubAfter(
      sync(
        {
          ...mirrorInput(
            names.map((n) => crFile(n, { namespace: NS })),
            NS,
            COMMIT_1,
          ),
          source: { repository: OTHER, branch: "main", commit: COMMIT_1 },
        },
        [],
      ),
    ).map((object) => ({
      ...object,
      metadata: { ...object.metadata, annotations: { ...object.metadata.annotations, ...annotations } },
    }));

  it("a CR another repository mirrored is a conflict: reported, not updated, and never pruned", () => {
    const live = fromOther(["alpha"]);
    const files = [crFile("alpha", { namespace: NS, version: "1.23" })];
    const steps = sync(mirrorInput(files, NS, COMMIT_2), live);
    expect(steps).toEqual([
      {
        kind: "KnativeServing",
        namespace: NS,
        name: "alpha",
        path: "clusters/alpha.yaml",
        action: "conflict",
        reason:
          `the hub CR was mirrored from repository ${OTHER} (fleet.knative.dev/source-repository); to hand it ` +
          `over to this one, annotate the hub CR fleet.knative.dev/adopt=${TEST_REPOSITORY}`,
      },
    ]);
    expect(hubAfter(steps, live)).toEqual(live);
    const gone = decidePrune(mirrorInput([crFile("beta", { namespace: NS })], NS, COMMIT_2), live, {
      applyFailures: 0,
      confirmedToken: undefined,
    });
    expect(gone.state).toBe("none");
  });

  it("a mirrored CR that names no repository is no one's to change: a conflict that says so", () => {
    const live = fromOther(["alpha"]).map((object) => {
      const { [SOURCE_REPOSITORY_ANNOTATION]: _, ...annotations } = object.metadata.annotations ?? {};
      return { ...object, metadata: { ...object.metadata, annotations } };
    });
    const [step] = sync(mirrorInput([crFile("alpha", { namespace: NS })], NS, COMMIT_2), live);
    expect(step).toMatchObject({
      action: "conflict",
      reason:
        "the hub CR was mirrored from an unnamed repository (fleet.knative.dev/source-repository); to hand it " +
        `over to this one, annotate the hub CR fleet.knative.dev/adopt=${TEST_REPOSITORY}`,
    });
  });

  it("the adoption marker hands it over: updated, and from then on this repository's", () => {
    const live = fromOther(["alpha"], { [ADOPT_ANNOTATION]: TEST_REPOSITORY });
    const steps = sync(
      mirrorInput([crFile("alpha", { namespace: NS, version: "1.23" })], NS, COMMIT_2),
      live,
    );
    expect(actions(steps)).toEqual([["alpha", "update"]]);
    const after = hubAfter(steps, live)[0]!;
    expect(after.metadata.annotations?.[SOURCE_REPOSITORY_ANNOTATION]).toBe(TEST_REPOSITORY);
    // A marker naming a third repository hands nothing to this one.
    const elsewhere = fromOther(["alpha"], { [ADOPT_ANNOTATION]: "https://git.example/c.git" });
    expect(actions(sync(mirrorInput([crFile("alpha", { namespace: NS })], NS, COMMIT_2), elsewhere))).toEqual(
      [["alpha", "conflict"]],
    );
  });

  it("never shows a credential another repository's URL carried", () => {
    const live = fromOther(["alpha"]).map((object) => ({
      ...object,
      metadata: {
        ...object.metadata,
        annotations: {
          ...object.metadata.annotations,
          [SOURCE_REPOSITORY_ANNOTATION]: "https://bot:ghp_0123456789abcdef@git.example/b.git",
        },
      },
    }));
    const [step] = sync(mirrorInput([crFile("alpha", { namespace: NS })], NS, COMMIT_2), live);
    expect(step!.reason).toContain("repository https://<redacted>@git.example/b.git");
    expect(step!.reason).not.toContain("ghp_");
  });
});

describe("decidePrune", () => {
  const NAMES = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
  const filesOf = (names: readonly string[]) => names.map((name) => crFile(name, { namespace: NS }));
  const noFailures = { applyFailures: 0, confirmedToken: undefined };
  const names = (candidates: readonly { name: string }[]) => candidates.map((c) => c.name);

  it("prunes a mirrored CR whose file is gone, and never a hand-made one", () => {
    const live = [...mirroredHub(["a", "b", "c"]), handMade("z")];
    const report = decidePrune(mirrorInput(filesOf(["a", "b"]), NS, COMMIT_2), live, noFailures);
    expect(report).toEqual({
      state: "pruned",
      candidates: [{ kind: "KnativeServing", namespace: NS, name: "c", path: "clusters/c.yaml" }],
      retained: [],
    });
  });

  it("never prunes a CR mirrored from another repository", () => {
    const live = mirroredHub(["a", "b"]);
    const input = mirrorInput(filesOf(["a"]), NS, COMMIT_2);
    const elsewhere = { ...input, source: { ...input.source, repository: "https://git.example/other.git" } };
    expect(decidePrune(elsewhere, live, noFailures).state).toBe("none");
  });

  it("keeps a CR held this sync (a placement's departed cluster in its grace period) out of the prune", () => {
    const live = mirroredHub(["a", "b", "c"]);
    const held = [{ kind: "KnativeServing" as const, namespace: NS, name: "c" }];
    const report = decidePrune(mirrorInput(filesOf(["a"]), NS, COMMIT_2), live, { ...noFailures, held });
    expect(names(report.candidates)).toEqual(["b"]);
  });

  it("has nothing to do when every mirrored CR is still declared", () => {
    const report = decidePrune(mirrorInput(filesOf(["a"]), NS, COMMIT_2), mirroredHub(["a"]), noFailures);
    expect(report.state).toBe("none");
  });

  it("prunes nothing while any file is invalid, and the invalid file's CRs are not even candidates", () => {
    const broken = {
      ...crFile("b", { namespace: NS }),
      text: crFile("b", { namespace: NS }).text + "  bogus: 1\n",
    };
    const input = mirrorInput([...filesOf(["a"]), broken], NS, COMMIT_2);
    expect(input.model.files.map((f) => f.status)).toEqual(["valid", "failed"]);
    const report = decidePrune(input, mirroredHub(["a", "b", "c"]), noFailures);
    expect(report).toMatchObject({ state: "skipped", reason: "invalid-files" });
    expect(names(report.candidates)).toEqual(["c"]);
  });

  it("prunes nothing when Git declares no CR, unless allowEmpty", () => {
    const live = mirroredHub(["a", "b"]);
    expect(decidePrune(mirrorInput([], NS, COMMIT_2), live, noFailures)).toMatchObject({
      state: "skipped",
      reason: "empty-desired-set",
    });
    const allowed = mirrorInput([], NS, COMMIT_2, { allowEmpty: true, maxPruneFraction: 1 });
    expect(decidePrune(allowed, live, noFailures).state).toBe("pruned");
  });

  it("prunes nothing when pruning is off or an apply of the sync failed", () => {
    const live = mirroredHub(["a", "b"]);
    const off = mirrorInput(filesOf(["a"]), NS, COMMIT_2, { prune: false });
    expect(decidePrune(off, live, noFailures).reason).toBe("disabled");
    const input = mirrorInput(filesOf(["a"]), NS, COMMIT_2);
    expect(decidePrune(input, live, { applyFailures: 1, confirmedToken: undefined }).reason).toBe(
      "apply-failed",
    );
  });

  it("holds a prune of more than maxPruneFraction until its own token is confirmed", () => {
    const live = mirroredHub(NAMES);
    const input = mirrorInput(filesOf(["a"]), NS, COMMIT_2);
    const held = decidePrune(input, live, noFailures);
    expect(held).toMatchObject({
      state: "held",
      reason: "over-max-fraction",
      message:
        "pruning 9 of 10 mirrored CRs (90%) exceeds maxPruneFraction 50% and waits for a person's confirmation",
      confirmation: { namespace: NS, token: pruneToken(held.candidates) },
    });
    expect(names(held.candidates)).toEqual(NAMES.slice(1));

    const otherToken = pruneToken(held.candidates.slice(1));
    expect(decidePrune(input, live, { applyFailures: 0, confirmedToken: otherToken }).state).toBe("held");
    const token = held.confirmation!.token;
    expect(decidePrune(input, live, { applyFailures: 0, confirmedToken: token }).state).toBe("pruned");
  });

  it("binds the token to the CRs pruned, not to the commit", () => {
    const live = mirroredHub(NAMES);
    const at = (commit: string) => decidePrune(mirrorInput(filesOf(["a"]), NS, commit), live, noFailures);
    expect(at(COMMIT_1).confirmation).toEqual(at(COMMIT_2).confirmation);
  });

  it("allows up to maxPruneFraction without confirmation", () => {
    const report = decidePrune(
      mirrorInput(filesOf(NAMES.slice(5)), NS, COMMIT_2),
      mirroredHub(NAMES),
      noFailures,
    );
    expect(report.state).toBe("pruned");
    expect(names(report.candidates)).toEqual(NAMES.slice(0, 5));
  });

  it("says why it keeps the candidates, in words and in counts", () => {
    const live = mirroredHub(["a", "b", "c"]);
    const messageOf = (input: MirrorInput, failures = 0) =>
      decidePrune(input, live, { applyFailures: failures, confirmedToken: undefined }).message;
    expect(messageOf(mirrorInput(filesOf(["a"]), NS, COMMIT_2, { prune: false }))).toBe(
      "pruning is disabled (prune: false)",
    );
    const broken = (name: string) => ({
      ...crFile(name, { namespace: NS }),
      text: `${crFile(name, { namespace: NS }).text}  bogus: 1\n`,
    });
    expect(messageOf(mirrorInput([...filesOf(["a"]), broken("b")], NS, COMMIT_2))).toBe(
      "1 fleet file failed validation; nothing is pruned until every file is valid",
    );
    expect(messageOf(mirrorInput([broken("a"), broken("b")], NS, COMMIT_2))).toBe(
      "2 fleet files failed validation; nothing is pruned until every file is valid",
    );
    expect(messageOf(mirrorInput([], NS, COMMIT_2))).toBe(
      "the fleet repository declares no CR; pruning everything needs allowEmpty: true",
    );
    expect(messageOf(mirrorInput(filesOf(["a"]), NS, COMMIT_2), 1)).toBe(
      "1 CR failed to apply; nothing is pruned until every CR applies",
    );
    expect(messageOf(mirrorInput(filesOf(["a"]), NS, COMMIT_2), 3)).toBe(
      "3 CRs failed to apply; nothing is pruned until every CR applies",
    );
    // The safeguards in their order: pruning off says so before anything else that also holds.
    const everything = mirrorInput([broken("a")], NS, COMMIT_2, { prune: false });
    expect(decidePrune(everything, live, { applyFailures: 2, confirmedToken: undefined }).reason).toBe(
      "disabled",
    );
    expect(
      decidePrune(mirrorInput([broken("a")], NS, COMMIT_2), live, {
        applyFailures: 2,
        confirmedToken: undefined,
      }).reason,
    ).toBe("invalid-files");
    expect(
      decidePrune(mirrorInput([], NS, COMMIT_2), live, { applyFailures: 2, confirmedToken: undefined })
        .reason,
    ).toBe("empty-desired-set");
    // Nothing to prune: no words at all, even with every safeguard on.
    const none = decidePrune(mirrorInput(filesOf(["a", "b", "c"]), NS, COMMIT_2, { prune: false }), live, {
      applyFailures: 2,
      confirmedToken: undefined,
    });
    expect(none).toEqual({ state: "none", candidates: [], retained: [] });
  });

  it("lists candidates and retained CRs by kind, then namespace, then name, whatever the hub's order", () => {
    const retain = { [PRUNE_ANNOTATION]: PRUNE_DISABLED };
    const live = mirroredHub(["a", "b", "c", "d", "e", "f", "g"], { b: retain, f: retain }).reverse();
    const report = decidePrune(mirrorInput(filesOf(["a", "c", "d", "e"]), NS, COMMIT_2), live, noFailures);
    expect(names(report.candidates)).toEqual(["g"]);
    expect(names(report.retained)).toEqual(["b", "f"]);
    const many = decidePrune(
      mirrorInput(filesOf(["a"]), NS, COMMIT_2, { maxPruneFraction: 1 }),
      live,
      noFailures,
    );
    expect(names(many.candidates)).toEqual(["c", "d", "e", "g"]);
  });

  it("a held prune's record: its token and message, how many, and at most 20 of them named in order", () => {
    const all = Array.from({ length: 30 }, (_, i) => `cr-${String(i).padStart(2, "0")}`);
    const live = mirroredHub(all);
    const report = decidePrune(mirrorInput(filesOf(["cr-00"]), NS, COMMIT_2), live, noFailures);
    const record = HeldPruneSchema.parse(JSON.parse(heldPruneRecord(report)!));
    expect(record).toEqual({
      token: report.state === "held" && report.confirmation.token,
      message:
        "pruning 29 of 30 mirrored CRs (97%) exceeds maxPruneFraction 50% and waits for a person's confirmation",
      count: 29,
      candidates: all.slice(1, 21).map((name) => `KnativeServing ${NS}/${name}`),
    });
    // Nothing held, no record.
    const pruned = decidePrune(mirrorInput(filesOf(all.slice(1)), NS, COMMIT_2), live, noFailures);
    expect(pruned.state).toBe("pruned");
    expect(heldPruneRecord(pruned)).toBeUndefined();
  });

  it("a token names the set, not the order it came in", () => {
    const [a, b] = [
      { kind: "KnativeServing" as const, namespace: NS, name: "a" },
      { kind: "KnativeServing" as const, namespace: NS, name: "b" },
    ];
    expect(pruneToken([b, a])).toBe(pruneToken([a, b]));
    expect(pruneToken([a])).not.toBe(pruneToken([a, b]));
    expect(pruneToken([a, b])).toMatch(/^[0-9a-f]{16}$/);
  });

  it("retains a CR annotated prune: disabled, and does not count CRs already being deleted", () => {
    const live = mirroredHub(["a", "b", "c", "d"], { b: { [PRUNE_ANNOTATION]: PRUNE_DISABLED } }).map((o) =>
      o.metadata.name === "d"
        ? { ...o, metadata: { ...o.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } }
        : o,
    );
    const report = decidePrune(mirrorInput(filesOf(["a"]), NS, COMMIT_2), live, noFailures);
    expect(report.state).toBe("pruned"); // 1 of 3 (a, b, c): d is already on its way out
    expect(names(report.candidates)).toEqual(["c"]);
    expect(names(report.retained)).toEqual(["b"]);
  });
});
