// Reaching a spoke through its ClusterProfile: the access module's public surface. It knows nothing of Knative.
export {
  ClusterAccess,
  type ClusterAccessOptions,
  type ClusterProfileChange,
  type ClusterProfileListener,
  type ResolveResult,
  type SpokeClient,
} from "./cluster-access.ts";
export { type ClusterReport, surveyClusters } from "./cluster-survey.ts";
export { AccessError } from "./errors.ts";
export { loadProviderConfig, ProviderConfigError, type ProviderConfigState } from "./provider-config.ts";
export { describeSpokeError, SpokeConnection } from "./spoke-connection.ts";
