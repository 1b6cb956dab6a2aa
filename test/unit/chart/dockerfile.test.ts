import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseDockerfile, readDockerfile, type Stage, stageEnv } from "../../support/dockerfile.ts";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";

/**
 * No Docker engine runs here, so the Dockerfile is checked as text: its stages, the non-root runtime, no
 * secrets; and its kodata script is run for real with a stand-in curl, to prove it lays the releases out
 * exactly like the upstream operator's kodata (../shared/knative-releases-all) from the right release URLs.
 */
const dockerfile = readDockerfile();
const argDefault = (name: string): string | undefined => {
  for (const arg of dockerfile.globalArgs) {
    const match = new RegExp(`^${name}=("?)(.*)\\1$`).exec(arg.args);
    if (match) return match[2];
  }
  return undefined;
};
const stage = (name: string): Stage => {
  const found = dockerfile.stages.find((s) => s.name === name);
  if (!found) throw new Error(`no stage ${name}`);
  return found;
};
/** The release versions the image bundles: build args of the Dockerfile, defaults of the kodata script. */
const RELEASE_ARGS = [
  "SERVING_VERSIONS",
  "EVENTING_VERSIONS",
  "KOURIER_VERSIONS",
  "ISTIO_VERSIONS",
  "CONTOUR_VERSIONS",
  "GATEWAY_API_VERSIONS",
  "KAFKA_SOURCE_VERSIONS",
  "EVENTING_SOURCE_VERSIONS",
  "SECURITY_GUARD_VERSIONS",
];
const kodataScript = readFileSync(join(repoRoot, "scripts", "fetch-kodata.sh"), "utf8");
const scriptDefault = (name: string): string | undefined =>
  new RegExp(`^: "\\$\\{${name}:=([^}]*)\\}"$`, "m").exec(kodataScript)?.[1];
const runs = (s: Stage) => s.instructions.filter((i) => i.keyword === "RUN").map((i) => i.args);
const runtime = dockerfile.stages.at(-1)!;

describe("Dockerfile", () => {
  it("builds in stages and runs on Node 24 slim", () => {
    expect(dockerfile.stages.map((s) => s.name)).toEqual([
      "build",
      "prod-deps",
      "kodata-fetch",
      "kodata-local",
      "kodata",
      undefined,
    ]);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a Dockerfile variable, literally.
    expect(runtime.from).toBe("${NODE_IMAGE}");
    expect(argDefault("NODE_IMAGE")).toBe("node:24-slim");
  });

  it("compiles with the locked dependencies and npm run build, and ships production dependencies only", () => {
    // npm's downloads sit in a build cache mount, never in a layer.
    const npmCache = "--mount=type=cache,target=/root/.npm,sharing=locked ";
    expect(runs(stage("build"))).toEqual([`${npmCache}npm install --no-audit --no-fund`, "npm run build"]);
    expect(runs(stage("prod-deps"))).toEqual([
      expect.stringMatching(
        /^--mount=type=cache,target=\/root\/\.npm,sharing=locked npm install --omit=dev --ignore-scripts\b/,
      ),
    ]);
    const copies = runtime.instructions.filter((i) => i.keyword === "COPY").map((i) => i.args);
    expect(copies).toEqual([
      "--from=prod-deps /src/node_modules ./node_modules",
      "--from=build /src/dist ./dist",
      "package.json ./",
      "--from=kodata /kodata /opt/knative-fleet/kodata",
    ]);
    // No compiler, no sources, no dev dependencies in the runtime stage.
    expect(runs(runtime).join("\n")).not.toMatch(/npm (ci|install)/);
  });

  it("runs as a numeric non-root user, with tini as PID 1 and the bin's dist/cli.js", () => {
    const users = runtime.instructions.filter((i) => i.keyword === "USER");
    expect(users).toHaveLength(1);
    const [uid, gid] = users[0]!.args.split(":").map(Number);
    expect(uid).toBeGreaterThan(0);
    expect(gid).toBeGreaterThan(0);
    // Nothing runs as root after the USER line.
    const afterUser = runtime.instructions.slice(runtime.instructions.indexOf(users[0]!) + 1);
    expect(afterUser.filter((i) => i.keyword === "RUN" || i.keyword === "USER")).toEqual([]);
    const bin = (
      JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { bin: Record<string, string> }
    ).bin["knative-fleet"];
    const entrypoint = JSON.parse(
      runtime.instructions.find((i) => i.keyword === "ENTRYPOINT")!.args,
    ) as string[];
    // Node's own flags may sit between node and the script; nothing else may.
    expect(entrypoint.slice(0, 3)).toEqual(["/usr/bin/tini", "--", "node"]);
    expect(entrypoint.at(-1)).toBe(`/opt/knative-fleet/app/${bin}`);
    expect(entrypoint.slice(3, -1).every((arg) => arg.startsWith("--"))).toBe(true);
    expect(JSON.parse(runtime.instructions.find((i) => i.keyword === "CMD")!.args)).toEqual(["run"]);
    expect(stageEnv(runtime).KO_DATA_PATH).toBe("/opt/knative-fleet/kodata");
  });

  it("its runtime environment is read as Docker reads ENV: pairs, quotes, escapes, continuation lines, the legacy form", () => {
    const text = [
      "FROM node:24-slim",
      "ENV A=1 \\",
      '    NODE_OPTIONS="--max-semi-space-size=1 --max-old-space-size=96" \\',
      "    B='it''s' C=a\\ b",
      "ENV LEGACY some value",
      "ENV A=2",
    ].join("\n");
    expect(stageEnv(parseDockerfile(text).stages[0]!)).toEqual({
      A: "2",
      NODE_OPTIONS: "--max-semi-space-size=1 --max-old-space-size=96",
      B: "its",
      C: "a b",
      LEGACY: "some value",
    });
    expect(() => stageEnv(parseDockerfile('FROM x\nENV A="open').stages[0]!)).toThrow("unterminated");
  });

  it("carries no secrets: no secret-like ARG/ENV, no copied credentials, a context that excludes everything else", () => {
    const all = [...dockerfile.globalArgs, ...dockerfile.stages.flatMap((s) => s.instructions)];
    for (const i of all.filter((i) => i.keyword === "ARG" || i.keyword === "ENV")) {
      expect(i.args, i.args).not.toMatch(/TOKEN|PASSWORD|SECRET|CREDENTIAL|_KEY\b|AUTH/i);
    }
    for (const i of all.filter((i) => i.keyword === "COPY" || i.keyword === "ADD")) {
      expect(i.args, i.args).not.toMatch(/\.npmrc|\.git\b|\.env|id_rsa|\.pem|\.key\b/);
      expect(i.keyword, "ADD fetches and unpacks implicitly; COPY is explicit").toBe("COPY");
    }
    const ignore = readFileSync(join(repoRoot, ".dockerignore"), "utf8")
      .split("\n")
      .filter((l) => l.trim() && !l.startsWith("#"));
    expect(ignore[0]).toBe("*");
    expect(ignore.slice(1).sort()).toEqual(
      [
        "!package.json",
        "!package-lock.json",
        "!tsconfig.json",
        "!tsconfig.build.json",
        "!src",
        "!scripts/fetch-kodata.sh",
      ].sort(),
    );
  });

  it("takes the releases from their public locations by default, or from a kodata-dir build context", () => {
    expect(argDefault("KODATA_FROM")).toBe("fetch");
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a Dockerfile variable, literally.
    expect(stage("kodata").from).toBe("kodata-${KODATA_FROM}");
    expect(stage("kodata-local").instructions.map((i) => `${i.keyword} ${i.args}`)).toEqual([
      "COPY --from=kodata-dir . /kodata",
      "RUN chmod -R a+rX,go-w /kodata",
    ]);
  });

  it("bundles the upstream operator's window, 1.20 to 1.23, listed once: in the kodata script", () => {
    expect(scriptDefault("SERVING_VERSIONS")).toBe("1.20.3 1.21.3 1.22.1 1.23.0");
    expect(scriptDefault("EVENTING_VERSIONS")).toBe("1.20.3 1.21.4 1.22.2 1.23.0");
    // The image's build args only override the script's list; without one, its default applies.
    for (const name of RELEASE_ARGS) {
      expect(dockerfile.globalArgs.map((arg) => arg.args)).toContain(name);
      expect(argDefault(name), name).toBeUndefined();
    }
  });

  describe("the kodata script, run with a stand-in curl", () => {
    const work = mkdtempSync(join(tmpdir(), "knative-fleet-kodata-"));
    afterAll(() => rmSync(work, { recursive: true, force: true }));
    const out = join(work, "kodata");

    // The kodata stage runs scripts/fetch-kodata.sh (the tests' and demo's fallback uses it too).
    const script = join(repoRoot, "scripts", "fetch-kodata.sh");
    const runsScript = stage("kodata-fetch").instructions.some((i) =>
      i.args.includes("fetch-kodata /kodata"),
    );
    const fakeCurl = join(work, "curl");
    // Writes the URL it was asked for into the -o file, so every file records where it came from.
    writeFileSync(
      fakeCurl,
      '#!/bin/sh\nout=""; url=""\nwhile [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift ;; https://*) url="$1" ;; esac; shift; done\nprintf "%s\\n" "$url" > "$out"\n',
    );
    chmodSync(fakeCurl, 0o755);
    // As the image build runs it: the build args unset, so the script's defaults apply.
    const env: NodeJS.ProcessEnv = { PATH: `${work}:${process.env.PATH}` };
    expect(runsScript).toBe(true);
    execFileSync("sh", [script, out], { env, stdio: "pipe" });

    const fetched = files(out);
    const upstream = files(knativeReleasesDir()).filter((f) => f.endsWith(".yaml"));

    it("produces exactly the upstream operator's kodata file layout", () => {
      expect(fetched.sort()).toEqual(upstream.sort());
    });

    it("fetches each file from its public release, at the version the upstream kodata holds", () => {
      for (const file of fetched) {
        const url = readFileSync(join(out, file), "utf8").trim();
        const [top, second] = file.split("/") as [string, string];
        const version = /\/(?:knative-)?v(\d+\.\d+\.\d+)\//.exec(url)?.[1];
        const asset = file.split("/").at(-1)!.replace(/^\d+-/, "");
        if (top === "ingress") {
          const ingress = file.split("/")[2]!;
          const repo = {
            kourier: "net-kourier",
            istio: "net-istio",
            contour: "net-contour",
            "gateway-api": "net-gateway-api",
          }[ingress];
          expect(url).toBe(
            `https://github.com/knative-extensions/${repo}/releases/download/knative-v${version}/${asset}`,
          );
          expect(version?.startsWith(`${second}.`), `${file}: ${url}`).toBe(true);
        } else if (top === "eventing-source") {
          const source = file.split("/")[2]!;
          const repo = source === "kafka" ? "eventing-kafka-broker" : `eventing-${source}`;
          expect(url).toBe(
            `https://github.com/knative-extensions/${repo}/releases/download/knative-v${version}/${asset}`,
          );
          expect(version?.startsWith(`${second}.`), `${file}: ${url}`).toBe(true);
        } else if (top === "security-guard") {
          expect(url).toBe(
            `https://github.com/knative-extensions/security-guard/releases/download/v${version}/${asset}`,
          );
          expect(version?.startsWith(`${second}.`), `${file}: ${url}`).toBe(true);
        } else {
          const project = top.replace("knative-", "");
          expect(url).toBe(
            `https://github.com/knative/${project}/releases/download/knative-v${second}/${asset}`,
          );
        }
        // The upstream file of the same path was released at the same version (when its objects say).
        const upstreamText = readFileSync(join(knativeReleasesDir(), file), "utf8");
        if (upstreamText.includes("app.kubernetes.io/version:")) {
          expect(upstreamText, `${file} is ${version} upstream`).toContain(
            `app.kubernetes.io/version: "${version}"`,
          );
        } else if (/eventing\.knative\.dev\/release: "v/.test(upstreamText)) {
          // The eventing sources' own repositories label their objects with the release instead.
          expect(upstreamText, `${file} is ${version} upstream`).toContain(
            `eventing.knative.dev/release: "v${version}"`,
          );
        }
      }
    });
  });
});

function files(dir: string): string[] {
  const walk = (path: string): string[] =>
    statSync(path).isDirectory() ? readdirSync(path).flatMap((name) => walk(join(path, name))) : [path];
  return walk(dir).map((path) => relative(dir, path));
}
