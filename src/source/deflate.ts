/**
 * Makes isomorphic-git deflate with pako, as it already inflates. Where the runtime has the web
 * CompressionStream, isomorphic-git deflates through it and reads the result with a fetch Response; in Node
 * that loads Node's own bundled undici and its web streams, +12.6 MiB of RSS at the first status commit,
 * beside the undici this service runs on. It takes pako when the constructor is missing. Nothing else this
 * service runs uses CompressionStream, so `run` removes it before the first commit.
 */
export function deflateWithoutWebStreams(): void {
  delete (globalThis as { CompressionStream?: unknown }).CompressionStream;
}
