import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  checkLocationText,
  checkUrl,
  DEFAULT_LOCATION_POLICY,
  isNonPublicAddress,
  type LocationPolicy,
  LocationRefusedError,
} from "../../../src/admission/locations.ts";
import { chartDir } from "../../support/helm.ts";

// What a platform engineer reads when the location policy refuses a fleet file's manifest location, and
// where each check draws its line: pins, schemes, prefixes, credentials, address literals, local paths.
// checkLocationText never touches the disk or DNS, so kodata need not exist.

const KODATA = "/var/run/ko";
const RELEASES = "https://github.com/knative/serving/releases/download/";
const HEX = "0123456789abcdef".repeat(4);
const policy = (over: Partial<LocationPolicy> = {}): LocationPolicy => ({
  ...DEFAULT_LOCATION_POLICY,
  allowedPrefixes: [RELEASES],
  ...over,
});
/** An operator who allows any https host, so the later checks (credentials, literals) are reached. */
const anyHttps = (over: Partial<LocationPolicy> = {}) => policy({ allowedPrefixes: ["https://"], ...over });
const check = (location: string, given: LocationPolicy = policy()) =>
  checkLocationText(location, given, KODATA);

/** The refusal `run` throws; fails the test when it admits. */
function refusal(run: () => unknown): LocationRefusedError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(LocationRefusedError);
    return error as LocationRefusedError;
  }
  throw new Error("admitted, expected a refusal");
}
const localRefusal = (location: string) =>
  `manifest location ${location} is refused: a local path must name a regular file or folder inside the kodata directory`;

describe("the default location policy", () => {
  it("is what the chart's values.yaml says operators get: no URL, https only, public hosts, 32 and 64 MiB", () => {
    const values = parse(readFileSync(join(chartDir, "values.yaml"), "utf8")) as {
      manifestLocations: unknown;
    };
    expect(DEFAULT_LOCATION_POLICY).toEqual(values.manifestLocations);
    expect(
      refusal(() => check(`${RELEASES}v1.22.0/serving-core.yaml`, DEFAULT_LOCATION_POLICY)).message,
    ).toMatch(/allowedPrefixes/);
    const http = { ...DEFAULT_LOCATION_POLICY, allowedPrefixes: ["http://"] };
    expect(refusal(() => check("http://example.com/serving.yaml", http)).message).toMatch(/allowHttp/);
  });
});

describe("LocationRefusedError", () => {
  it("names itself in logs and stack traces", () => {
    const error = refusal(() => check("https://evil.example/x.yaml"));
    expect(error.name).toBe("LocationRefusedError");
    expect(String(error)).toBe(
      `LocationRefusedError: manifest location https://evil.example/x.yaml is refused: it matches no prefix in manifestLocations.allowedPrefixes (${RELEASES})`,
    );
  });
});

describe("checkLocationText: a sha256 pin in the fragment", () => {
  it("takes the pin off a URL, whatever its case, and keeps the rest of the location intact", () => {
    const location = `${RELEASES}knative-v1.22.0/serving-core.yaml`;
    const checked = check(`${location}#sha256=${HEX.toUpperCase()}`);
    expect(checked).toEqual({ kind: "url", url: new URL(location), sha256: HEX });
    if (checked.kind !== "url") throw new Error("not a URL");
    expect(checked.url.href).toBe(location);
    expect(checked.url.hash).toBe("");
  });

  it("takes the pin off a local path, which then resolves inside kodata", () => {
    expect(check(`serving/1.22.0/serving-core.yaml#sha256=${HEX}`)).toEqual({
      kind: "path",
      path: `${KODATA}/serving/1.22.0/serving-core.yaml`,
      sha256: HEX,
    });
    // A short URL: nothing but the pin may be cut off.
    expect(check(`https://a.example/x#sha256=${HEX}`, anyHttps())).toEqual({
      kind: "url",
      url: new URL("https://a.example/x"),
      sha256: HEX,
    });
  });

  it("an unpinned location comes back without sha256", () => {
    expect(check(`${RELEASES}serving.yaml`)).toEqual({
      kind: "url",
      url: new URL(`${RELEASES}serving.yaml`),
    });
    expect(check("serving.yaml")).toEqual({ kind: "path", path: `${KODATA}/serving.yaml` });
  });

  it("refuses a pin written wrong instead of fetching the location unchecked, showing it without the pin", () => {
    const url = `${RELEASES}serving.yaml`;
    for (const [written, shown] of [
      [`${url}#sha256=${HEX.slice(1)}`, url], // 63 digits
      [`${url}#sha256=${HEX} `, url], // a trailing space from a quoted string
      [`${url}#sha256=${HEX}\n`, url], // a YAML block's line end
      [`${url}#SHA256=${HEX}g`, url],
      [`${url}#sha256=${HEX}#sha256=${HEX}`, url], // two pins: which one would hold?
      [`serving.yaml#sha256=${HEX.slice(1)}`, "serving.yaml"],
    ]) {
      expect(refusal(() => check(written!)).message, JSON.stringify(written)).toBe(
        `manifest location ${shown} has a sha256 pin that is not one #sha256= and 64 hexadecimal digits at its end`,
      );
    }
  });
});

describe("checkLocationText: URL or local path", () => {
  it("reads a colon inside a relative path as part of a file name, not as a scheme", () => {
    expect(check("serving/v1.22:core.yaml")).toEqual({
      kind: "path",
      path: `${KODATA}/serving/v1.22:core.yaml`,
    });
    expect(check("extra/file:serving.yaml")).toEqual({
      kind: "path",
      path: `${KODATA}/extra/file:serving.yaml`,
    });
  });

  it("an https URL that mentions file: is still a URL, held to the prefixes", () => {
    const hostile = "https://evil.example/file:serving.yaml";
    expect(refusal(() => check(hostile, DEFAULT_LOCATION_POLICY)).message).toBe(
      `manifest location ${hostile} is refused: it matches no prefix in manifestLocations.allowedPrefixes (none is set)`,
    );
    expect(check(`${RELEASES}file:serving.yaml`)).toEqual({
      kind: "url",
      url: new URL(`${RELEASES}file:serving.yaml`),
    });
  });

  it("a file: URL, in any case, is a local path inside kodata or refused with the one local message", () => {
    expect(check(`FILE://${KODATA}/serving/core.yaml`)).toEqual({
      kind: "path",
      path: `${KODATA}/serving/core.yaml`,
    });
    expect(refusal(() => check("file:///etc/passwd")).message).toBe(localRefusal("file:///etc/passwd"));
    // A remote host in a file: URL is no local path.
    expect(refusal(() => check("file://fileserver/share/x.yaml")).message).toBe(
      localRefusal("file://fileserver/share/x.yaml"),
    );
    // A sibling of kodata sharing its name as a prefix is outside it.
    expect(refusal(() => check(`${KODATA}-evil/x.yaml`)).message).toBe(localRefusal(`${KODATA}-evil/x.yaml`));
    expect(refusal(() => check("../../etc/passwd")).message).toBe(localRefusal("../../etc/passwd"));
  });

  it("says which location is not a valid URL, without its pin", () => {
    expect(refusal(() => check("https://exa mple.com/serving.yaml")).message).toBe(
      "manifest location https://exa mple.com/serving.yaml is not a valid URL",
    );
    expect(refusal(() => check(`http://[oops/serving.yaml#sha256=${HEX}`)).message).toBe(
      "manifest location http://[oops/serving.yaml is not a valid URL",
    );
  });
});

describe("checkUrl: the words of each refusal", () => {
  it("lists every allowed prefix, comma-separated, when none matches", () => {
    const two = policy({ allowedPrefixes: [RELEASES, "https://mirror.example/knative/"] });
    expect(refusal(() => check("https://evil.example/serving.yaml?x=1#frag", two)).message).toBe(
      "manifest location https://evil.example/serving.yaml is refused: it matches no prefix in " +
        `manifestLocations.allowedPrefixes (${RELEASES}, https://mirror.example/knative/)`,
    );
  });

  it("a prefix naming one whole file admits that file, and only at a boundary past it", () => {
    const file = `${RELEASES}knative-v1.22.0/serving-core.yaml`;
    const exact = policy({ allowedPrefixes: [file] });
    expect(check(file, exact)).toEqual({ kind: "url", url: new URL(file) });
    expect(check(`${file}?download=1`, exact)).toEqual({ kind: "url", url: new URL(`${file}?download=1`) });
    expect(refusal(() => check(`${file}.evil`, exact)).message).toContain("matches no prefix");
  });

  it("allowHttp admits http, not every other scheme", () => {
    const mirror = policy({
      allowedPrefixes: ["ftp://mirror.example/", "http://mirror.example/"],
      allowHttp: true,
    });
    expect(check("http://mirror.example/serving.yaml", mirror)).toEqual({
      kind: "url",
      url: new URL("http://mirror.example/serving.yaml"),
    });
    expect(refusal(() => check("ftp://mirror.example/serving.yaml", mirror)).message).toBe(
      "manifest location ftp://mirror.example/serving.yaml is refused: only https is allowed (manifestLocations.allowHttp)",
    );
  });

  it("refuses a user name alone, or a password alone, and never repeats them", () => {
    for (const location of [
      "https://deploy@github.com/knative/serving.yaml",
      "https://:hunter2@github.com/knative/serving.yaml",
      "https://deploy:hunter2@github.com/knative/serving.yaml",
    ]) {
      const error = refusal(() => check(location, anyHttps()));
      expect(error.message, location).toBe(
        "manifest location https://github.com/knative/serving.yaml is refused: it carries credentials",
      );
    }
    // Even where the operator's own prefix names the user.
    const withUser = policy({ allowedPrefixes: ["https://deploy@github.com/"] });
    expect(
      refusal(() => check("https://deploy@github.com/knative/serving.yaml", withUser)).message,
    ).toContain("it carries credentials");
  });

  it("refuses an IPv6 literal host that is loopback, private or an IPv4-mapped private address", () => {
    const words = (host: string, address: string) =>
      `manifest location host ${host} resolves to ${address}, a loopback, link-local or private address ` +
      "(manifestLocations.allowPrivateNetworks)";
    expect(refusal(() => check("https://[::1]/serving.yaml", anyHttps())).message).toBe(
      words("[::1]", "::1"),
    );
    expect(refusal(() => check("https://[fd00::1]:8443/serving.yaml", anyHttps())).message).toBe(
      words("[fd00::1]", "fd00::1"),
    );
    // The URL parser writes ::ffff:127.0.0.1 in hex; it is still loopback.
    expect(refusal(() => check("https://[::ffff:127.0.0.1]/serving.yaml", anyHttps())).message).toBe(
      words("[::ffff:7f00:1]", "::ffff:7f00:1"),
    );
    expect(refusal(() => check("https://169.254.169.254/latest/meta-data/", anyHttps())).message).toBe(
      words("169.254.169.254", "169.254.169.254"),
    );
    // Public literals pass, and private ones do when the operator allows private networks.
    expect(check("https://[2606:4700::1111]/serving.yaml", anyHttps()).kind).toBe("url");
    expect(check("https://[::1]/serving.yaml", anyHttps({ allowPrivateNetworks: true })).kind).toBe("url");
  });

  it("checks a redirect's URL the same way", () => {
    expect(() => checkUrl(new URL(`${RELEASES}x.yaml`), policy())).not.toThrow();
    expect(refusal(() => checkUrl(new URL("https://[::1]/x.yaml"), anyHttps())).message).toContain(
      "host [::1] resolves to ::1",
    );
  });
});

describe("isNonPublicAddress", () => {
  it("anything that is not an address counts as non-public", () => {
    for (const text of [
      "",
      "not-an-address",
      "::ffff:8.8.8.8junk",
      "::ffff:8.8.8.8.9",
      "::ffff:x.8.8.8",
      "::ffff:8.x.8.8",
      "::ffff:8.8.x.8",
      "::ffff:8.8.8.x",
      "::ffff:999.8.8.8",
    ]) {
      expect(isNonPublicAddress(text), JSON.stringify(text)).toBe(true);
    }
  });

  it("reads an IPv4-mapped address by its IPv4 part, and only the ::ffff:0:0/96 range as mapped", () => {
    expect(isNonPublicAddress("::ffff:10.0.0.1")).toBe(true);
    expect(isNonPublicAddress("::FFFF:192.168.1.1")).toBe(true);
    expect(isNonPublicAddress("::ffff:140.82.112.3")).toBe(false);
    // A global unicast address whose last 48 bits happen to spell ffff:10.0.0.1 is not a mapped one.
    expect(isNonPublicAddress("2a00:1450::ffff:10.0.0.1")).toBe(false);
  });
});
