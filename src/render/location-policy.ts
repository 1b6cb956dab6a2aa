import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { realpath, stat } from "node:fs/promises";
import { sep } from "node:path";
import {
  type CheckedLocation,
  checkAddress,
  checkLocationText,
  type LocationPolicy,
  localPathRefused,
  withoutPin,
} from "../admission/locations.ts";

// What the location policy (admission/locations.ts) needs the world for: the address a name resolves to,
// and the file a local path really is.

/**
 * Checks a location against the policy: its text (admission/locations.ts), then, for a local path, the file
 * it really is, links resolved. Every local refusal has the same message, so no path's existence shows.
 */
export async function checkLocation(
  location: string,
  policy: LocationPolicy,
  kodataDir: string | undefined,
): Promise<CheckedLocation> {
  const checked = checkLocationText(location, policy, kodataDir);
  if (checked.kind === "url") return checked;
  try {
    const root = await realpath(kodataDir!);
    const real = await realpath(checked.path);
    const stats = await stat(real);
    const inside = real === root || real.startsWith(`${root}${sep}`);
    if (inside && (stats.isFile() || stats.isDirectory())) return { ...checked, path: real };
  } catch {
    // missing, unreadable: refused below like any other
  }
  throw localPathRefused(withoutPin(location));
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
