import { describe, expect, it } from "vitest";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import { commitInMessage, shortCommit } from "../../../src/text/commit.ts";
import { markdownCell, markdownCode, markdownTable, markdownText } from "../../../src/text/markdown.ts";

// What a hostile value may try in a PR comment or the status README, and what it must render as.
const HOSTILE = [
  "<!-- everything below is hidden",
  "![pixel](https://tracker.example/p.png)",
  "[✅ No errors](https://evil.example)",
  "a|b",
  "``end the span`` early",
  "line\n## fake heading",
  "*bold* _em_ ~~gone~~ \\",
];

describe("Markdown escaping", () => {
  it("leaves no HTML, link, image, emphasis or line break in prose", () => {
    const escaped = HOSTILE.map(markdownText);
    expect(escaped).toEqual([
      "&lt;\\!-- everything below is hidden",
      "\\!\\[pixel\\](https://tracker.example/p.png)",
      "\\[✅ No errors\\](https://evil.example)",
      "a|b",
      "\\`\\`end the span\\`\\` early",
      "line\\\\n## fake heading",
      "\\*bold\\* \\_em\\_ \\~\\~gone\\~\\~ \\\\",
    ]);
  });

  it("keeps a table cell one cell", () => {
    expect(markdownCell("a|b")).toBe("a\\|b");
    expect(markdownCell("first\nsecond <b>")).toBe("first<br>second &lt;b&gt;");
  });

  it("keeps a code span one span on one line", () => {
    expect(markdownCode("clusters/a.yaml")).toBe("`clusters/a.yaml`");
    expect(markdownCode("a``b")).toBe("```a``b```");
    expect(markdownCode("`x`")).toBe("`` `x` ``");
    expect(markdownCode("a\nb")).toBe("`a\\nb`");
    expect(markdownCode("a|b", { inTable: true })).toBe("`a\\|b`");
  });

  it("writes a table of Markdown cells under its header", () => {
    expect(
      markdownTable(
        ["CR", "Why"],
        [
          [markdownCell("a|b"), "`x`"],
          ["c", ""],
        ],
      ),
    ).toBe("| CR | Why |\n| --- | --- |\n| a\\|b | `x` |\n| c |  |");
    expect(markdownTable(["CR"], [])).toBe("| CR |\n| --- |");
  });
});

describe("a commit cut short", () => {
  const sha = "0123456789abcdef0123456789abcdef01234567";
  it("is 7 characters in a table or a heading, 12 in a sentence", () => {
    expect(shortCommit(sha)).toBe("0123456");
    expect(commitInMessage(sha)).toBe("0123456789ab");
    expect(shortCommit("abc")).toBe("abc");
  });
});

describe("clusterProfileRef in a fleet file", () => {
  const file = (name: string, namespace: string) => ({
    path: "clusters/a.yaml",
    text: `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata: {name: a}
spec:
  clusterProfileRef:
    name: ${JSON.stringify(name)}
    namespace: ${JSON.stringify(namespace)}
`,
  });

  it("must name a ClusterProfile the hub could hold: a DNS-1123 subdomain in a DNS-1123 label namespace", () => {
    const errors = (name: string, namespace: string) =>
      buildFleetModel([file(name, namespace)], { defaultNamespace: "fleet" }).diagnostics.map(
        (d) => `${d.line}:${d.column} ${d.field}`,
      );
    expect(errors("spoke-1", "fleet-system")).toEqual([]);
    expect(errors("gke.europe-west1.prod", "fleet-system")).toEqual([]);
    expect(errors("<!-- x", "fleet-system")).toEqual(["6:11 spec.clusterProfileRef.name"]);
    expect(errors("spoke-1", "Fleet|System")).toEqual(["7:16 spec.clusterProfileRef.namespace"]);
    expect(errors("a".repeat(254), "fleet-system")).toEqual(["6:11 spec.clusterProfileRef.name"]);
  });
});
