import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

/** A temporary directory removed once the calling test file is done; call it at the file's top level. */
export function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "knative-fleet-access-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
