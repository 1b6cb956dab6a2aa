import { describe, expect, it } from "vitest";
import { promqlTemplateProblem, urlTemplateProblem } from "../../../src/fleet/gate-template.ts";
import {
  escapePromqlString,
  percentEncode,
  quoteRegex,
  renderQuery,
  renderUrl,
} from "../../../src/verify/template.ts";
import { cluster } from "../../support/fleet-files.ts";

// A gate's query and URL for one cluster. The values come from ClusterProfiles, written by whoever may
// write them: whatever they hold, a rendered query keeps the shape its author wrote (one string literal
// stays one), and a rendered URL keeps its host, path and query structure.

const spoke = cluster(
  "spoke-1",
  { env: "prod", "topology.kubernetes.io/region": "eu-1" },
  { location: "fra" },
);
const hostile = (value: string) => cluster("spoke-1", { env: value }, { location: value });
const text = (rendered: { text: string } | { problem: string }) => {
  if ("problem" in rendered) throw new Error(rendered.problem);
  return rendered.text;
};

/** The string literals of a PromQL query, undone as Prometheus' lexer reads them ("…" and '…'). */
function literals(query: string): string[] {
  const found: string[] = [];
  for (let i = 0; i < query.length; i++) {
    const quote = query[i];
    if (quote !== '"' && quote !== "'") continue;
    let value = "";
    for (i++; query[i] !== quote; i++) {
      if (i >= query.length || query[i] === "\n") throw new Error(`unterminated string in ${query}`);
      if (query[i] !== "\\") {
        value += query[i];
        continue;
      }
      const next = query[++i]!;
      if (next === "u") {
        value += String.fromCharCode(Number.parseInt(query.slice(i + 1, i + 5), 16));
        i += 4;
      } else if (next === "\\" || next === quote) value += next;
      else throw new Error(`escape \\${next} PromQL would not read as the value`);
    }
    found.push(value);
  }
  return found;
}

describe("a gate's PromQL query for a cluster", () => {
  it("fills in name, namespace, labels (prefixed keys too) and properties", () => {
    const query =
      'sum(rate(http_errors{cluster="{{ .cluster.name }}", ns="{{.cluster.namespace}}", env=\'{{ .cluster.labels.env }}\', ' +
      'region="{{ .cluster.labels.topology.kubernetes.io/region }}", at="{{ .cluster.properties.location }}"}[5m]))';
    expect(text(renderQuery(query, spoke))).toBe(
      'sum(rate(http_errors{cluster="spoke-1", ns="fleet-system", env=\'prod\', region="eu-1", at="fra"}[5m]))',
    );
  });

  it.each([
    ["a quote and a matcher", 'x", namespace!="'],
    ["braces and a placeholder", '}} {{ .cluster.name }} {a=~".*"}'],
    ["a newline, a CR, a tab, U+2028", "a\nb\rc\td\u2028e"],
    ["backslashes", '\\\\"\\'],
    ["a single quote", "it's"],
    ["a comment", '" # rest'],
  ])("keeps one string literal one, whatever the value holds: %s", (_what, value) => {
    const query = "up{a=\"{{ .cluster.labels.env }}\", b='{{ .cluster.properties.location }}'} > 0";
    const rendered = text(renderQuery(query, hostile(value)));
    expect(literals(rendered)).toEqual([value, value]);
    // Outside the literals, the query is exactly what its author wrote.
    expect(rendered.replace(/"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'/g, "S")).toBe("up{a=S, b=S} > 0");
  });

  it("regex-quotes a value in a =~ or !~ matcher, and only there", () => {
    const query = 'up{a=~"{{ .cluster.name }}", b !~ "x|{{ .cluster.name }}", c="{{ .cluster.name }}"}';
    const rendered = text(renderQuery(query, cluster("a.b+c")));
    expect(literals(rendered)).toEqual(["a\\.b\\+c", "x|a\\.b\\+c", "a.b+c"]);
    expect(quoteRegex("^(a|b)[c]{1}*?$\\")).toBe("\\^\\(a\\|b\\)\\[c\\]\\{1\\}\\*\\?\\$\\\\");
  });

  it("renders in one pass: a value holding a placeholder stays text", () => {
    const rendered = text(renderQuery('up{a="{{ .cluster.labels.env }}"}', hostile("{{ .cluster.name }}")));
    expect(literals(rendered)).toEqual(["{{ .cluster.name }}"]);
  });

  it("is a problem when the cluster has no such label or property, never an empty value", () => {
    expect(renderQuery('up{a="{{ .cluster.labels.team }}"}', spoke)).toEqual({
      problem: "cluster fleet-system/spoke-1 has no label for {{ .cluster.labels.team }}",
    });
    expect(renderQuery('up{a="{{ .cluster.properties.zone }}"}', spoke)).toEqual({
      problem: "cluster fleet-system/spoke-1 has no property for {{ .cluster.properties.zone }}",
    });
    // An inherited name is no label.
    expect(renderQuery('up{a="{{ .cluster.labels.constructor }}"}', spoke)).toMatchObject({
      problem: expect.any(String),
    });
  });

  it("escapes for the quote the literal was opened with", () => {
    expect(escapePromqlString(`a"b'c\\`, '"')).toBe(`a\\"b'c\\\\`);
    expect(escapePromqlString(`a"b'c\\`, "'")).toBe(`a"b\\'c\\\\`);
    expect(escapePromqlString("\n\u0000\u007f\u0085\u2029", '"')).toBe("\\u000a\\u0000\\u007f\\u0085\\u2029");
  });
});

describe("the query and URL templates the policy accepts", () => {
  it("accepts placeholders inside string literals only", () => {
    expect(promqlTemplateProblem('up{cluster="{{ .cluster.name }}"}')).toBeUndefined();
    expect(promqlTemplateProblem("up{cluster='{{ .cluster.name }}'}")).toBeUndefined();
    expect(promqlTemplateProblem('up{cluster="a\\"{{ .cluster.name }}"}')).toBeUndefined();
    for (const bare of [
      "up{cluster={{ .cluster.name }}}",
      "up > {{ .cluster.labels.limit }}",
      "up{a=`{{ .cluster.name }}`}",
      'up # "{{ .cluster.name }}"',
      'up{a="x\\{{ .cluster.name }}"}',
      'up{a="x"} + {{ .cluster.name }}',
    ]) {
      expect(promqlTemplateProblem(bare), bare).toMatch(/must be inside a "…" or '…' string/);
    }
  });

  it("names an unknown or unclosed placeholder", () => {
    expect(promqlTemplateProblem('up{a="{{ .cluster.labels }}"}')).toBe(
      "unknown placeholder {{ .cluster.labels }}; use {{ .cluster.name }}, {{ .cluster.namespace }}, {{ .cluster.labels.<key> }} or {{ .cluster.properties.<name> }}",
    );
    expect(promqlTemplateProblem('up{a="{{ .Cluster.name }}"}')).toMatch(
      /^unknown placeholder \{\{ \.Cluster\.name \}\}/,
    );
    expect(promqlTemplateProblem('up{a="{{ .cluster.name | printf "%q" }}"}')).toMatch(
      /^unknown placeholder/,
    );
    expect(promqlTemplateProblem('up{a="{{ .cluster.name"}')).toBe(
      '"{{" at character 7 is never closed with "}}"',
    );
    expect(urlTemplateProblem("http://x/{{ args.name }}")).toMatch(
      /^unknown placeholder \{\{ args\.name \}\}/,
    );
  });

  it("wants an http or https URL whatever the values", () => {
    expect(
      urlTemplateProblem("https://{{ .cluster.name }}.example.com/healthz?r={{ .cluster.labels.env }}"),
    ).toBeUndefined();
    expect(urlTemplateProblem("{{ .cluster.name }}/healthz")).toBe("must be an absolute http or https URL");
    expect(urlTemplateProblem("file:///etc/{{ .cluster.name }}")).toBe("must be an http or https URL");
    expect(urlTemplateProblem("http://user:pw@x/")).toBe("must not hold credentials (user:password@)");
  });
});

describe("a gate's URL for a cluster", () => {
  it("percent-encodes every value: no host, path, query or fragment can be changed", () => {
    const url =
      "http://127.0.0.1:8080/clusters/{{ .cluster.labels.env }}/healthz?at={{ .cluster.properties.location }}&x=1";
    const value = "a/../b?c=d&e#f @g:h%i'j(k)*!\"{}\n";
    const rendered = new URL(text(renderUrl(url, hostile(value))));
    expect(rendered.host).toBe("127.0.0.1:8080");
    expect(rendered.pathname.split("/")).toHaveLength(4);
    expect(decodeURIComponent(rendered.pathname.split("/")[2]!)).toBe(value);
    expect([...rendered.searchParams.keys()]).toEqual(["at", "x"]);
    expect(rendered.searchParams.get("at")).toBe(value);
    expect(rendered.hash).toBe("");
    expect(percentEncode("a b/c'(*)!")).toBe("a%20b%2Fc%27%28%2A%29%21");
  });

  it("is a problem when a value makes the host invalid, or cannot be encoded", () => {
    expect(renderUrl("http://{{ .cluster.labels.env }}.example/", hostile("a/b"))).toEqual({
      problem: "http://a%2Fb.example/ is no http or https URL",
    });
    expect(renderUrl("http://x/{{ .cluster.labels.env }}", hostile("\ud800"))).toEqual({
      problem: "a value of cluster fleet-system/spoke-1 cannot be put in a URL",
    });
  });
});
