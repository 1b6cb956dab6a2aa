import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { SchemaNode } from "../../../src/api/crd.ts";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { readCrdSchema, sampleInstance } from "../../support/openapi-schema.ts";
import { upstreamOperatorCrdsDir } from "../../support/shared.ts";

/**
 * Wire compatibility, on a real API server: a CR that sets every field the upstream Knative Operator's CRD
 * declares is accepted by our CRD and comes back unchanged (nothing pruned, nothing refused).
 */
describe("CRs accepted by the upstream operator's CRDs are accepted by ours", () => {
  let hub: KubeClient;
  const namespace = "upstream-crs-test";

  beforeAll(async () => {
    hub = adminClient(loadSandbox().hub);
    await installFleetCrds(hub);
    await ensureNamespace(hub, namespace);
  });

  for (const [kind, file] of [
    ["KnativeServing", "operator.knative.dev_knativeservings.yaml"],
    ["KnativeEventing", "operator.knative.dev_knativeeventings.yaml"],
  ] as const) {
    it(`${kind}: every upstream spec field`, async () => {
      const schema = readCrdSchema(join(upstreamOperatorCrdsDir(), file), "v1beta1");
      const properties = schema.properties as Record<string, SchemaNode>;
      const spec = sampleInstance(properties.spec!, { ".version": "1.22.1" });
      const cr = {
        apiVersion: OPERATOR_API_VERSION,
        kind,
        metadata: { name: "every-field", namespace },
        spec,
      };
      const accepted = await hub.apply(cr, { dryRun: true });
      expect(accepted.spec).toEqual(spec);
    });
  }
});
