import { describe, expect, it } from "vitest";
import { PLAN_MARKER, renderMarkdown } from "../../../src/plan/markdown.ts";
import { crText, placementText, rolloutText } from "../../support/fleet-files.ts";
import { planOfFiles, snapshotInventory } from "./support.ts";

// A pull request controls file names, YAML keys and values, and the refs' names; the hub's inventory the
// cluster names. Whatever section of the plan comment they reach (summary table, findings, validation
// errors, cluster sections, placements, rollout), none may add HTML, a link, an image, a table cell, a
// line or a heading.

const ATTACKS = [
  "<!-- hidden",
  "<img src=x onerror=alert(1)>",
  "![pixel](https://tracker.example/p.png)",
  "[✅ approved](https://evil.example)",
  "a|b|c",
  "``span`` end",
  "\n## fake heading",
];
const hostile = (i: number) => ATTACKS[i % ATTACKS.length]!;

/** The text outside code blocks and code spans (whose content is literal), per CommonMark. */
function outsideCode(markdown: string): string[] {
  const lines: string[] = [];
  let fence: string | undefined;
  for (const line of markdown.split("\n")) {
    const opener = /^(`{3,})/.exec(line)?.[1];
    if (fence !== undefined) {
      if (opener !== undefined && opener.length >= fence.length && line.trim() === opener) fence = undefined;
      continue;
    }
    if (opener !== undefined) {
      fence = opener;
      continue;
    }
    lines.push(withoutSpans(line));
  }
  expect(fence, "every code block is closed").toBeUndefined();
  return lines;
}

function withoutSpans(line: string): string {
  let out = "";
  let i = 0;
  while (i < line.length) {
    if (line[i] === "\\") {
      out += line.slice(i, i + 2);
      i += 2;
      continue;
    }
    if (line[i] !== "`") {
      out += line[i];
      i += 1;
      continue;
    }
    const run = /^`+/.exec(line.slice(i))![0];
    const close = new RegExp(`(?<!\`)${run}(?!\`)`, "g");
    close.lastIndex = i + run.length;
    const found = close.exec(line);
    if (found === null) {
      out += run;
      i += run.length;
    } else {
      out += "CODE";
      i = found.index + run.length;
    }
  }
  return out;
}

const OUR_TAGS = /<\/?(details|summary|b|br)>/g;

describe("hostile names in every section of the plan", { timeout: 60_000 }, () => {
  it("stay text: no HTML, link, image, heading, line or table cell of their own", async () => {
    const dir = (i: number) => `clusters/${hostile(i)}`;
    const placement = placementText({
      name: "p",
      spec: {
        clusterProfiles: [{ namespace: "fleet-system", name: "c-2" }],
        template: { spec: { version: "1.21", config: { network: { "x``y": "```\n## z" } } } },
      },
    });
    const rollout = (wave: string) =>
      rolloutText({ waves: [{ name: wave, clusterProfiles: [{ namespace: "fleet-system", name: "c-1" }] }] });
    // Paths that reach prose (findings), with every attack in them.
    const rolloutPath = `clusters/${ATTACKS.join(" ")}/rollout.yaml`;
    const refusedPath = `clusters/${[...ATTACKS].reverse().join(" ")}/refused.yaml`;
    const base = {
      [`${dir(0)}/s.yaml`]: crText({ name: "c-1-serving", cluster: "c-1" }),
      [`${dir(1)}/gone.yaml`]: crText({ name: "c-3-serving", cluster: "c-3" }),
      [rolloutPath]: rollout("canary"),
    };
    const head = {
      [`${dir(0)}/s.yaml`]: crText({ name: "c-1-serving", cluster: "c-1", version: "1.22" }),
      [`${dir(2)}/p.yaml`]: placement,
      [`${dir(3)}/broken.yaml`]: `${crText({ name: "c-4-serving", cluster: "c-4" })}  "${hostile(4)}${hostile(1)}": 1\n`,
      [refusedPath]: crText({ name: "c-5-serving", cluster: "c-5", namespace: "team-b" }),
      [rolloutPath]: rollout(`canary ${ATTACKS.join(" ")}`),
      [`${dir(6)}/x.yaml`]: crText({ name: "c-6-serving", cluster: "c-6", version: "1.23" }),
    };
    const plan = await planOfFiles(base, head, {
      inventory: snapshotInventory({
        clusters: ["c-1", "c-2", "c-3"].map((name) => ({
          namespace: "fleet-system",
          name,
          labels: { note: hostile(3) },
          properties: new Map(),
        })),
        decisions: [],
      }),
    });
    const text = renderMarkdown({ ...plan, repository: hostile(2), head: { ...plan.head, ref: hostile(0) } });
    // Every attack reached the comment somewhere (escaped): the test looks where it should.
    for (const attack of ATTACKS.slice(0, 6)) {
      expect(text.includes(attack) || text.includes(attack.replaceAll("<", "&lt;")), attack).toBe(true);
    }
    expect(plan.findings.length + plan.diagnostics.length).toBeGreaterThan(0);
    expect(text).toContain("### Placements");
    expect(text).toContain("### Rollout");
    expect(text).toContain("### Validation errors");

    const [marker, ...rest] = text.split("\n");
    expect(marker).toBe(PLAN_MARKER);
    const prose = outsideCode(rest.join("\n"));
    for (const line of prose) {
      const bare = line.replace(OUR_TAGS, "");
      expect(bare, line).not.toMatch(/<[!a-zA-Z/?]/);
      expect(bare, line).not.toMatch(/(?<!\\)!(?<!\\)\[/);
      expect(bare, line).not.toMatch(/(?<!\\)\]\(/);
      expect(line, line).not.toMatch(/^#+ fake/);
    }
    // Tables keep their columns: each row has as many unescaped borders as its header.
    let columns: number | undefined;
    for (const line of prose) {
      if (!line.startsWith("|")) {
        columns = undefined;
        continue;
      }
      const borders = line.match(/(?<!\\)\|/g)!.length;
      columns ??= borders;
      expect(borders, line).toBe(columns);
    }
  });
});
