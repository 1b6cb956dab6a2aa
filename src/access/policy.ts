import { z } from "zod";

/**
 * Operator choices that open spoke access beyond the safe defaults (config `access`, chart
 * `multicluster.access`). Each one lets whoever writes a ClusterProfile steer more of what the controller
 * does with its credentials, so each is off unless set.
 */
export const AccessPolicySchema = z
  .strictObject({
    /**
     * Let the exec extension name another cluster's credential than the ClusterProfile's own (`clusterName`,
     * kubeconfig-secretreader's `name` and `namespace`), read from any namespace the plugin can read. Off: a
     * ClusterProfile author cannot make the plugin fetch a Secret meant for another cluster and send it to a
     * server of their choice.
     */
    allowForeignCredentialNames: z.boolean().default(false),
    /** Use http:// servers and insecure-skip-tls-verify (with a warning) instead of refusing them. */
    allowInsecureServers: z.boolean().default(false),
    /**
     * ClusterProfile namespace -> the namespace the credential plugins read its credential Secrets from,
     * one of its own for each. The bundled plugins find a credential by the ClusterProfile's name alone, so
     * with ClusterProfiles in more than one namespace, `team-b/spoke-1` would otherwise read the Secret of
     * `team-a/spoke-1`. Needed for every ClusterProfile namespace once there are several.
     */
    credentialNamespaces: z.record(z.string().min(1), z.string().min(1)).default({}),
  })
  .superRefine((policy, ctx) => {
    const owner = new Map<string, string>();
    for (const [profiles, credentials] of Object.entries(policy.credentialNamespaces)) {
      const other = owner.get(credentials);
      if (other !== undefined)
        ctx.addIssue({
          code: "custom",
          path: ["credentialNamespaces", profiles],
          message: `${credentials} already holds the credentials of ClusterProfile namespace ${other}: each needs one of its own, or each reads the other's`,
        });
      owner.set(credentials, profiles);
    }
  });
export type AccessPolicy = z.infer<typeof AccessPolicySchema>;

export const SAFE_ACCESS_POLICY: AccessPolicy = AccessPolicySchema.parse({});
