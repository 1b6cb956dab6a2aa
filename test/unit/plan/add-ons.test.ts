import { describe, expect, it } from "vitest";
import { renderMarkdown } from "../../../src/plan/markdown.ts";
import { crText } from "../../support/fleet-files.ts";
import { planOfFiles, resourceOf } from "./support.ts";

// An event source or Security-Guard enabled in a change: the plan lists the objects it installs, and
// disabling it lists them as deleted (they were planned as nothing before: the schema took the fields and
// nothing was installed).

const EVENTING = "clusters/spoke-2/knative-eventing.yaml";
const SERVING = "clusters/spoke-1/knative-serving.yaml";
const eventing = (source?: Record<string, { enabled: boolean }>) =>
  crText({
    kind: "KnativeEventing",
    name: "spoke-2-eventing",
    cluster: "spoke-2",
    spec: { version: "1.23", ...(source && { source }) },
  });
const serving = (guard: boolean) =>
  crText({
    name: "spoke-1-serving",
    cluster: "spoke-1",
    spec: { version: "1.23", security: { securityGuard: { enabled: guard } } },
  });
const names = (refs: readonly { kind: string; name: string }[]) =>
  refs.map((ref) => `${ref.kind}/${ref.name}`);

describe("plan lists what an event source or Security-Guard installs", { timeout: 60_000 }, () => {
  it("enabling the redis source creates its objects; disabling it deletes them", async () => {
    const enabled = await planOfFiles(
      { [EVENTING]: eventing() },
      { [EVENTING]: eventing({ redis: { enabled: true } }) },
    );
    const created = names(resourceOf(enabled, "spoke-2-eventing").objects.created);
    expect(created).toContain("StatefulSet/redis-controller-manager");
    expect(created).toContain("CustomResourceDefinition/redisstreamsources.sources.knative.dev");
    expect(renderMarkdown(enabled)).toContain("redis-controller-manager");

    const disabled = await planOfFiles(
      { [EVENTING]: eventing({ redis: { enabled: true } }) },
      { [EVENTING]: eventing() },
    );
    expect(names(resourceOf(disabled, "spoke-2-eventing").objects.deleted)).toContain(
      "StatefulSet/redis-controller-manager",
    );
  });

  it("enabling Security-Guard creates the guard service and allows the queue-proxy pod info", async () => {
    const plan = await planOfFiles({ [SERVING]: serving(false) }, { [SERVING]: serving(true) });
    const objects = resourceOf(plan, "spoke-1-serving").objects;
    expect(names(objects.created)).toContain("Deployment/guard-service");
    const features = objects.changed.find((change) => change.name === "config-features");
    expect(features?.fields.map((field) => field.path)).toContainEqual(
      expect.stringContaining("queueproxy.mount-podinfo"),
    );
  });
});
