import { createHash } from "node:crypto";

// A placement's CR for a cluster is named `<placement>-<cluster>`: readable, and the same every time for the
// same pair, so nothing is renamed (which would uninstall and reinstall) when other clusters come and go.
// The name must be a DNS-1123 label of at most 63 characters: it is also the value of the anchor's
// operator.knative.dev/cr-name label on the spoke. ClusterProfile names may be DNS subdomains (dots, 253
// characters): when `<placement>-<cluster>` is not a valid label as it stands, it is cleaned, cut and
// suffixed with a hash of the exact pair, so two different clusters never end up with one name.

const MAX_CR_NAME_LENGTH = 63;
const HASH_LENGTH = 8;
const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function placementCrName(placementName: string, cluster: { namespace: string; name: string }): string {
  const plain = `${placementName}-${cluster.name}`;
  if (plain.length <= MAX_CR_NAME_LENGTH && DNS_1123_LABEL.test(plain)) return plain;
  const hash = createHash("sha256")
    .update(`${placementName}\n${cluster.namespace}\n${cluster.name}`)
    .digest("hex")
    .slice(0, HASH_LENGTH);
  const cleaned = plain
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/-+/g, "-")
    .replace(/^-+/, "");
  const stem = cleaned.slice(0, MAX_CR_NAME_LENGTH - HASH_LENGTH - 1).replace(/-+$/, "");
  return stem === "" ? `c-${hash}` : `${stem}-${hash}`;
}
