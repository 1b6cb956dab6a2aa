import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { readFleetDir } from "../../../src/fleet/read-dir.ts";
import { createFileFilter, DEFAULT_FILE_SELECTION, type FileSelection } from "../../../src/fleet/select.ts";

/** Whether the file at `path` holds desired state under `selection`: the filter's `matches`. */
const isFleetFile = (path: string, selection: FileSelection): boolean =>
  createFileFilter(selection).matches(path);

describe("the file filter's matches", () => {
  it("takes .yaml and .yml files below clusters/ by default", () => {
    const selected = [
      "clusters/spoke-1/knative-serving.yaml",
      "clusters/spoke-1/eu/knative-eventing.yml",
      "./clusters/top.yaml",
      "clusters/spoke-1/README.md",
      "other/knative-serving.yaml",
      "knative-serving.yaml",
    ].filter((path) => isFleetFile(path, DEFAULT_FILE_SELECTION));
    expect(selected).toEqual([
      "clusters/spoke-1/knative-serving.yaml",
      "clusters/spoke-1/eu/knative-eventing.yml",
      "./clusters/top.yaml",
    ]);
  });

  it("never takes the status folder, whatever the glob", () => {
    const everything = { pathGlob: "**/*.yaml", statusDir: "status/" };
    expect(isFleetFile("status/spoke-1/knative-serving.yaml", everything)).toBe(false);
    expect(isFleetFile("statuses/spoke-1.yaml", everything)).toBe(true);
    expect(
      isFleetFile("fleet/status/x.yaml", { pathGlob: "fleet/**/*.yaml", statusDir: "./fleet/status" }),
    ).toBe(false);
  });
});

describe("readFleetDir", () => {
  let dir = "";
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it("reads the selected regular files, sorted, with repository-relative paths; a symlink is a problem", async () => {
    dir = await mkdtemp(join(tmpdir(), "knative-fleet-read-"));
    const files: Record<string, string> = {
      "clusters/spoke-2/knative-eventing.yaml": "b",
      "clusters/spoke-1/knative-serving.yml": "a",
      "status/spoke-1.yaml": "bot",
      "clusters/notes.txt": "x",
      ".git/clusters/x.yaml": "object",
    };
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(dir, path)), { recursive: true });
      await writeFile(join(dir, path), text);
    }
    await symlink(join(dir, "status/spoke-1.yaml"), join(dir, "clusters/link.yaml"));
    expect(await readFleetDir(dir, DEFAULT_FILE_SELECTION)).toEqual([
      {
        path: "clusters/link.yaml",
        text: "",
        problem: {
          line: 1,
          column: 1,
          message:
            "a symbolic link where fleet files are read; links are not followed: put the file itself here",
        },
      },
      { path: "clusters/spoke-1/knative-serving.yml", text: "a" },
      { path: "clusters/spoke-2/knative-eventing.yaml", text: "b" },
    ]);
    const link = (await readFleetDir(dir, DEFAULT_FILE_SELECTION))[0];
    expect(await readFleetDir(dir, { pathGlob: "**/*.yaml", statusDir: "status/" })).toEqual([
      link,
      { path: "clusters/spoke-2/knative-eventing.yaml", text: "b" },
    ]);
  });
});
