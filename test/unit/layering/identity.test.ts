import { describe, expect, it } from "vitest";
import { matchesOutside } from "./support.ts";

// A hub CR and the cluster it installs on are each named in one home, src/fleet/identity.ts: the types,
// the one spelling maps, the shard key and the metric labels read (formatIdentity, clusterKey,
// clusterLabel), and the readers (identityOf, clusterRefOf, targetOf). A second spelling drifts (a
// reference without a namespace was `/name` to one reader and "hub" to another, splitting a shard or a
// metric series), and a second spelling of a CR gets parsed back into its parts.

const HOME = "fleet/identity.ts";

/** The spoke object's key (kube/object.ts refKey, `group/kind/namespace/name`): not a hub CR's. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: refKey's source text, literally.
const SPOKE_OBJECT_KEY = "kube/object.ts: ${r.kind}/${r.namespace}/${r.name}";

const outsideHome = (pattern: RegExp, allowed: readonly string[] = []): string[] =>
  matchesOutside(pattern, [HOME]).filter((site) => !allowed.includes(site));

describe("one home for a hub CR's identity and its cluster", () => {
  it("types and reads a cluster reference there alone (api/knative.ts keeps the schema it derives from)", () => {
    const copies = outsideHome(
      /(?:type|interface) \w*ClusterRef\s*[=<{]|(?:function|const) (?:clusterRefOf|targetOf|clusterKey|clusterLabel)\b|export \{[^}]*\b(?:clusterRefOf|targetOf|clusterKey|clusterLabel)\b[^}]*\}/g,
    );
    expect(copies).toEqual([]);
  });

  it("spells a cluster `namespace/name` only in clusterKey", () => {
    // `${ref.namespace}/${ref.name}`, `${spec.clusterProfileRef.namespace}/${…}`, `${profileRef…}`, …
    const spelt = outsideHome(/\$\{[^}`]*ref\??\.namespace\}\/\$\{[^}`]*ref\??\.name\}/gi);
    expect(spelt).toEqual([]);
  });

  it("keys a CR by formatIdentity only: no `kind/namespace/name` template", () => {
    const keys = outsideHome(/\$\{[^}`]*kind\}\/\$\{[^}`]*namespace\}\/\$\{[^}`]*name\}/gi, [
      SPOKE_OBJECT_KEY,
    ]);
    expect(keys).toEqual([]);
  });

  it("never parses a CR's spelling back into its parts", () => {
    const parsed = outsideHome(/split\(\s*["'`]\/["'`]\s*\)\s*as \[\s*KnativeKind/g);
    expect(parsed).toEqual([]);
  });

  it("reads a CR's cluster with targetOf: no cast of spec.clusterProfileRef", () => {
    const casts = outsideHome(/as \{\s*clusterProfileRef\?/g);
    expect(casts).toEqual([]);
  });
});
