import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RolloutGate } from "../../../src/fleet/rollout-schema.ts";
import {
  evaluateGates,
  type GateOptions,
  type GateResult,
  type SecretKeyRef,
} from "../../../src/verify/evaluate.ts";
import { cluster } from "../../support/fleet-files.ts";
import { type RunningPrometheus, startPrometheus } from "../../support/prometheus.ts";
import { waitUntil } from "../../support/wait.ts";

// Prometheus gates against a real Prometheus (Debian's package, as in test/integration/service/
// prometheus.test.ts; no sandbox needed) on loopback, scraping every second a loopback target whose series
// this test writes, hostile label values included: what the real PromQL parser makes of a rendered query is
// the test. Then the failures: Prometheus unreachable, a query it refuses, no answer in time, a token.

const SERIES = [
  'canary_errors{cluster="spoke-1"} 0.3',
  'canary_errors{cluster="spoke-2"} 0.01',
  'hostile{id="a\\"b\\\\c\\nd}"} 7',
  'hostile{id="a"} 1',
  'dotted{cluster="a.b"} 1',
  'dotted{cluster="axb"} 2',
  "",
].join("\n");

const listen = async (server: Server): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};
const close = (server: Server) => {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(resolve));
};

function gate(prometheus: Partial<NonNullable<RolloutGate["prometheus"]>>, name = "error-rate"): RolloutGate {
  return {
    name,
    prometheus: {
      query: 'max(canary_errors{cluster="{{ .cluster.name }}"})',
      threshold: { op: "<", value: 0.05 },
      onNoData: "Fail",
      timeout: "5s",
      ...prometheus,
    },
  };
}

describe("prometheus gates against a real Prometheus", () => {
  const scratch = mkdtempSync(join(tmpdir(), "knative-fleet-verify-"));
  const target = createServer((_req, res) => res.end(SERIES));
  let prometheus: RunningPrometheus | undefined;
  let url: string;
  const evaluate = async (
    g: RolloutGate,
    name: string,
    options: GateOptions = {},
    c = cluster(name),
  ): Promise<GateResult> => (await evaluateGates([g], c, { prometheusUrl: url, ...options }))[0]!;

  beforeAll(async () => {
    const targetUrl = new URL(await listen(target));
    prometheus = await startPrometheus(scratch, {
      scrape_configs: [{ job_name: "canary", static_configs: [{ targets: [targetUrl.host] }] }],
    });
    url = prometheus.url;
    await waitUntil(
      "Prometheus scraped the target",
      async () => {
        const res = await fetch(`${url}/api/v1/query?query=count(canary_errors)`).catch(() => undefined);
        const body = res?.ok
          ? ((await res.json()) as { data: { result: { value: [number, string] }[] } })
          : undefined;
        return body?.data.result[0]?.value[1] === "2" ? true : undefined;
      },
      60_000,
    );
  }, 90_000);

  afterAll(async () => {
    prometheus?.stop();
    await close(target);
    rmSync(scratch, { recursive: true, force: true });
  });

  it("passes a cluster under the threshold, fails one over it, naming query, value and threshold", async () => {
    const passing = await evaluate(gate({}), "spoke-2");
    expect(passing).toMatchObject({
      gate: "error-rate",
      cluster: "fleet-system/spoke-2",
      passed: true,
      requests: 1,
    });
    expect(passing.detail).toBe(
      'gate error-rate: max(canary_errors{cluster="spoke-2"}) = 0.01, wanted < 0.05',
    );
    const failing = await evaluate(gate({}), "spoke-1");
    expect(failing).toMatchObject({ passed: false, requests: 1 });
    expect(failing.detail).toBe(
      'gate error-rate: max(canary_errors{cluster="spoke-1"}) = 0.3, wanted < 0.05',
    );
    expect((await evaluate(gate({ threshold: { op: ">=", value: 0.3 } }), "spoke-1")).passed).toBe(true);
  });

  it("fails on no data unless onNoData is Pass", async () => {
    const noData = await evaluate(gate({}), "spoke-3");
    expect(noData).toMatchObject({ passed: false, requests: 1 });
    expect(noData.detail).toBe(
      'gate error-rate: max(canary_errors{cluster="spoke-3"}) = no data, wanted < 0.05 (onNoData: Fail)',
    );
    expect(await evaluate(gate({ onNoData: "Pass" }), "spoke-3")).toMatchObject({ passed: true });
    // 0/0 is NaN: no traffic is no data, not a pass of "!= 1".
    const nan = gate({
      query: 'sum(canary_errors{cluster="{{ .cluster.name }}"}) * 0 / 0',
      threshold: { op: "!=", value: 1 },
    });
    expect((await evaluate(nan, "spoke-1")).detail).toMatch(
      /= NaN \(no data\), wanted != 1 \(onNoData: Fail\)$/,
    );
  });

  it("selects exactly the series a hostile value names: quotes, backslashes, newlines, braces, regex", async () => {
    const hostile = cluster("spoke-1", {}, { id: 'a"b\\c\nd}' });
    const query = gate({
      query: 'sum(hostile{id="{{ .cluster.properties.id }}"})',
      threshold: { op: "==", value: 7 },
    });
    expect(await evaluate(query, "", {}, hostile)).toMatchObject({ passed: true });
    const regex = gate({
      query: 'sum(dotted{cluster=~"{{ .cluster.name }}"})',
      threshold: { op: "==", value: 1 },
    });
    const dotted = await evaluate(regex, "a.b");
    expect(dotted.detail).toBe('gate error-rate: sum(dotted{cluster=~"a\\\\.b"}) = 1, wanted == 1');
    expect(dotted.passed).toBe(true);
  });

  it("names each series when several come back, failing on the first over the threshold", async () => {
    const all = gate({
      query: 'canary_errors{cluster=~"spoke-.*", job="{{ .cluster.namespace }}-x"} or canary_errors',
    });
    const result = await evaluate(all, "spoke-1");
    expect(result.passed).toBe(false);
    expect(result.detail).toMatch(
      /= 0\.3 for \{__name__="canary_errors",cluster="spoke-1",instance="127\.0\.0\.1:\d+",job="canary"\}, 1 of 2 series fail, wanted < 0\.05$/,
    );
  });

  it("fails a query Prometheus refuses, with its error", async () => {
    const result = await evaluate(
      gate({ query: 'rate(canary_errors{cluster="{{ .cluster.name }}"})' }),
      "spoke-2",
    );
    expect(result).toMatchObject({ passed: false, requests: 1 });
    expect(result.detail).toMatch(
      new RegExp(
        `^gate error-rate: rate\\(canary_errors\\{cluster="spoke-2"\\}\\): Prometheus at ${url} answered 400: bad_data: `,
      ),
    );
  });

  it("fails when Prometheus is unreachable, even with onNoData: Pass", async () => {
    const gone = createServer();
    const address = await listen(gone);
    await close(gone);
    const result = await evaluate(gate({ url: address, onNoData: "Pass" }), "spoke-2");
    expect(result).toMatchObject({ passed: false, requests: 1 });
    expect(result.detail).toMatch(new RegExp(`Prometheus at ${address} .*ECONNREFUSED`));
  });

  it("fails without a request when no Prometheus URL is known", async () => {
    const result = (await evaluateGates([gate({})], cluster("spoke-2")))[0]!;
    expect(result).toMatchObject({ passed: false, requests: 0 });
    expect(result.detail).toBe(
      "gate error-rate: max(canary_errors{cluster=\"spoke-2\"}): no Prometheus URL (the gate's url, or the service config's Prometheus URL)",
    );
  });
});

describe("a prometheus gate's request", () => {
  it("sends the bearer token read from its Secret, and never shows it", async () => {
    const headers: (string | undefined)[] = [];
    const fake = createServer((req, res) => {
      headers.push(req.headers.authorization);
      res.end(JSON.stringify({ status: "success", data: { resultType: "scalar", result: [1, "0"] } }));
    });
    const url = await listen(fake);
    try {
      const secret = gate({ url, bearerTokenSecretRef: { name: "prom", key: "token" } });
      const read = async (ref: SecretKeyRef) => `s3cret-${ref.name}-${ref.key}`;
      const [ok] = await evaluateGates([secret], cluster("spoke-1"), { readSecret: read });
      expect(ok).toMatchObject({ passed: true, requests: 1 });
      expect(headers).toEqual(["Bearer s3cret-prom-token"]);
      expect(ok!.detail).not.toContain("s3cret");
      const [unread] = await evaluateGates([secret], cluster("spoke-1"));
      expect(unread).toMatchObject({ passed: false, requests: 0 });
      expect(unread!.detail).toMatch(
        /cannot read the bearer token \(Secret prom, key token\): no Secret reader was given$/,
      );
      expect(headers).toHaveLength(1);
    } finally {
      await close(fake);
    }
  });

  it("gives up after the gate's timeout", async () => {
    const silent = createServer(() => {});
    const url = await listen(silent);
    try {
      const [result] = await evaluateGates([gate({ url, timeout: "200ms" })], cluster("spoke-1"));
      expect(result).toMatchObject({ passed: false, requests: 1 });
      expect(result!.detail).toMatch(/Prometheus at http:\/\/127\.0\.0\.1:\d+ no answer within 200ms$/);
      expect(result!.durationMs).toBeLessThan(1_000);
    } finally {
      await close(silent);
    }
  });
});
