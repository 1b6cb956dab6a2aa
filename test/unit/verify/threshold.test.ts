import { describe, expect, it } from "vitest";
import { THRESHOLD_OPS } from "../../../src/fleet/rollout-schema.ts";
import { resultOf } from "../../../src/verify/prometheus.ts";
import { judge, meets, type Sample, sampleValue } from "../../../src/verify/threshold.ts";

const one = (value: number) => [{ labels: {}, value }];

describe("a Prometheus result against a gate's threshold", () => {
  it("compares with each operator, at, below and above the limit", () => {
    const table = THRESHOLD_OPS.map((op) => [
      op,
      [0.04, 0.05, 0.06].map((v) => meets(v, { op, value: 0.05 })),
    ]);
    expect(Object.fromEntries(table)).toEqual({
      "<": [true, false, false],
      "<=": [true, true, false],
      ">": [false, false, true],
      ">=": [false, true, true],
      "==": [false, true, false],
      "!=": [true, false, true],
    });
  });

  it("reads Prometheus' sample values, NaN and infinities included", () => {
    expect(["0.31", "1e-3", "+Inf", "-Inf", "NaN", "", "x"].map(sampleValue)).toEqual([
      0.31,
      0.001,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      Number.NaN,
      Number.NaN,
      Number.NaN,
    ]);
  });

  it("takes no sample, or only NaN (0/0 over no traffic), as no data, even for !=", () => {
    expect(judge([], { op: "<", value: 1 })).toEqual({ passed: undefined, observed: "no data" });
    expect(judge(one(Number.NaN), { op: "!=", value: 1 })).toEqual({
      passed: undefined,
      observed: "NaN (no data)",
    });
  });

  it("wants every series to meet the threshold, and names the first that does not", () => {
    const samples: Sample[] = [
      { labels: { cluster: "a" }, value: 0.01 },
      { labels: { cluster: "b", code: "500" }, value: 0.3 },
      { labels: { cluster: "c" }, value: Number.NaN },
      { labels: { cluster: "d" }, value: 0.2 },
    ];
    expect(judge(samples, { op: "<", value: 0.05 })).toEqual({
      passed: false,
      observed: '0.3 for {cluster="b",code="500"}, 2 of 3 series fail',
    });
    expect(judge(samples, { op: "<", value: 1 })).toEqual({
      passed: true,
      observed: '0.3 for {cluster="b",code="500"}, the closest of 3 series',
    });
    expect(judge(samples, { op: ">", value: 0 })).toEqual({
      passed: true,
      observed: '0.01 for {cluster="a"}, the closest of 3 series',
    });
    expect(judge(one(0.31), { op: "<", value: 0.05 })).toEqual({ passed: false, observed: "0.31" });
    expect(judge(one(0.01), { op: "<", value: 0.05 })).toEqual({ passed: true, observed: "0.01" });
  });
});

describe("the query API's answer", () => {
  const ok = (data: unknown) => resultOf(200, JSON.stringify({ status: "success", data }));

  it("reads a vector and a scalar", () => {
    expect(
      ok({
        resultType: "vector",
        result: [{ metric: { cluster: "spoke-1" }, value: [1700000000.1, "0.3"] }],
      }),
    ).toEqual({ ok: true, samples: [{ labels: { cluster: "spoke-1" }, value: 0.3 }] });
    expect(ok({ resultType: "scalar", result: [1700000000, "+Inf"] })).toEqual({
      ok: true,
      samples: [{ labels: {}, value: Number.POSITIVE_INFINITY }],
    });
  });

  it("fails on a range vector, an error status, a body that is not the API's", () => {
    expect(ok({ resultType: "matrix", result: [] })).toEqual({
      ok: false,
      reason: "the query returns a matrix; a gate needs a vector or a scalar",
    });
    expect(
      resultOf(
        400,
        JSON.stringify({ status: "error", errorType: "bad_data", error: "parse error at char 3" }),
      ),
    ).toEqual({ ok: false, reason: "answered 400: bad_data: parse error at char 3" });
    expect(resultOf(502, "<html>Bad gateway</html>")).toEqual({
      ok: false,
      reason: "answered 502 with a body that is not JSON: <html>Bad gateway</html>",
    });
    expect(ok({ resultType: "vector", result: [{ metric: {}, value: [1, 2] }] })).toEqual({
      ok: false,
      reason: "answered a result that is not Prometheus' format",
    });
  });
});
