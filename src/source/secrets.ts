import { readFile } from "node:fs/promises";
import type { GitAuth, SecretRef } from "./spec.ts";

/** Reads a secret at the moment it is needed, so a rotated Secret takes effect without a restart. */
export async function readSecret(ref: SecretRef): Promise<string> {
  if ("file" in ref) return (await readFile(ref.file, "utf8")).trim();
  const value = process.env[ref.env];
  if (value === undefined || value === "") throw new Error(`the environment variable ${ref.env} is not set`);
  return value.trim();
}

/** The Authorization header for the credentials, sent with every request (no 401 round trip first). */
export async function authorizationHeader(auth: GitAuth): Promise<string> {
  if (auth.type === "bearer") return `Bearer ${await readSecret(auth.token)}`;
  const password = await readSecret(auth.password);
  return `Basic ${Buffer.from(`${auth.username}:${password}`).toString("base64")}`;
}
