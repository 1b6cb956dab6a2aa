import { BlockList, isIP } from "node:net";
import { resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";

// spec.manifests / spec.additionalManifests come from fleet files, which pull requests edit and `plan` reads
// on CI runners: without a policy any author could make the reconciler fetch any URL (cloud metadata,
// loopback services) or read any file (service account tokens, /dev/zero). Which locations are read is the
// operator's decision, made here once for the mirror, the service and `plan`. This file holds what can be
// decided from the text of a location; render/location-policy.ts adds what needs the world (DNS, the file
// system).

const MiB = 1024 * 1024;

// The chart's values.yaml (manifestLocations) documents each field for operators and holds these defaults.
export const LocationPolicySchema = z.strictObject({
  /** URL prefixes a location may start with: none by default, so every URL location is refused. */
  allowedPrefixes: z.array(z.string().min(1)).default([]),
  /** Plain http:// locations (https only by default). */
  allowHttp: z.boolean().default(false),
  /** Locations whose host resolves to a loopback, link-local or private address. */
  allowPrivateNetworks: z.boolean().default(false),
  /** The most one location may hold; reading stops there. */
  maxBytesPerLocation: z
    .number()
    .int()
    .positive()
    .default(32 * MiB),
  /** The most all the locations of one CR may hold together, charged as the bytes arrive. */
  maxBytesPerResource: z
    .number()
    .int()
    .positive()
    .default(64 * MiB),
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

/** `${VERSION}` in a manifest URL stands for the target version. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: upstream's placeholder, literally.
export const VERSION_VARIABLE = "${VERSION}";

const PIN = /#sha256=([0-9a-f]{64})$/i;

/** The location as messages show it: without its pin. */
export const withoutPin = (location: string): string => location.replace(/#sha256=.*$/is, "");

/**
 * Checks what the text of a location decides. A pin rides in the URL's fragment (`…/serving.yaml#sha256=<hex>`):
 * upstream's Manifest type has only `URL`, a fragment is never sent to the server, so the CR stays valid
 * for the upstream CRD and operator. A local path comes back resolved against kodata, not yet looked at:
 * the reader resolves links and checks the file (render/location-policy.ts `checkLocation`).
 */
export function checkLocationText(
  location: string,
  policy: LocationPolicy,
  kodataDir: string | undefined,
): CheckedLocation {
  const pin = PIN.exec(location)?.[1]?.toLowerCase();
  const bare = pin ? location.slice(0, -("#sha256=".length + 64)) : location;
  // A pin written wrong (63 digits, a trailing space or line from a YAML block) must not turn into a
  // location fetched unchecked while its author believes it pinned.
  if (/#sha256=/i.test(bare)) {
    throw new LocationRefusedError(
      `manifest location ${withoutPin(location)} has a sha256 pin that is not one #sha256= and 64 hexadecimal digits at its end`,
    );
  }
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
  return { kind: "path", path: localPathInKodata(bare, kodataDir), ...sha256 };
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

/** Anything that is not an address counts as non-public. */
export function isNonPublicAddress(address: string): boolean {
  // BlockList checks an IPv4-mapped address (::ffff:a.b.c.d, ::ffff:7f00:1) against the IPv4 ranges itself.
  const family = isIP(address);
  return family === 0 || NON_PUBLIC.check(address, family === 4 ? "ipv4" : "ipv6");
}

/** Refuses a non-public address unless the policy allows private networks. */
export function checkAddress(host: string, address: string, policy: LocationPolicy): void {
  if (policy.allowPrivateNetworks || !isNonPublicAddress(address)) return;
  throw new LocationRefusedError(
    `manifest location host ${host} resolves to ${address}, a loopback, link-local or private address ` +
      "(manifestLocations.allowPrivateNetworks)",
  );
}

/**
 * The one refusal of a local location, whatever the reason (outside kodata, missing, a link out, a device):
 * a message that differed would tell a pull request's author which paths exist on the reconciler's disk.
 */
export function localPathRefused(location: string): LocationRefusedError {
  return new LocationRefusedError(
    `manifest location ${location} is refused: a local path must name a regular file or folder inside the kodata directory`,
  );
}

/** The path a local location names, resolved against kodata; refused unless it stays inside it. */
function localPathInKodata(location: string, kodataDir: string | undefined): string {
  if (kodataDir === undefined) throw localPathRefused(location);
  let given: string;
  try {
    given = /^file:/i.test(location) ? fileURLToPath(location) : location;
  } catch {
    throw localPathRefused(location);
  }
  const root = resolve(kodataDir);
  const path = resolve(root, given);
  if (path !== root && !path.startsWith(`${root}${sep}`)) throw localPathRefused(location);
  return path;
}
