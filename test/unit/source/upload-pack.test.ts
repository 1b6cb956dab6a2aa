import { describe, expect, it } from "vitest";
import { advertisedCapabilities, withBlobLimit } from "../../../src/source/upload-pack.ts";

const OID = "a".repeat(40);
const pkt = (text: string) => `${(Buffer.byteLength(text) + 4).toString(16).padStart(4, "0")}${text}`;
const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array) => new TextDecoder().decode(data);

describe("advertisedCapabilities", () => {
  // As git http-backend answers GET info/refs?service=git-upload-pack (protocol v1).
  const advertisement = [
    pkt("# service=git-upload-pack\n"),
    "0000",
    pkt(`${OID} HEAD\0multi_ack thin-pack side-band-64k shallow no-progress filter object-format=sha1\n`),
    pkt(`${OID} refs/heads/main\n`),
    "0000",
  ].join("");

  it("reads the first ref line's capabilities", () => {
    expect(advertisedCapabilities(bytes(advertisement))?.has("filter")).toBe(true);
    expect(advertisedCapabilities(bytes(advertisement.replace(" filter", "")))?.has("filter")).toBe(false);
  });

  it("waits for the first ref line to arrive whole", () => {
    expect(advertisedCapabilities(bytes(advertisement.slice(0, 60)))).toBeUndefined();
  });

  it("finds no capabilities in an answer that is not a v1 ref list", () => {
    expect(advertisedCapabilities(bytes(`${pkt("version 2\n")}${pkt("ls-refs\n")}0000`))).toEqual(new Set());
    expect(advertisedCapabilities(bytes("<html>not git</html>"))).toBeUndefined();
  });
});

describe("withBlobLimit", () => {
  // As isomorphic-git writes a shallow fetch request.
  const request = [
    pkt(`want ${OID} multi_ack_detailed no-done side-band-64k ofs-delta agent=git/isomorphic-git@1.44.11\n`),
    pkt("deepen 1\n"),
    "0000",
    pkt("done\n"),
  ].join("");

  it("announces the filter on the first want and closes the request section with it", () => {
    expect(text(withBlobLimit(bytes(request), 1048577))).toBe(
      [
        pkt(
          `want ${OID} multi_ack_detailed no-done side-band-64k ofs-delta agent=git/isomorphic-git@1.44.11 filter\n`,
        ),
        pkt("deepen 1\n"),
        pkt("filter blob:limit=1048577\n"),
        "0000",
        pkt("done\n"),
      ].join(""),
    );
  });

  it("leaves a request that is no fetch, or already filters, as it is", () => {
    const lsRefs = bytes(`${pkt("command=ls-refs\n")}0001${pkt("ref-prefix refs/heads/main\n")}0000`);
    expect(withBlobLimit(lsRefs, 10)).toBe(lsRefs);
    const filtered = withBlobLimit(bytes(request), 10);
    expect(withBlobLimit(filtered, 10)).toBe(filtered);
  });
});
