import { readFileSync } from "node:fs";
import { request } from "node:https";

/**
 * A minimal Kubernetes REST client for the sandbox's own set-up and its proof tests (client certificate
 * or bearer token). The sandbox deliberately does not use the product's client code, so a bug there
 * cannot hide behind its own test bed.
 */
export interface AdminEndpoint {
  server: string;
  caFile: string;
  certFile?: string;
  keyFile?: string;
  token?: string;
}

export interface KubeResponse {
  status: number;
  body: unknown;
  text: string;
}

export function kubeRequest(
  endpoint: AdminEndpoint,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<KubeResponse> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${endpoint.server}${path}`,
      {
        method,
        ca: readFileSync(endpoint.caFile),
        ...(endpoint.certFile && endpoint.keyFile
          ? { cert: readFileSync(endpoint.certFile), key: readFileSync(endpoint.keyFile) }
          : {}),
        headers: {
          accept: "application/json",
          ...(endpoint.token ? { authorization: `Bearer ${endpoint.token}` } : {}),
          ...(payload === undefined
            ? {}
            : { "content-type": contentType, "content-length": Buffer.byteLength(payload) }),
        },
        timeout: 15_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // plain text answers (healthz, metrics) stay text
          }
          resolve({ status: res.statusCode ?? 0, body: parsed, text });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: timed out`)));
    req.on("error", reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

/** Server-side apply of one object at `path` (the object's own URL); throws with the server's message. */
export async function apply(endpoint: AdminEndpoint, path: string, object: unknown): Promise<unknown> {
  const res = await kubeRequest(
    endpoint,
    "PATCH",
    `${path}?fieldManager=knative-fleet-sandbox&force=true`,
    object,
    "application/apply-patch+yaml",
  );
  if (res.status >= 300) throw new Error(`apply ${path}: HTTP ${res.status}: ${res.text}`);
  return res.body;
}

export async function getJson(endpoint: AdminEndpoint, path: string): Promise<unknown | undefined> {
  const res = await kubeRequest(endpoint, "GET", path);
  if (res.status === 404) return undefined;
  if (res.status >= 300) throw new Error(`GET ${path}: HTTP ${res.status}: ${res.text}`);
  return res.body;
}
