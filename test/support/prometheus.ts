import { spawn } from "node:child_process";
import { createWriteStream, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { freePort } from "../sandbox/processes.ts";
import { waitUntil } from "./wait.ts";

// A real Prometheus (Debian's `prometheus` package) on loopback, scraping every second what a test gives
// it: the observability tests, the verification gates' tests and the upgrade chain's gate on the sandbox.

export interface RunningPrometheus {
  /** `http://127.0.0.1:<port>` */
  url: string;
  stop(): void;
}

/**
 * Starts Prometheus with `config` (its `global` defaults to a 1 s scrape) in `scratch`, its log in
 * `prometheus.log` there, and resolves once it answers ready.
 */
export async function startPrometheus(
  scratch: string,
  config: { scrape_configs: unknown[]; rule_files?: string[]; global?: Record<string, string> },
): Promise<RunningPrometheus> {
  const file = join(scratch, "prometheus.yml");
  writeFileSync(
    file,
    stringify({
      global: { scrape_interval: "1s", evaluation_interval: "1s", scrape_timeout: "900ms" },
      ...config,
    }),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log = createWriteStream(join(scratch, "prometheus.log"));
  const prometheus = spawn(
    "prometheus",
    [
      `--config.file=${file}`,
      `--storage.tsdb.path=${join(scratch, "tsdb")}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  prometheus.stdout!.pipe(log);
  prometheus.stderr!.pipe(log);
  await waitUntil("Prometheus ready", async () => {
    const res = await fetch(`${url}/-/ready`).catch(() => undefined);
    return res?.ok ? true : undefined;
  });
  return { url, stop: () => prometheus.kill("SIGTERM") };
}
