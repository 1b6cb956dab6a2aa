import { createHmac } from "node:crypto";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeClient } from "../../src/kube/client.ts";
import { peekRolloutState, ROLLOUT_STATE_CONFIGMAP } from "../../src/rollout/state.ts";
import type { Gitea, GiteaRepo } from "../sandbox/gitea.ts";
import type { Sandbox } from "../sandbox/index.ts";
import { freePort } from "../sandbox/processes.ts";
import { crText } from "./fleet-files.ts";
import { startFleetProcess } from "./fleet-service.ts";
import { pushChangeOverHttp } from "./git-server.ts";
import type { ServiceProcess } from "./service-process.ts";
import { waitUntil } from "./wait.ts";

// A fleet whose repository lives on the sandbox's Gitea: knative-fleet as a real process reading it with a
// token, synced by Gitea's push webhook alone (the poll runs once a year), posting commit statuses through
// Gitea's API and telling a loopback webhook receiver; and the readers the tests check them with.

/** A notification as the loopback receiver took it, its signature checked. */
export interface Told {
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
export interface GiteaStatus {
  id: number;
  status: string;
  context: string;
  description: string;
}

export interface GiteaFleetOptions {
  sandbox: Sandbox;
  gitea: Gitea;
  /** The hub namespace of the fleet's CRs and its rollout state. */
  namespace: string;
  /** The fleet's name in the commit statuses' contexts. */
  fleet: string;
  /** How long a cluster may stay unhealthy before people are told. */
  unhealthyAfter: string;
}

/** A repository on Gitea, the service that rolls it out, and what the tests read of both. */
export async function giteaFleet(options: GiteaFleetOptions) {
  const { sandbox, gitea, namespace, fleet } = options;
  const repo: GiteaRepo = await gitea.createRepo("fleet");
  const scratch = mkdtempSync(join(tmpdir(), `${namespace}-test-`));
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
  const receiver = await startReceiver("notify-secret");
  const start = (name: string): ServiceProcess =>
    startFleetProcess({
      sandbox,
      scratch,
      name,
      service: { repositoryUrl: repo.cloneUrl, namespace, statusInterval: "2s" },
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
          unhealthyAfter: options.unhealthyAfter,
        },
        commitStatus: { provider: "gitea", apiUrl: `${gitea.url}/api/v1`, tokenFile, fleet, interval: "1s" },
      },
    });
  await gitea.api("POST", `/repos/${repo.owner}/${repo.name}/hooks`, {
    type: "gitea",
    active: true,
    events: ["push"],
    config: { url: `http://127.0.0.1:${webhookPort}/webhook`, content_type: "json", secret: webhookSecret },
  });

  /**
   * Every status of the commit, oldest first. Paged in the commit's own index order (Gitea's `highestindex`
   * is ascending): its default order, by creation second, ties in arbitrary order per query, so a page
   * boundary could skip the newest status while the service posts.
   */
  const history = async (commit: string): Promise<GiteaStatus[]> => {
    const all: GiteaStatus[] = [];
    for (let page = 1; ; page++) {
      const batch = await gitea.api<GiteaStatus[]>(
        "GET",
        `/repos/${repo.owner}/${repo.name}/commits/${commit}/statuses?sort=highestindex&limit=50&page=${page}`,
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
  return {
    repo,
    receiver,
    start,
    history,
    latest,
    /** The contexts of a commit's statuses: the fleet's, or a cluster's of the sandbox's namespace. */
    context: (clusterProfile?: string) =>
      clusterProfile ? `knative-fleet/${fleet}/${clusterProfile}` : `knative-fleet/${fleet}`,
    /** Waits until each context's newest status on the commit has the state wanted; their newest statuses. */
    waitStates: (commit: string, want: Record<string, string>, what: string, timeoutMs = 240_000) =>
      waitUntil(
        what,
        async () => {
          const states = await statesOf(commit);
          return Object.entries(want).every(([c, s]) => states[c] === s) ? latest(commit) : undefined;
        },
        timeoutMs,
      ),
    /** What the receiver was told about the commit, as `Event [wave]`, in order. */
    toldAbout: (commit: string) =>
      receiver.told.filter((t) => t.commit === commit).map((t) => `${t.event}${t.wave ? ` ${t.wave}` : ""}`),
    /** A person's push (to main, or to a new branch for a pull request); the commit it made. */
    push: (files: Record<string, string | null>, message: string, branch?: string) =>
      pushChangeOverHttp(
        repo.cloneUrl,
        { username: gitea.user, password: gitea.token },
        { files, message, ...(branch && { branch }) },
      ),
    close: () => receiver.close(),
  };
}

/** How many statuses the service posted (its counter). */
export async function postedStatuses(service: ServiceProcess): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${service.metricsPort}/metrics`)).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith('knative_fleet_commit_statuses_total{outcome="posted"}'));
  return Number(line?.split(" ")[1] ?? Number.NaN);
}

/** The commit the rollout on the hub started at. */
export async function rolloutCommit(hub: KubeClient, namespace: string): Promise<string | undefined> {
  const configMap = await hub.get("v1", "ConfigMap", namespace, ROLLOUT_STATE_CONFIGMAP);
  return peekRolloutState(configMap?.data as Record<string, unknown> | undefined)?.commit;
}

/** What a test changes in the fleet's Serving CRs: config sections, workloads. */
export interface ServingSpec {
  config?: Record<string, Record<string, string>>;
  workloads?: unknown;
}

/** One KnativeServing 1.23 file per spoke, on Kourier (ClusterIP), with the spec's changes. */
export const servingFiles = (spokes: readonly string[], namespace: string, spec: ServingSpec = {}) =>
  Object.fromEntries(
    spokes.map((spoke) => [
      `clusters/serving-${spoke}.yaml`,
      crText({
        name: `serving-${spoke}`,
        namespace,
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
