import { describe, expect, it } from "vitest";
import { classifyGitError, GitSourceError, redactUrl } from "../../../src/source/errors.ts";

const url = "https://bot:s3cret@git.example.com/fleet.git";
const httpError = (statusCode: number) =>
  Object.assign(new Error("HTTP Error"), { code: "HttpError", data: { statusCode } });

describe("classifyGitError", () => {
  it.each([
    [401, "auth"],
    [403, "auth"],
    [404, "not-found"],
    [429, "network"],
    [500, "network"],
    [503, "network"],
    [400, "protocol"],
  ])("HTTP %i is %s", (status, kind) => {
    expect(classifyGitError(httpError(status), "fetch", url).kind).toBe(kind);
  });

  it("types socket failures as network and certificate failures as tls", () => {
    const socket = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    const cert = Object.assign(new Error("self-signed certificate"), { code: "DEPTH_ZERO_SELF_SIGNED_CERT" });
    expect(classifyGitError(socket, "head", url).kind).toBe("network");
    expect(classifyGitError(cert, "head", url).kind).toBe("tls");
  });

  it("types isomorphic-git's missing ref and push rejections", () => {
    const missing = Object.assign(new Error("Could not find main."), { code: "NotFoundError" });
    const nonFastForward = Object.assign(new Error("Push rejected"), {
      code: "PushRejectedError",
      data: { reason: "not-fast-forward" },
    });
    const refused = Object.assign(new Error("not updated"), {
      code: "GitPushError",
      data: { prettyDetails: "\n  - refs/heads/main: failed to update ref" },
    });
    expect(classifyGitError(missing, "fetch", url).kind).toBe("not-found");
    expect(classifyGitError(nonFastForward, "push", url).kind).toBe("rejected");
    expect(classifyGitError(refused, "push", url).kind).toBe("rejected");
  });

  it("keeps an unknown failure as internal, with its cause", () => {
    const bug = new TypeError("undefined is not a function");
    const classified = classifyGitError(bug, "read", url);
    expect(classified.kind).toBe("internal");
    expect(classified.cause).toBe(bug);
  });

  it("passes a GitSourceError through unchanged", () => {
    const typed = new GitSourceError("timeout", "fetch", "slow");
    expect(classifyGitError(typed, "fetch", url)).toBe(typed);
  });

  it("never puts credentials from the URL into the message", () => {
    const message = classifyGitError(httpError(500), "fetch", url).message;
    expect(message).toContain("git.example.com/fleet.git");
    expect(message).not.toContain("s3cret");
    expect(message).not.toContain("bot");
  });
});

describe("redactUrl", () => {
  it("drops user info and keeps the rest", () => {
    expect(redactUrl(url)).toBe("https://git.example.com/fleet.git");
    expect(redactUrl("not a url")).toBe("<invalid url>");
  });
});
