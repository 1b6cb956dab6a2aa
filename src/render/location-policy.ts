import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { realpath, stat } from "node:fs/promises";
import { BlockList, isIP } from "node:net";
import { resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";

// spec.manifests / spec.additionalManifests come from fleet files, which pull requests edit and `plan` reads
// on CI runners: without a policy any author could make the reconciler fetch any URL (cloud metadata,
// loopback services) or read any file (service account tokens, /dev/zero). Which locations are read is the
// operator's decision, made here once for the service and `plan`.

const MiB = 1024 * 1024;

export const LocationPolicySchema = z.strictObject({
  allowedPrefixes: z
    .array(z.string().min(1))
    .default([])
    .describe(
      "URL prefixes a manifest location may start with (e.g. https://github.com/knative/serving/releases/download/); none by default, so every URL location is refused.",
    ),
  allowHttp: z.boolean().default(false).describe("Allow plain http:// locations (https only by default)."),
  allowPrivateNetworks: z
    .boolean()
    .default(false)
    .describe("Allow locations whose host resolves to a loopback, link-local or private address."),
  maxBytesPerLocation: z
    .number()
    .int()
    .positive()
    .default(32 * MiB)
    .describe("The most one location may hold; reading stops there."),
  maxBytesPerResource: z
    .number()
    .int()
    .positive()
    .default(64 * MiB)
    .describe("The most all the locations of one CR may hold together."),
});
export type LocationPolicy = z.infer<typeof LocationPolicySchema>;

export const DEFAULT_LOCATION_POLICY: LocationPolicy = LocationPolicySchema.parse({});

/** A location the policy refuses; the message says which setting would allow it. */
export class LocationRefusedError extends Error {
  override name = "LocationRefusedError";
}

/** What a location is, once checked: a URL to fetch (pin taken off) or a local path inside kodata. */
export type CheckedLocation =
  | { kind: "url"; url: URL; sha256?: string }
  | { kind: "path"; path: string; sha256?: string };

const PIN = /#sha256=([0-9a-f]{64})$/i;

/**
 * Checks a location against the policy. A pin rides in the URL's fragment (`…/serving.yaml#sha256=<hex>`):
 * upstream's Manifest type has only `URL`, a fragment is never sent to the server, so the CR stays valid
 * for the upstream CRD and operator.
 */
export async function checkLocation(
  location: string,
  policy: LocationPolicy,
  kodataDir: string | undefined,
): Promise<CheckedLocation> {
  const pin = PIN.exec(location)?.[1]?.toLowerCase();
  const bare = pin ? location.slice(0, -("#sha256=".length + 64)) : location;
  const sha256 = pin ? { sha256: pin } : {};
  if (/^[a-z][a-z0-9+.-]*:/i.test(bare) && !/^file:/i.test(bare)) {
    let url: URL;
    try {
      url = new URL(bare);
    } catch {
      throw new LocationRefusedError(`manifest location ${bare} is not a valid URL`);
    }
    checkUrl(url, policy);
    return { kind: "url", url, ...sha256 };
  }
  return { kind: "path", path: await checkLocalPath(bare, kodataDir), ...sha256 };
}

/** Scheme and prefix; run again on every redirect. */
export function checkUrl(url: URL, policy: LocationPolicy): void {
  const shown = `${url.origin}${url.pathname}`;
  if (!policy.allowedPrefixes.some((prefix) => hasPrefix(url.href, prefix))) {
    throw new LocationRefusedError(
      `manifest location ${shown} is refused: it matches no prefix in manifestLocations.allowedPrefixes ` +
        `(${policy.allowedPrefixes.length === 0 ? "none is set" : policy.allowedPrefixes.join(", ")})`,
    );
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && policy.allowHttp)) {
    throw new LocationRefusedError(
      `manifest location ${shown} is refused: only https is allowed (manifestLocations.allowHttp)`,
    );
  }
  if (url.username !== "" || url.password !== "") {
    throw new LocationRefusedError(`manifest location ${shown} is refused: it carries credentials`);
  }
  const literal = url.hostname.replace(/^\[|\]$/g, "");
  if (isIP(literal) !== 0) checkAddress(url.hostname, literal, policy);
}

/** `https://github.com` must not admit `https://github.com.evil.example/`: a prefix ends at a boundary. */
function hasPrefix(href: string, prefix: string): boolean {
  if (!href.startsWith(prefix)) return false;
  return /[/?#]$/.test(prefix) || href.length === prefix.length || "/?#:".includes(href[prefix.length]!);
}

// Loopback, private, link-local, shared (CGNAT), unspecified, multicast and reserved ranges.
const NON_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  ["::", 127],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
  ["64:ff9b::", 96],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, "ipv6");
}

export function isNonPublicAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (mapped) return NON_PUBLIC.check(mapped, "ipv4");
  const family = isIP(address);
  return family === 0 || NON_PUBLIC.check(address, family === 4 ? "ipv4" : "ipv6");
}

function checkAddress(host: string, address: string, policy: LocationPolicy): void {
  if (policy.allowPrivateNetworks || !isNonPublicAddress(address)) return;
  throw new LocationRefusedError(
    `manifest location host ${host} resolves to ${address}, a loopback, link-local or private address ` +
      "(manifestLocations.allowPrivateNetworks)",
  );
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * The DNS lookup the HTTP connections use: the address actually connected to is checked, so a name that
 * resolves (or re-resolves, DNS rebinding) to a private address is refused, redirects included.
 */
export function checkedLookup(policy: LocationPolicy) {
  return (hostname: string, options: object, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      try {
        for (const { address } of addresses) checkAddress(hostname, address, policy);
      } catch (refused) {
        return callback(refused as NodeJS.ErrnoException, []);
      }
      if ((options as { all?: boolean }).all) return callback(null, addresses);
      const [first] = addresses;
      callback(null, first?.address ?? "", first?.family);
    });
  };
}

/** A local location: only a regular file or a folder inside the kodata directory, links resolved first. */
async function checkLocalPath(location: string, kodataDir: string | undefined): Promise<string> {
  const given = location.startsWith("file:") ? safeFileUrlPath(location) : location;
  if (kodataDir === undefined) {
    throw new LocationRefusedError(
      `manifest location ${location} is refused: local paths are read only from kodata`,
    );
  }
  const root = await realpath(kodataDir);
  let real: string;
  try {
    real = await realpath(resolve(root, given));
  } catch {
    throw new LocationRefusedError(`manifest location ${location} does not exist in the kodata directory`);
  }
  if (real !== root && !real.startsWith(`${root}${sep}`)) {
    throw new LocationRefusedError(
      `manifest location ${location} is refused: it is outside the kodata directory`,
    );
  }
  const stats = await stat(real);
  if (!stats.isFile() && !stats.isDirectory()) {
    throw new LocationRefusedError(`manifest location ${location} is refused: not a regular file or folder`);
  }
  return real;
}

function safeFileUrlPath(location: string): string {
  try {
    return fileURLToPath(location);
  } catch {
    throw new LocationRefusedError(`manifest location ${location} is not a valid file URL`);
  }
}
