import { GATE_SECRET_LABEL } from "../api/labels.ts";
import type { KubeClient } from "../kube/client.ts";
import type { SecretKeyRef } from "./evaluate.ts";

// A prometheus gate's bearer token, read from a Secret in knative-fleet's namespace. The policy comes from
// Git and names both the Secret and (with its own `url`) where the token is sent, so a Secret is readable
// here only when a person marked it for this use: otherwise a pull request could send the rollout's key or
// the repository's credentials to a server of its choosing.

export async function readSecretKey(hub: KubeClient, namespace: string, ref: SecretKeyRef): Promise<string> {
  const secret = await hub.get("v1", "Secret", namespace, ref.name);
  if (secret === undefined) throw new Error(`Secret ${namespace}/${ref.name} not found`);
  if (secret.metadata.labels?.[GATE_SECRET_LABEL] !== "true") {
    throw new Error(
      `Secret ${namespace}/${ref.name} is not labelled ${GATE_SECRET_LABEL}=true, which a verification gate needs to read it`,
    );
  }
  const encoded = (secret as { data?: Record<string, string> }).data?.[ref.key];
  if (encoded === undefined) throw new Error(`Secret ${namespace}/${ref.name} has no key ${ref.key}`);
  return Buffer.from(encoded, "base64").toString("utf8").trim();
}
