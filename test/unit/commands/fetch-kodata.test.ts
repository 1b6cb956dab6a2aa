import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";

// scripts/fetch-kodata.sh against an air-gapped copy of the release locations (file://): the real Serving
// 1.23.0 assets, laid out as their public release URLs are, under a base URL of our own.

const run = promisify(execFile);
const SCRIPT = join(repoRoot, "scripts", "fetch-kodata.sh");
const SERVING = "1.23.0";
/** Release asset -> the kodata file it becomes (the script's own mapping). */
const ASSETS: Record<string, string> = {
  "serving-crds.yaml": "1-serving-crds.yaml",
  "serving-core.yaml": "2-serving-core.yaml",
  "serving-hpa.yaml": "3-serving-hpa.yaml",
  "serving-post-install-jobs.yaml": "4-serving-post-install-jobs.yaml",
};

/** A mirror of the release locations holding Serving's assets, but for `leaveOut`. */
function mirror(leaveOut: string[] = []): string {
  const base = mkdtempSync(join(tmpdir(), "kodata-mirror-"));
  const dir = join(base, "knative", "serving", "releases", "download", `knative-v${SERVING}`);
  mkdirSync(dir, { recursive: true });
  for (const [asset, kodata] of Object.entries(ASSETS)) {
    if (!leaveOut.includes(asset))
      copyFileSync(join(knativeReleasesDir(), "knative-serving", SERVING, kodata), join(dir, asset));
  }
  return base;
}

const fetchKodata = (args: string[], env: Record<string, string> = {}) =>
  run("sh", [SCRIPT, ...args], {
    env: {
      ...process.env,
      ...env,
      SERVING_VERSIONS: SERVING,
      EVENTING_VERSIONS: "none",
      KOURIER_VERSIONS: "none",
      ISTIO_VERSIONS: "none",
      CONTOUR_VERSIONS: "none",
      GATEWAY_API_VERSIONS: "none",
      KAFKA_SOURCE_VERSIONS: "none",
      EVENTING_SOURCE_VERSIONS: "none",
      SECURITY_GUARD_VERSIONS: "none",
    },
  });

describe("fetch-kodata.sh", () => {
  it("fetches from a mirror's base URL into the kodata layout", async () => {
    const out = mkdtempSync(join(tmpdir(), "kodata-out-"));
    await fetchKodata(["--base-url", `file://${mirror()}`, out]);
    const dir = join(out, "knative-serving", SERVING);
    expect(readdirSync(dir).sort()).toEqual(Object.values(ASSETS).sort());
    for (const file of Object.values(ASSETS)) {
      expect(readFileSync(join(dir, file), "utf8")).toBe(
        readFileSync(join(knativeReleasesDir(), "knative-serving", SERVING, file), "utf8"),
      );
    }
    expect(readdirSync(out)).toEqual(["knative-serving"]); // no staging folder left
  });

  it("a failed run leaves nothing that looks like a release, and keeps what was there", async () => {
    const out = mkdtempSync(join(tmpdir(), "kodata-out-"));
    mkdirSync(join(out, "knative-serving", "1.22.1"), { recursive: true });
    const failed = fetchKodata(["--base-url", `file://${mirror(["serving-hpa.yaml"])}`, out]);
    await expect(failed).rejects.toMatchObject({ code: expect.any(Number) });
    expect(existsSync(join(out, "knative-serving", SERVING))).toBe(false);
    expect(readdirSync(out)).toEqual(["knative-serving"]);
    expect(readdirSync(join(out, "knative-serving"))).toEqual(["1.22.1"]);
  });

  it("refuses a base URL that is neither https nor file, saying so", async () => {
    const refused = fetchKodata([
      "--base-url",
      "http://mirror.example/",
      mkdtempSync(join(tmpdir(), "kodata-out-")),
    ]);
    await expect(refused).rejects.toMatchObject({
      code: 2,
      stderr: "fetch-kodata: the base URL must be https:// or file://, got http://mirror.example\n",
    });
  });

  it("prints its usage for --help and -h, and exits 0 without fetching or creating anything", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "kodata-help-"));
    for (const flag of ["--help", "-h"]) {
      const { stdout, stderr } = await run("sh", [SCRIPT, flag], { cwd });
      expect(stdout, flag).toMatch(/^Usage: fetch-kodata\.sh \[--base-url URL\] \[OUT_DIR\]\n/);
      expect(stdout, flag).toContain("KNATIVE_RELEASES_BASE_URL");
      expect(stderr, flag).toBe("");
    }
    expect(readdirSync(cwd)).toEqual([]);
  });

  it("names --base-url when a download fails (a loopback port that refuses, no network)", async () => {
    const refused = fetchKodata(
      ["--base-url", "https://127.0.0.1:1", mkdtempSync(join(tmpdir(), "kodata-out-"))],
      { FETCH_KODATA_RETRIES: "0" },
    );
    await expect(refused).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining(
        "fetch-kodata: could not fetch https://127.0.0.1:1/knative/serving/releases/download/knative-v1.23.0/serving-crds.yaml",
      ),
    });
    await expect(refused).rejects.toMatchObject({ stderr: expect.stringContaining("--base-url") });
  });
});
