// Writes the chart's KnativeServing and KnativeEventing CRDs from the zod schemas in src/api/.
// Run after every schema change: `npm run generate:crds` (test/unit/api fails while they are stale).
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CRD_DIRECTORY, renderKnativeCrds } from "../src/api/crd.ts";

const directory = join(dirname(fileURLToPath(import.meta.url)), "..", CRD_DIRECTORY);
mkdirSync(directory, { recursive: true });
for (const { fileName, content } of renderKnativeCrds()) {
  writeFileSync(join(directory, fileName), content);
  console.log(`wrote ${CRD_DIRECTORY}/${fileName}`);
}
