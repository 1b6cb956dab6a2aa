import { compareStrings } from "./diagnostic.ts";
import { type FleetFile, fileProblem } from "./file-text.ts";
import {
  createFileFilter,
  type EntryKind,
  entryAction,
  type FileSelection,
  isYamlLeftOut,
  mayHoldLeftOut,
} from "./select.ts";

/**
 * One entry of a folder as a walk lists it, over a checkout (`H` a path on disk, `fleet/read-dir.ts`) or a
 * commit (`H` an object id, `source/tree.ts`).
 */
export interface Entry<H> {
  name: string;
  /** What the entry is listed by when it is a folder, read by when it is a file. */
  at: H;
  /** What it is, as the selection rule tells entries apart (asked only by walkFleet). */
  kind: () => Promise<EntryKind>;
  /** Whether `list` can look inside it: a folder, and on disk a submodule's checkout too. */
  listable: boolean;
}

/** The entries of one folder. */
export type ListFolder<H> = (at: H) => Promise<Entry<H>[]>;

const joinPath = (dir: string, name: string): string => (dir === "" ? name : `${dir}/${name}`);

/**
 * The fleet files below `root`, sorted by path: the one walk over a checkout or a Git tree. Only the folders
 * the selection can reach are listed and only the files it selects are read; an entry at a fleet path that
 * is no regular file (a symlink, a submodule, a folder named like a file) is a file with a problem.
 */
export async function walkFleet<H>(
  root: H,
  list: ListFolder<H>,
  selection: FileSelection,
  read: (at: H, path: string) => Promise<FleetFile>,
): Promise<FleetFile[]> {
  const filter = createFileFilter(selection);
  const files: FleetFile[] = [];
  const visit = async (at: H, dir: string): Promise<void> => {
    for (const entry of await list(at)) {
      const path = joinPath(dir, entry.name);
      const action = entryAction(filter, path, await entry.kind());
      if (action.problem !== undefined) files.push(fileProblem(path, action.problem));
      if (action.descend) await visit(entry.at, path);
      if (action.read) files.push(await read(entry.at, path));
    }
  };
  await visit(root, "");
  return files.sort((a, b) => compareStrings(a.path, b.path));
}

/**
 * The YAML files below `root` that the selection leaves out (isYamlLeftOut), by path, in the order the walk
 * meets them, each with what it is read by. Every folder a left-out file may be in is listed; no file is read.
 */
export async function walkLeftOut<H>(
  root: H,
  list: ListFolder<H>,
  selection: FileSelection,
): Promise<Map<string, H>> {
  const filter = createFileFilter(selection);
  const found = new Map<string, H>();
  const visit = async (at: H, dir: string): Promise<void> => {
    for (const entry of await list(at)) {
      const path = joinPath(dir, entry.name);
      if (!mayHoldLeftOut(filter, entry.name, path)) continue;
      if (entry.listable) await visit(entry.at, path);
      else if ((await entry.kind()) !== "submodule" && isYamlLeftOut(filter, path)) found.set(path, entry.at);
    }
  };
  await visit(root, "");
  return found;
}
