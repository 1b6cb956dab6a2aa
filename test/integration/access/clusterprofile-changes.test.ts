import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ClusterAccess,
  type ClusterProfileChange,
  type SpokeClient,
} from "../../../src/access/cluster-access.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import {
  BORROWED_CREDENTIALS,
  deleteProfile,
  fixtureProvider,
  hubClient,
  listNamespaces,
  NAMESPACE,
  profileStatus,
  providersOf,
  putProfile,
  sandbox,
  sandboxProvider,
} from "./support.ts";

const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];
const NAME = "access-test-moving";
const ref = { namespace: NAMESPACE, name: NAME };

// The plugin runs are counted, to show which profile updates cost a new credential and which do not.
const counted = fixtureProvider("secretreader", "token", {
  FIXTURE_WRAPPED: sandboxProvider("secretreader").execConfig.command,
});
const access = new ClusterAccess({
  hub: hubClient(),
  providers: providersOf(counted.provider),
  logger: silentLogger,
  policy: BORROWED_CREDENTIALS,
});
const changes: ClusterProfileChange[] = [];

async function resolved(): Promise<SpokeClient> {
  const result = await access.resolve(ref);
  if (!result.ok) throw new Error(`${result.reason}: ${result.message}`);
  return result.spoke;
}

beforeAll(async () => {
  await putProfile(NAME, profileStatus(spoke1));
  await access.watch();
  access.onClusterProfileChange((changed, change) => {
    if (changed.name === NAME) changes.push(change);
  });
});

afterAll(async () => {
  await access.close();
  await deleteProfile(NAME);
});

describe("a watched ClusterProfile", () => {
  it("keeps its client across status-only changes such as a heartbeat", async () => {
    const before = await resolved();
    changes.length = 0;
    await putProfile(NAME, profileStatus(spoke1, { message: `heartbeat ${Date.now()}` }));
    await expect.poll(async () => (await resolved()).connection).toBe(before.connection);
    // Give the watch time to deliver the update: it must not count as a change.
    await new Promise((r) => setTimeout(r, 500));
    expect(changes).toEqual([]);
    expect((await resolved()).connection).toBe(before.connection);
    expect(counted.runs()).toBe(1);
  });

  it("replaces its client at once when the server changes, and the new client reaches the new spoke", async () => {
    const before = await resolved();
    expect(before.server).toBe(spoke1.server);
    changes.length = 0;
    await putProfile(NAME, profileStatus(spoke2));
    await expect.poll(() => changes).toContain("connection");
    // The old client is closed for new requests, with the reason.
    await expect(listNamespaces(before.connection)).rejects.toMatchObject({
      reason: "RemoteClusterStale",
      message: `the client for ClusterProfile ${NAMESPACE}/${NAME} was replaced because its ClusterProfile's connection details changed; resolve the cluster again`,
    });
    const after = await resolved();
    expect(after.server).toBe(spoke2.server);
    expect(after.connection).not.toBe(before.connection);
    expect((await listNamespaces(after.connection)).length).toBeGreaterThan(0);
    expect(counted.runs()).toBe(2);
  });

  it("reports health changes without replacing the client", async () => {
    const before = await resolved();
    changes.length = 0;
    await putProfile(NAME, profileStatus(spoke2, { healthy: "False", message: "maintenance" }));
    await expect.poll(() => changes).toEqual(["health"]);
    const unhealthy = await access.resolve(ref);
    expect(unhealthy.ok === false && unhealthy.reason).toBe("ClusterProfileNotReady");
    await putProfile(NAME, profileStatus(spoke2));
    await expect.poll(() => changes).toEqual(["health", "health"]);
    expect((await resolved()).connection).toBe(before.connection);
  });

  it("drops the client when the ClusterProfile is deleted", async () => {
    const before = await resolved();
    changes.length = 0;
    await deleteProfile(NAME);
    await expect.poll(() => changes).toEqual(["deleted"]);
    await expect(listNamespaces(before.connection)).rejects.toMatchObject({
      reason: "RemoteClusterStale",
    });
    const gone = await access.resolve(ref);
    expect(gone.ok === false && gone.reason).toBe("ClusterProfileNotFound");
    // Created without a status first (no access providers yet), then given one: a connection change.
    await putProfile(NAME, profileStatus(spoke1));
    await expect.poll(() => changes).toEqual(["deleted", "added", "connection"]);
  });
});
