// The git source: what the service calls to follow the fleet repository and write status back to it.
export { deflateWithoutWebStreams } from "./deflate.ts";
export { type GitErrorKind, type GitOperation, GitSourceError } from "./errors.ts";
export {
  type CommitAndPushRequest,
  type CommitBase,
  GitSource,
  type GitSourceOptions,
  type Snapshot,
} from "./git-source.ts";
export { Poller, type PollerOptions } from "./poller.ts";
export { type BackoffPolicy, defaultBackoff } from "./retry.ts";
export {
  DEFAULT_MAX_FETCH_BYTES,
  type GitAuth,
  type GitSourceSpec,
  gitSourceSpecSchema,
  type SecretRef,
} from "./spec.ts";
export { readFleetTree, yamlLeftOutOfTree } from "./tree.ts";
export { blobIdOf, type FileChanges } from "./tree-edit.ts";
export { checkWebhookSecret, createWebhookHandler, type PushEvent, type WebhookOptions } from "./webhook.ts";
