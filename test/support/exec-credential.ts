import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Runs an exec credential plugin exactly as a Kubernetes client does with provideClusterInfo: true. */
export async function execCredential(
  command: string,
  env: Record<string, string>,
  cluster: object,
): Promise<string> {
  const info = {
    apiVersion: "client.authentication.k8s.io/v1",
    kind: "ExecCredential",
    spec: { cluster, interactive: false },
  };
  const { stdout } = await run(command, [], {
    env: { ...process.env, ...env, KUBERNETES_EXEC_INFO: JSON.stringify(info) },
    timeout: 10_000,
  });
  const credential = JSON.parse(stdout) as { kind: string; status?: { token?: string } };
  if (credential.kind !== "ExecCredential" || !credential.status?.token) {
    throw new Error(`${command} printed no ExecCredential token`);
  }
  return credential.status.token;
}
