import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { files, fromSrc, matchesOutside, SRC } from "./support.ts";

// What people read is shaped in src/text/: a Markdown table is written by markdownTable alone, and a commit
// is cut short by shortCommit (tables and headings) or commitInMessage (sentences) alone, and a number is
// worded with its noun by count alone (`1 error`, never `1 errors` or `1 error(s)`). A second table
// writer forgets to escape a cell; a second cut drifts to a third length.

const TEXT = files(join(SRC, "text")).map(fromSrc);

describe("one home for the text people read", () => {
  it("writes a Markdown table's `| --- |` line in src/text/ alone", () => {
    expect(matchesOutside(/\| ?:?-{3,}:? ?\||\.map\(\(\) => ["'`]-{3,}["'`]\)/g, TEXT)).toEqual([]);
  });

  it("cuts a commit to 7 or 12 characters in src/text/ alone", () => {
    expect(matchesOutside(/\.(?:slice|substring|substr)\(0, ?(?:7|12)\)/g, TEXT)).toEqual([]);
  });

  it("words a number with its noun in src/text/ alone", () => {
    expect(matchesOutside(/=== ?1 \? ["'`]["'`] : ["'`]s["'`]|=== ?1 \? "(\w+)" : "\1s"/g, TEXT)).toEqual([]);
  });

  it("never writes a count's noun as `noun(s)`", () => {
    expect(matchesOutside(/(?<= )(?!https?\()[A-Za-z]{2,}\(s\)/g, [])).toEqual([]);
  });
});
