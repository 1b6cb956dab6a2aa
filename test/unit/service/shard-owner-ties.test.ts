import { describe, expect, it, vi } from "vitest";
import { shardOwner } from "../../../src/service/sharding.ts";

// shardOwner's tie-break and its lowest score, which no real SHA-256 reaches in a test: two members whose
// 48-bit scores are equal, or a score of 0, would take ~2^47 hashes to find. So the hash is replaced here,
// for the member/cluster pairs the test names only, by digests it chooses (every other input is hashed as
// usual). The rule under test is what every replica must agree on: on equal scores the member whose name
// sorts first wins, whatever order a replica lists the members in.

const forced = vi.hoisted(() => new Map<string, Buffer>());
vi.mock("node:crypto", async (importOriginal) => {
  const crypto = await importOriginal<typeof import("node:crypto")>();
  return {
    ...crypto,
    createHash: (...args: Parameters<typeof crypto.createHash>) => {
      const hash = crypto.createHash(...args);
      let input = "";
      return {
        update(data: string) {
          input += data;
          hash.update(data);
          return this;
        },
        digest: (encoding?: "hex") => {
          const digest = forced.get(input) ?? hash.digest();
          return encoding ? digest.toString(encoding) : digest;
        },
      };
    },
  };
});

/** The digest whose first 6 bytes (shardOwner's score) are `score`, the rest noise that must not count. */
const scoring = (score: number, noise: number) => {
  const digest = Buffer.alloc(32, noise);
  digest.writeUIntBE(score, 0, 6);
  return digest;
};

describe("shard assignment on equal scores", () => {
  it("gives the cluster to the member whose name sorts first, in whatever order the members are listed", () => {
    const cluster = "fleet-system/tied";
    forced.set(`pod-b_2\n${cluster}`, scoring(0x7f00_0000_0001, 0x11));
    forced.set(`pod-a_1\n${cluster}`, scoring(0x7f00_0000_0001, 0x22));
    forced.set(`pod-c_3\n${cluster}`, scoring(0x1000_0000_0000, 0xff));
    for (const members of [
      ["pod-a_1", "pod-b_2", "pod-c_3"],
      ["pod-b_2", "pod-a_1", "pod-c_3"],
      ["pod-c_3", "pod-b_2", "pod-a_1"],
    ])
      expect(shardOwner(members, cluster), members.join(",")).toBe("pod-a_1");
    // A higher score still wins over a name that sorts first.
    forced.set(`pod-c_3\n${cluster}`, scoring(0x7f00_0000_0002, 0x00));
    expect(shardOwner(["pod-a_1", "pod-b_2", "pod-c_3"], cluster)).toBe("pod-c_3");
  });

  it("gives a cluster an owner even when every member scores 0 or 1", () => {
    const cluster = "fleet-system/lowest";
    forced.set(`pod-a_1\n${cluster}`, scoring(1, 0xff));
    forced.set(`pod-b_2\n${cluster}`, scoring(0, 0xff));
    expect(shardOwner(["pod-b_2"], cluster)).toBe("pod-b_2");
    expect(shardOwner(["pod-b_2", "pod-a_1"], cluster)).toBe("pod-a_1");
  });
});
