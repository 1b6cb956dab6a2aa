import { execFile } from "node:child_process";
import { copyFile, mkdir, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { repoRoot } from "./shared.ts";

const execFileAsync = promisify(execFile);

/**
 * What a fresh clone of the checkout holds, copied into `into`: the files git tracks (and new ones it does
 * not ignore), as the working tree has them. No node_modules, no dist.
 */
export async function copyCheckout(into: string): Promise<void> {
  const { stdout } = await execFileAsync(
    "git",
    ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    { cwd: repoRoot, maxBuffer: 16 << 20 },
  );
  for (const file of stdout.split("\0").filter((f) => f !== "")) {
    const exists = await stat(join(repoRoot, file)).then(
      (s) => s.isFile(),
      () => false,
    );
    if (!exists) continue; // deleted in the working tree
    await mkdir(dirname(join(into, file)), { recursive: true });
    await copyFile(join(repoRoot, file), join(into, file));
  }
}
