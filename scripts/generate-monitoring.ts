// Writes docs/monitoring/knative-fleet.rules.yaml, the chart's alert rules as a plain Prometheus rules file
// (the real helm renders charts/knative-fleet with its defaults). Run after changing the rules or their
// defaults: `npm run generate:monitoring` (test/integration/chart/monitoring.test.ts fails while it is stale).
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { PLAIN_RULES_FILE, plainRulesFile } from "../test/support/helm.ts";
import { repoRoot } from "../test/support/shared.ts";

const path = join(repoRoot, PLAIN_RULES_FILE);
mkdirSync(dirname(path), { recursive: true });
writeFileSync(path, plainRulesFile());
console.log(`wrote ${PLAIN_RULES_FILE}`);
