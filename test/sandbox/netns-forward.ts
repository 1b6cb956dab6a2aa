// Carries TCP connections to loopback ports across a network namespace boundary through Unix sockets, so a
// real node in a namespace of its own (its host-network pods get their own loopback and ports) still reaches
// the sandbox's servers at the same 127.0.0.1 addresses, and nothing but loopback is ever addressed.
//   node netns-forward.ts host DIR PORT...    in the host namespace: DIR/PORT.sock -> 127.0.0.1:PORT
//   node netns-forward.ts node DIR PORT...    in the node's namespace: 127.0.0.1:PORT -> DIR/PORT.sock
import { rmSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { join } from "node:path";

const [side, dir, ...ports] = process.argv.slice(2);
if (
  (side !== "host" && side !== "node") ||
  !dir ||
  ports.length === 0 ||
  ports.some((p) => !/^\d+$/.test(p))
) {
  process.stderr.write("usage: netns-forward.ts host|node DIR PORT...\n");
  process.exit(2);
}

const pipe = (a: Socket, b: Socket) => {
  a.pipe(b).on("error", () => a.destroy());
  b.pipe(a).on("error", () => b.destroy());
  a.on("error", () => b.destroy());
  b.on("error", () => a.destroy());
};

const listening = ports.map(Number).map((port) => {
  const socketPath = join(dir, `${port}.sock`);
  const server = createServer((client) =>
    pipe(client, side === "host" ? connect(port, "127.0.0.1") : connect(socketPath)),
  );
  return new Promise<void>((resolve) => {
    if (side === "host") {
      rmSync(socketPath, { force: true });
      server.listen(socketPath, resolve);
    } else {
      server.listen(port, "127.0.0.1", resolve);
    }
  });
});
// The node waits for this line before its containerd and kubelet start: a connection they open first could
// take one of these ports as its own local port, and the listen would then fail (EADDRINUSE).
await Promise.all(listening);
process.stdout.write(`netns-forward ${process.pid}: listening\n`);
