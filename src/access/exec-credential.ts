import { X509Certificate } from "node:crypto";
import { createSecureContext } from "node:tls";
import { inspect } from "node:util";
import { z } from "zod";
import { formatFieldPath, lowercaseFirst } from "../fleet/diagnostic.ts";
import type { ExecApiVersion } from "./provider-config.ts";

/**
 * The ExecCredential exchange of client.authentication.k8s.io (v1 and v1beta1 share the JSON shape): what a
 * credential plugin is told in KUBERNETES_EXEC_INFO and what it must print. Pure; exec-plugin.ts runs plugins.
 */

/** spec.cluster of the ExecCredential a plugin receives: the spoke it authenticates to. */
export interface ExecClusterInfo {
  server: string;
  "certificate-authority-data"?: string;
  "tls-server-name"?: string;
  "insecure-skip-tls-verify"?: boolean;
  "proxy-url"?: string;
  "disable-compression"?: boolean;
  /** The ClusterProfile's `client.authentication.k8s.io/exec` extension, passed through untouched. */
  config?: unknown;
}

/** The KUBERNETES_EXEC_INFO value. Plugins never get a terminal here, so spec.interactive is always false. */
export function execCredentialInput(
  apiVersion: ExecApiVersion,
  cluster: ExecClusterInfo | undefined,
): string {
  return JSON.stringify({
    apiVersion,
    kind: "ExecCredential",
    spec: { ...(cluster === undefined ? {} : { cluster }), interactive: false },
  });
}

/** A credential a plugin returned. It prints and serializes without its secret parts. */
export class PluginCredential {
  readonly token: string | undefined;
  readonly clientCertificate: { cert: string; key: string } | undefined;
  /** When it stops working: the plugin's expirationTimestamp or the client certificate's notAfter. */
  readonly expiresAt: Date | undefined;
  readonly obtainedAt: Date;
  readonly #summary: string;

  constructor(fields: {
    token?: string;
    clientCertificate?: { cert: string; key: string };
    expiresAt?: Date;
    obtainedAt: Date;
    summary: string;
  }) {
    this.token = fields.token;
    this.clientCertificate = fields.clientCertificate;
    this.expiresAt = fields.expiresAt;
    this.obtainedAt = fields.obtainedAt;
    this.#summary = fields.summary;
  }

  /** e.g. `bearer token, expires 2026-01-01T00:00:00.000Z` or `client certificate CN=fleet, expires ...`. */
  describe(): string {
    return this.#summary;
  }

  toJSON(): string {
    return this.#summary;
  }

  [inspect.custom](): string {
    return `PluginCredential(${this.#summary})`;
  }

  /** The secret values, so a plugin's stderr can be logged without them. */
  secrets(): string[] {
    return [this.token, this.clientCertificate?.key].filter((s): s is string => s !== undefined && s !== "");
  }
}

const nullableString = z
  .string()
  .nullish()
  .transform((s) => s ?? undefined);

const ExecCredentialOutputSchema = z.object({
  apiVersion: z.string(),
  kind: z.literal("ExecCredential"),
  status: z.object({
    expirationTimestamp: nullableString,
    token: nullableString,
    clientCertificateData: nullableString,
    clientKeyData: nullableString,
  }),
});

/**
 * Checks a plugin's stdout the way client-go does (same apiVersion as configured, a token or a certificate
 * and key pair) and more: the pair must be valid PEM that belongs together, and the credential must not have
 * expired already. Throws an Error whose message never quotes stdout, which holds the secret.
 */
export function parseExecCredential(stdout: string, expected: ExecApiVersion, now: Date): PluginCredential {
  if (stdout.trim() === "")
    throw new Error("the plugin printed nothing on stdout; it must print an ExecCredential");
  let json: unknown;
  try {
    json = JSON.parse(stdout);
  } catch {
    // JSON.parse's message quotes the input, which may be a bare token: it is not passed on.
    throw new Error(
      `the plugin's stdout (${Buffer.byteLength(stdout)} bytes, not shown as it may hold a secret) is not JSON; ` +
        "it must print an ExecCredential",
    );
  }
  const apiVersion = (json as { apiVersion?: unknown } | null)?.apiVersion;
  if (typeof apiVersion === "string" && apiVersion !== expected) {
    throw new Error(
      `the plugin answered with apiVersion ${apiVersion}, but the provider's execConfig.apiVersion is ${expected}`,
    );
  }
  const parsed = ExecCredentialOutputSchema.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map(
      (i) => `${formatFieldPath(i.path) || "(top level)"}: ${lowercaseFirst(i.message)}`,
    );
    throw new Error(`the plugin's output is not an ExecCredential: ${problems.join("; ")}`);
  }
  const { token, clientCertificateData: cert, clientKeyData: key, expirationTimestamp } = parsed.data.status;
  if ((cert === undefined) !== (key === undefined)) {
    throw new Error(
      "the plugin returned only one of status.clientCertificateData and status.clientKeyData; both are needed",
    );
  }
  if (token === undefined && cert === undefined) {
    throw new Error(
      "the plugin returned neither status.token nor status.clientCertificateData and status.clientKeyData",
    );
  }

  let expiresAt: Date | undefined;
  if (expirationTimestamp !== undefined) {
    expiresAt = new Date(expirationTimestamp);
    if (Number.isNaN(expiresAt.getTime())) {
      throw new Error(`status.expirationTimestamp "${expirationTimestamp}" is not an RFC 3339 time`);
    }
  }
  const parts: string[] = [];
  if (token !== undefined) parts.push("bearer token");
  if (cert !== undefined && key !== undefined) {
    const leaf = checkCertificatePair(cert, key);
    parts.push(`client certificate ${leaf.subject.replaceAll("\n", ",")}`);
    // A certificate stops working at notAfter even when the plugin gives no expirationTimestamp.
    if (expiresAt === undefined || leaf.validToDate < expiresAt) expiresAt = leaf.validToDate;
  }
  if (expiresAt !== undefined && expiresAt <= now) {
    throw new Error(
      `the plugin returned a credential that expired at ${expiresAt.toISOString()} (now ${now.toISOString()})`,
    );
  }
  return new PluginCredential({
    token,
    clientCertificate: cert !== undefined && key !== undefined ? { cert, key } : undefined,
    expiresAt,
    obtainedAt: now,
    summary: `${parts.join(" and ")}${expiresAt === undefined ? "" : `, expires ${expiresAt.toISOString()}`}`,
  });
}

function checkCertificatePair(cert: string, key: string): X509Certificate {
  try {
    createSecureContext({ cert, key });
    return new X509Certificate(cert);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === "ERR_OSSL_X509_KEY_VALUES_MISMATCH"
        ? "the key does not belong to the certificate"
        : `not a PEM certificate and private key (${code ?? (err as Error).message})`;
    throw new Error(`status.clientCertificateData/clientKeyData: ${why}`);
  }
}
