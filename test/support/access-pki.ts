import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clientExtensions, createCa, serverExtensions, signedCert } from "../sandbox/pki.ts";

// A test PKI, made with openssl on first use, once per process (a test file's worker, a script); no key
// material is kept in the repository: a CA with a serving certificate (127.0.0.1, localhost,
// spoke.fixture.invalid) and a client certificate it signed, plus an unrelated CA (other-ca.crt).

let made: string | undefined;

function pkiDir(): string {
  if (made !== undefined) return made;
  const dir = mkdtempSync(join(tmpdir(), "knative-fleet-access-pki-"));
  createCa(dir, "fixture-ca");
  signedCert(
    dir,
    "server",
    "/CN=spoke.fixture.invalid",
    serverExtensions(["DNS:localhost", "IP:127.0.0.1", "DNS:spoke.fixture.invalid"]),
  );
  signedCert(dir, "client", "/CN=fixture-client", clientExtensions);
  mkdirSync(join(dir, "other"));
  createCa(join(dir, "other"), "unrelated-ca");
  copyFileSync(join(dir, "other", "ca.crt"), join(dir, "other-ca.crt"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  made = dir;
  return dir;
}

/** The path of a file of the PKI: ca.crt, server.crt, server.key, client.crt, client.key, other-ca.crt. */
export const testdataPath = (name: string): string => join(pkiDir(), name);
export const testdata = (name: string): string => readFileSync(testdataPath(name), "utf8");
export const base64 = (text: string): string => Buffer.from(text, "utf8").toString("base64");
