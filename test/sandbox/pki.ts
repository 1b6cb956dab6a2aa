import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** PEM files of one cluster's PKI, all inside the cluster's state directory. */
export interface ClusterPki {
  caCert: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
  adminCert: string;
  adminKey: string;
  /** A non-admin client identity, bound to cluster-admin by RBAC, for the kubeconfig-secretreader plugin. */
  fleetCert: string;
  fleetKey: string;
  serviceAccountKey: string;
  serviceAccountPub: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

/** A P-256 key in PKCS#8, which every consumer here (Go's crypto, node:tls) reads. */
function ecKey(dir: string, file: string): void {
  openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", file], dir);
}

/** A certificate and key for `name`, signed by the CA in dir (ca.crt, ca.key). */
export function signedCert(
  dir: string,
  name: string,
  subject: string,
  extensions: string[],
): { cert: string; key: string } {
  const key = `${name}.key`;
  const csr = `${name}.csr`;
  const cert = `${name}.crt`;
  const ext = `${name}.ext`;
  ecKey(dir, key);
  openssl(["req", "-new", "-key", key, "-subj", subject, "-out", csr], dir);
  writeFileSync(join(dir, ext), `${extensions.join("\n")}\n`);
  openssl(
    [
      "x509",
      "-req",
      "-in",
      csr,
      "-CA",
      "ca.crt",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-days",
      "365",
    ].concat(["-sha256", "-extfile", ext, "-out", cert]),
    dir,
  );
  return { cert: join(dir, cert), key: join(dir, key) };
}

/** A self-signed CA in dir (ca.crt, ca.key). */
export function createCa(dir: string, commonName: string): void {
  ecKey(dir, "ca.key");
  openssl(
    ["req", "-x509", "-new", "-key", "ca.key", "-subj", `/CN=${commonName}`, "-days", "3650"]
      .concat([
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
      ])
      .concat(["-out", "ca.crt"]),
    dir,
  );
}

/** X.509 extensions of a serving certificate for the given subjectAltName entries. */
export const serverExtensions = (altNames: string[]): string[] => [
  "basicConstraints=CA:FALSE",
  "keyUsage=critical,digitalSignature,keyEncipherment",
  "extendedKeyUsage=serverAuth",
  `subjectAltName=${altNames.join(",")}`,
];

/** X.509 extensions of a client certificate. */
export const clientExtensions = [
  "basicConstraints=CA:FALSE",
  "keyUsage=critical,digitalSignature",
  "extendedKeyUsage=clientAuth",
];

/** Creates a CA of its own for one cluster, its apiserver's serving certificate and client identities. */
export function createClusterPki(dir: string, clusterName: string): ClusterPki {
  createCa(dir, `${clusterName}-ca`);
  const server = signedCert(
    dir,
    "apiserver",
    `/CN=${clusterName}-apiserver`,
    serverExtensions([
      "DNS:localhost",
      "IP:127.0.0.1",
      "DNS:kubernetes",
      "DNS:kubernetes.default",
      "DNS:kubernetes.default.svc",
    ]),
  );
  const clientExt = clientExtensions;
  const admin = signedCert(dir, "admin", "/O=system:masters/CN=sandbox-admin", clientExt);
  const fleet = signedCert(dir, "fleet", "/CN=knative-fleet-cert", clientExt);
  ecKey(dir, "sa.key");
  openssl(["ec", "-in", "sa.key", "-pubout", "-out", "sa.pub"], dir);
  return {
    caCert: join(dir, "ca.crt"),
    caKey: join(dir, "ca.key"),
    serverCert: server.cert,
    serverKey: server.key,
    adminCert: admin.cert,
    adminKey: admin.key,
    fleetCert: fleet.cert,
    fleetKey: fleet.key,
    serviceAccountKey: join(dir, "sa.key"),
    serviceAccountPub: join(dir, "sa.pub"),
  };
}

export const base64File = (path: string): string => readFileSync(path).toString("base64");
