import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { deflateWithoutWebStreams } from "../../../src/source/index.ts";
import { bot, fleetFiles, gitServerForTest, sourceForTest } from "./fixtures.ts";

// Its own file: isomorphic-git picks its deflate once per module instance, at the first object it writes.

/** Counts reads of a global (Response: what isomorphic-git's web-stream deflate reads its output with). */
function countReads(name: string) {
  const descriptor = Object.getOwnPropertyDescriptor(globalThis, name)!;
  const counter = { reads: 0, restore: () => Object.defineProperty(globalThis, name, descriptor) };
  Object.defineProperty(globalThis, name, {
    configurable: true,
    get() {
      counter.reads++;
      return descriptor.get ? descriptor.get.call(globalThis) : descriptor.value;
    },
  });
  return counter;
}

describe("the status write-back without web streams (as `run` sets it up)", () => {
  it("commits and pushes objects real git reads, and never reads through a fetch Response", async () => {
    deflateWithoutWebStreams();
    expect(globalThis).not.toHaveProperty("CompressionStream");
    // Node's bundled undici (fetch's Response) is loaded by the first read of Response.
    const responseReads = countReads("Response");

    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const status = `${"cluster: ready\n".repeat(2000)}`;
    const result = await source
      .commitAndPush({ files: new Map([["status/README.md", status]]), message: "Status", author: bot })
      .finally(responseReads.restore);
    expect(result).toMatchObject({ pushed: true });
    expect(await server.readFile("fleet", "main", "status/README.md")).toBe(status);
    const fsck = await promisify(execFile)("git", ["fsck", "--full", "--strict"], {
      cwd: server.repoPath("fleet"),
    });
    expect(fsck.stderr).not.toMatch(/error|bad|corrupt/i);
    expect(responseReads.reads).toBe(0);
  });
});
