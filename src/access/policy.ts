import { z } from "zod";

/**
 * Operator choices that open spoke access beyond the safe defaults (config `access`, chart
 * `multicluster.access`). Each one lets whoever writes a ClusterProfile steer more of what the controller
 * does with its credentials, so each is off unless set.
 */
export const AccessPolicySchema = z.strictObject({
  /**
   * Let the exec extension name another cluster's credential than the ClusterProfile's own (`clusterName`,
   * kubeconfig-secretreader's `name`). Off: a ClusterProfile author cannot make the plugin fetch a Secret
   * meant for another cluster and send it to a server of their choice.
   */
  allowForeignCredentialNames: z.boolean().default(false),
  /** Use http:// servers and insecure-skip-tls-verify (with a warning) instead of refusing them. */
  allowInsecureServers: z.boolean().default(false),
});
export type AccessPolicy = z.infer<typeof AccessPolicySchema>;

export const SAFE_ACCESS_POLICY: AccessPolicy = AccessPolicySchema.parse({});
