#!/usr/bin/env node
// The entry of `knative-fleet` (package.json bin). It checks the Node.js version before anything else loads:
// on an older Node a dependency dies at import with a stack trace that names no version (undici on Node 20).
// So this file is plain syntax that old Node parses, and it loads the CLI only after the check.
// MINIMUM_NODE is the lowest version package.json `engines` allows (test/unit/cli/node-version.test.ts).
// An older Node is a command that could not do its job: exit 2, EXIT_ERROR of commands/command.ts (which this
// file cannot import before the check; test/unit/cli/docs-cli.test.ts holds the two equal).

const MINIMUM_NODE = "22.19.0";
const EXIT_ERROR = 2;

function isOlder(version: string, minimum: string): boolean {
  const have = version.split(".").map(Number);
  const need = minimum.split(".").map(Number);
  for (let i = 0; i < need.length; i++) {
    if (have[i] !== need[i]) return (have[i] || 0) < (need[i] || 0);
  }
  return false;
}

if (isOlder(process.versions.node, MINIMUM_NODE)) {
  process.stderr.write(`knative-fleet needs Node.js >= ${MINIMUM_NODE}; this is ${process.version}\n`);
  process.exit(EXIT_ERROR);
}
// A completion script asking for values (contexts, namespaces, refs) loads only what that needs: a Tab is quick.
if (process.argv[2] === "__complete") import("./commands/complete.ts").then((c) => c.completeFromProcess());
else import("./commands/main.ts").then((cli) => cli.runFromProcess());
