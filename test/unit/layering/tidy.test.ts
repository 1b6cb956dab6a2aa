import { describe, expect, it } from "vitest";
import { matchesOutside } from "./support.ts";

// Tidiness that drifts back unless checked: one lookup of the release manifests.

describe("one --kodata lookup", () => {
  it("reads KO_DATA_PATH in commands/kodata.ts alone (findKodata)", () => {
    // `env.KO_DATA_PATH`, `env["KO_DATA_PATH"]`, `{ KO_DATA_PATH } = process.env`: help text may name it.
    const read = /\.KO_DATA_PATH\b|\[\s*["'`]KO_DATA_PATH["'`]\s*\]|\{[^}]*\bKO_DATA_PATH\b[^}]*\}\s*=/g;
    expect(matchesOutside(read, ["commands/kodata.ts"])).toEqual([]);
  });
});
