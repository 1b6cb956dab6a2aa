import { createHmac } from "node:crypto";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { peekRolloutState, ROLLOUT_STATE_CONFIGMAP } from "../../../src/rollout/state.ts";
import { type Gitea, type GiteaRepo, startGitea } from "../../sandbox/gitea.ts";
import { CLUSTER_PROFILE_NAMESPACE, loadSandbox } from "../../sandbox/index.ts";
import { freePort } from "../../sandbox/processes.ts";
import { crText } from "../../support/fleet-files.ts";
import { startFleetProcess } from "../../support/fleet-service.ts";
import { pushChangeOverHttp } from "../../support/git-server.ts";
import { forceDeleteCrs } from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds, resetRolloutState } from "../../support/hub.ts";
import type { ServiceProcess } from "../../support/service-process.ts";
import { waitUntil } from "../../support/wait.ts";

// Commit statuses on a real forge: the fleet repository lives on the sandbox's Gitea (built from its Go
// module), knative-fleet runs as a real process that reads it with a token and posts statuses through
// Gitea's API. Two spokes the other files leave alone (spoke-5 the canary, spoke-6 the remaining wave).
// What a person sees on the merged commit: pending per cluster, success once healthy and soaked, failure
// on the canary with the halt's reason, and the pending status of a halted commit superseded by the fix.
// Every sync after the first comes from Gitea's push webhook.

const sandbox = loadSandbox();
const NS = "commit-status";
const FLEET = "sandbox";
const SPOKES = ["spoke-5", "spoke-6"] as const;
const context = (spoke?: string) =>
  spoke ? `knative-fleet/${FLEET}/${CLUSTER_PROFILE_NAMESPACE}/${spoke}` : `knative-fleet/${FLEET}`;
const TIME_LIMIT_S = 30;
const BAD_WORKLOADS = [{ name: "activator", nodeSelector: { "commit-status-test/no-such-node": "true" } }];

const policy = stringify({
  apiVersion: "fleet.knative.dev/v1alpha1",
  kind: "KnativeRollout",
  metadata: { name: "knative" },
  spec: {
    waves: [{ name: "canary", clusterProfiles: [{ namespace: CLUSTER_PROFILE_NAMESPACE, name: SPOKES[0] }] }],
    soak: "3s",
    timeLimit: `${TIME_LIMIT_S}s`,
  },
});

const crFiles = (spec: { config?: Record<string, Record<string, string>>; workloads?: unknown } = {}) =>
  Object.fromEntries(
    SPOKES.map((spoke) => [
      `clusters/serving-${spoke}.yaml`,
      crText({
        name: `serving-${spoke}`,
        namespace: NS,
        cluster: spoke,
        version: "1.23",
        spec: {
          ...spec,
          ingress: { kourier: { enabled: true, "service-type": "ClusterIP" } },
          config: { network: { "ingress-class": "kourier.ingress.networking.knative.dev" }, ...spec.config },
        },
      }),
    ]),
  );

/** A notification as the loopback receiver took it, its signature checked. */
interface Told {
  event: string;
  commit?: string;
  wave?: string;
  cluster?: string;
  text: string;
  signed: boolean;
}

/** A webhook receiver on loopback, as a team's chat relay would be: every message, and whether its HMAC holds. */
async function startReceiver(secret: string) {
  const told: Told[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const want = `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
      const signed = req.headers["x-knative-fleet-signature-256"] === want;
      told.push({ ...(JSON.parse(body.toString("utf8")) as Omit<Told, "signed">), signed });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hook`, told, close: () => new Promise((r) => server.close(r)) };
}

/** A status as Gitea lists it (every one ever posted, newest first). */
interface GiteaStatus {
  id: number;
  status: string;
  context: string;
  description: string;
}

describe("commit statuses on a real Gitea", () => {
  let gitea: Gitea;
  let repo: GiteaRepo;
  let hub: KubeClient;
  let service: ServiceProcess;
  let startService: (name: string) => ServiceProcess;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const toldAbout = (commit: string) =>
    receiver.told.filter((t) => t.commit === commit).map((t) => `${t.event}${t.wave ? ` ${t.wave}` : ""}`);
  const figures: Record<string, unknown> = {};

  /** Every status of the commit, oldest first. */
  const history = async (commit: string): Promise<GiteaStatus[]> => {
    const all: GiteaStatus[] = [];
    for (let page = 1; ; page++) {
      const batch = await gitea.api<GiteaStatus[]>(
        "GET",
        `/repos/${repo.owner}/${repo.name}/commits/${commit}/statuses?limit=50&page=${page}`,
      );
      all.push(...batch);
      if (batch.length < 50) return all.sort((a, b) => a.id - b.id);
    }
  };
  /** The newest status of each context on the commit. */
  const latest = async (commit: string) => {
    const newest = new Map<string, GiteaStatus>();
    for (const status of await history(commit)) newest.set(status.context, status);
    return newest;
  };
  const statesOf = async (commit: string) =>
    Object.fromEntries([...(await latest(commit))].map(([c, s]) => [c, s.status]));
  const waitStates = (commit: string, want: Record<string, string>, what: string, timeoutMs = 240_000) =>
    waitUntil(
      what,
      async () => {
        const states = await statesOf(commit);
        return Object.entries(want).every(([c, s]) => states[c] === s) ? latest(commit) : undefined;
      },
      timeoutMs,
    );
  const push = (files: Record<string, string | null>, message: string) =>
    pushChangeOverHttp(repo.cloneUrl, { username: gitea.user, password: gitea.token }, { files, message });
  const posted = async () => {
    const text = await (await fetch(`http://127.0.0.1:${service.metricsPort}/metrics`)).text();
    const line = text
      .split("\n")
      .find((l) => l.startsWith('knative_fleet_commit_statuses_total{outcome="posted"}'));
    return Number(line?.split(" ")[1] ?? Number.NaN);
  };
  const rolloutCommit = async () => {
    const configMap = await hub.get("v1", "ConfigMap", NS, ROLLOUT_STATE_CONFIGMAP);
    return peekRolloutState(configMap?.data as Record<string, unknown> | undefined)?.commit;
  };

  const removeHubCrs = async () =>
    forceDeleteCrs(hub, (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NS })).items);

  beforeAll(async () => {
    expect(sandbox.spokes.length, "this test needs a sandbox with --spokes 6").toBeGreaterThanOrEqual(6);
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await ensureNamespace(hub, NS);
    await removeHubCrs();
    await resetRolloutState(hub, NS);
    gitea = await startGitea();
    repo = await gitea.createRepo("fleet");
    const scratch = mkdtempSync(join(tmpdir(), "commit-status-test-"));
    // The repository's credentials as the chart mounts them, and the API token the statuses are posted with.
    const credentials = join(scratch, "credentials");
    mkdirSync(credentials);
    writeFileSync(join(credentials, "username"), gitea.user);
    writeFileSync(join(credentials, "password"), gitea.token);
    const tokenFile = join(scratch, "api-token");
    writeFileSync(tokenFile, gitea.token);
    // Gitea's push webhook (GitHub's signature header) is the only trigger: the poll runs once a year.
    const webhookSecret = "gitea-webhook-secret";
    const secretFile = join(scratch, "webhook-secret");
    writeFileSync(secretFile, webhookSecret);
    const webhookPort = await freePort();
    const notifySecretFile = join(scratch, "notify-secret");
    writeFileSync(notifySecretFile, "notify-secret");
    receiver = await startReceiver("notify-secret");
    startService = (name) =>
      startFleetProcess({
        sandbox,
        scratch,
        name,
        service: { repositoryUrl: repo.cloneUrl, namespace: NS, statusInterval: "2s" },
        config: {
          repository: {
            url: repo.cloneUrl,
            branch: "main",
            pathGlob: "clusters/**/*.yaml",
            credentialsDir: credentials,
          },
          rollout: { checkInterval: "1s" },
          pollSchedule: "0 0 1 1 *",
          webhook: { port: webhookPort, secretFile },
          notifications: {
            endpoints: [{ name: "team", url: receiver.url, secretFile: notifySecretFile }],
            unhealthyAfter: "20s",
          },
          commitStatus: {
            provider: "gitea",
            apiUrl: `${gitea.url}/api/v1`,
            tokenFile,
            fleet: FLEET,
            interval: "1s",
          },
        },
      });
    service = startService("commit-status");
    await gitea.api("POST", `/repos/${repo.owner}/${repo.name}/hooks`, {
      type: "gitea",
      active: true,
      events: ["push"],
      config: { url: `http://127.0.0.1:${webhookPort}/webhook`, content_type: "json", secret: webhookSecret },
    });
  }, 600_000);

  afterAll(async () => {
    await service?.stop();
    await removeHubCrs();
    await resetRolloutState(hub, NS);
    await gitea?.stop();
    await receiver?.close();
    console.log("commit status figures:", JSON.stringify(figures));
  });

  it("a first rollout: success per cluster and for the fleet on the commit, once healthy and soaked", async () => {
    const first = await push({ "clusters/rollout.yaml": policy, ...crFiles() }, "Serving 1.23 on two spokes");
    const started = Date.now();
    const done = await waitStates(
      first,
      { [context()]: "success", [context(SPOKES[0])]: "success", [context(SPOKES[1])]: "success" },
      "every status of the first commit success",
      420_000,
    );
    figures.firstRolloutMs = Date.now() - started;
    expect(done.get(context())?.description).toMatch(
      /^2\/2 clusters healthy; rollout of [0-9a-f]{12} has reached every wave/,
    );
    expect(done.get(context(SPOKES[0]))?.description).toBe("healthy: Serving 1.23.0");
    // The statuses name the commit the rollout started at, not the bot's status commits after it.
    expect(await rolloutCommit()).toBe(first);
    figures.firstRolloutPosts = await posted();
  }, 480_000);

  it("a change: the remaining wave pends with the gate's reason until the canary soaked, then success", async () => {
    const before = await posted();
    const change = await push(
      crFiles({ config: { autoscaler: { "stable-window": "70s" } } }),
      "stable window 70s",
    );
    // Only Gitea's webhook brings the sync (the poll is yearly): the rollout takes the change's name at once.
    const pushed = Date.now();
    await waitUntil(
      "the rollout named by the change",
      async () => ((await rolloutCommit()) === change ? true : undefined),
      30_000,
    );
    figures.webhookToRolloutMs = Date.now() - pushed;
    const done = await waitStates(
      change,
      { [context()]: "success", [context(SPOKES[0])]: "success", [context(SPOKES[1])]: "success" },
      "every status of the change success",
    );
    const log = await history(change);
    const second = log.filter((s) => s.context === context(SPOKES[1]));
    // spoke-6 waited for the canary: pending with the gate's words (its wave, the rollout's name), success last.
    expect(second[0]).toMatchObject({ status: "pending" });
    expect(second.map((s) => `${s.status}: ${s.description}`)).toContainEqual(
      `pending: rollout of ${change.slice(0, 12)} waits for its wave, remaining`,
    );
    expect(second.at(-1)?.status).toBe("success");
    // The canary's success came before the remaining wave's.
    const canarySuccess = log.find((s) => s.context === context(SPOKES[0]) && s.status === "success")!;
    expect(canarySuccess.id).toBeLessThan(second.at(-1)!.id);
    expect(done.get(context())?.description).toMatch(/^2\/2 clusters healthy/);
    figures.changePosts = (await posted()) - before;
    // People were told each step of it once, signed.
    await waitUntil("the completion told", async () =>
      toldAbout(change).includes("RolloutCompleted") ? true : undefined,
    );
    expect(toldAbout(change)).toEqual([
      "RolloutStarted",
      "WaveOpened canary",
      "WaveOpened remaining",
      "RolloutCompleted",
    ]);
    expect(receiver.told.every((t) => t.signed)).toBe(true);
    // Idle: nothing changes, nothing is posted (three rounds of the 1 s interval and more).
    const idle = await posted();
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(await posted()).toBe(idle);
    // A new leader reads what the last one posted: it posts nothing again, and tells nobody anything.
    const [statusesBefore, toldBefore] = [(await history(change)).length, receiver.told.length];
    await service.stop();
    service = startService("commit-status-next");
    await waitUntil("the new process leading", async () => {
      const text = await fetch(`http://127.0.0.1:${service.metricsPort}/metrics`).then(
        (r) => r.text(),
        () => "",
      );
      return /^knative_fleet_leader 1$/m.test(text) ? true : undefined;
    });
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(await posted()).toBe(0);
    expect((await history(change)).length).toBe(statusesBefore);
    expect(receiver.told.length).toBe(toldBefore);
  }, 300_000);

  it("a bad change fails on the canary with the halt's reason; the fix supersedes what the halt held", async () => {
    const bad = await push(crFiles({ workloads: BAD_WORKLOADS }), "activator on a node that does not exist");
    const started = Date.now();
    const halted = await waitStates(
      bad,
      { [context(SPOKES[0])]: "failure", [context()]: "failure" },
      "the canary's status a failure",
      (TIME_LIMIT_S + 120) * 1000,
    );
    figures.failureAfterMs = Date.now() - started;
    expect(halted.get(context(SPOKES[0]))?.description).toMatch(
      new RegExp(
        `^halted in wave canary: KnativeServing ${NS}/serving-${SPOKES[0]}: DeploymentsAvailable=False`,
      ),
    );
    expect(halted.get(context(SPOKES[1]))).toMatchObject({
      status: "pending",
      description: "held: the rollout halted in wave canary",
    });
    const fix = await push(crFiles({ config: { autoscaler: { "stable-window": "80s" } } }), "the fix");
    await waitStates(
      bad,
      { [context(SPOKES[1])]: "warning" },
      "the halted commit's pending status superseded",
      120_000,
    );
    const superseded = (await latest(bad)).get(context(SPOKES[1]));
    expect(superseded?.description).toBe(`superseded by ${fix.slice(0, 12)}`);
    // The failure stays: it is what happened to that commit.
    expect((await latest(bad)).get(context(SPOKES[0]))?.status).toBe("failure");
    await waitStates(
      fix,
      { [context()]: "success", [context(SPOKES[0])]: "success", [context(SPOKES[1])]: "success" },
      "every status of the fix success",
    );
    figures.totalPosts = await posted();
    // The halt told once with its reason; the canary, unhealthy past 20 s, told once, and its recovery.
    expect(toldAbout(bad)).toEqual(["RolloutStarted", "WaveOpened canary", "RolloutHalted canary"]);
    expect(receiver.told.find((t) => t.event === "RolloutHalted")?.text).toMatch(
      /DeploymentsAvailable=False/,
    );
    await waitUntil("the fix's completion told", async () =>
      toldAbout(fix).includes("RolloutCompleted") ? true : undefined,
    );
    const about = (cluster: string) =>
      receiver.told.filter((t) => t.cluster === cluster && t.event.startsWith("Cluster")).map((t) => t.event);
    expect(about(`${CLUSTER_PROFILE_NAMESPACE}/${SPOKES[0]}`)).toEqual([
      "ClusterUnhealthy",
      "ClusterRecovered",
    ]);
    expect(about(`${CLUSTER_PROFILE_NAMESPACE}/${SPOKES[1]}`)).toEqual([]);
    figures.notifications = receiver.told.length;
  }, 420_000);
});
