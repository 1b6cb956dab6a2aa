import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { renderMarkdown } from "../../../src/plan/markdown.ts";
import { crText } from "../../support/fleet-files.ts";
import { repoRoot } from "../../support/shared.ts";
import { planOfFiles } from "./support.ts";

// docs/plan.md quotes the lines a plan prints; they are checked against what it prints, so the page stays
// true when the wording changes.

const page = readFileSync(join(repoRoot, "docs", "plan.md"), "utf8");
/** The lines of the page's code blocks, indentation dropped. */
const quoted = (language: string) =>
  [...page.matchAll(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\\n\\s*\`\`\``, "g"))].flatMap((m) =>
    m[1]!.split("\n").map((line) => line.trim()),
  );

describe("docs/plan.md", () => {
  it("quotes the uncommitted-edits and unreadable-hub lines (the header's and the verdict) as the plan prints them", async () => {
    const head = crText({ name: "spoke-1-serving", cluster: "spoke-1", spec: {}, version: "1.21" });
    const plan = await planOfFiles({}, { "clusters/spoke-1/knative-serving.yaml": head });
    const text = renderMarkdown({
      ...plan,
      offlineReason:
        "cannot reach the hub https://10.0.0.1:6443: connection refused (ECONNREFUSED: connect ECONNREFUSED 10.0.0.1:6443)",
      uncommitted: [{ path: "clusters/spoke-1/knative-serving.yaml", change: "modified" }],
    });
    const printed = text.split("\n").map((line) => line.trim());
    const lines = quoted("text");
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(printed).toContain(line);
  });

  it("shows a long string's difference in the plan's own form", () => {
    const form = /^[-+] \S+: "….*\[.*\].*…" \(at character [\d,]+ of [\d,]+\)$/;
    const lines = quoted("diff");
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).toMatch(form);
  });

  it("names the -o json fields a plan has", async () => {
    const plan = await planOfFiles({}, {});
    for (const field of Object.keys(plan)) expect(page, field).toContain(`\`${field}\``);
    for (const field of ["schemaVersion", "offlineReason", "uncommitted", "spec"])
      expect(page).toContain(`\`${field}\``);
  });
});
