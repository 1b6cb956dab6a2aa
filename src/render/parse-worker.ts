import { parentPort, workerData } from "node:worker_threads";
import type { ManifestFile } from "./files.ts";
import { type Manifest, ManifestParseError, parseManifests } from "./manifest.ts";

// The far side of parseManifestFiles (manifest.ts): parses the files it is given and posts the objects back.

export type ParseAnswer = { manifests: Manifest[] } | { error: string; parseError: boolean };

const { files } = workerData as { files: ManifestFile[] };
let answer: ParseAnswer;
try {
  answer = { manifests: files.flatMap((file) => parseManifests(file.text, file.origin)) };
} catch (err) {
  answer = {
    error: err instanceof Error ? err.message : String(err),
    parseError: err instanceof ManifestParseError,
  };
}
parentPort!.postMessage(answer);
