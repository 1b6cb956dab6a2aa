import { describe, expect, it } from "vitest";
import { count } from "../../../src/text/count.ts";

describe("count", () => {
  it("words the noun for its number: one in the singular, any other in the plural", () => {
    expect(count(1, "error")).toBe("1 error");
    expect(count(0, "error")).toBe("0 errors");
    expect(count(2, "more field")).toBe("2 more fields");
    expect(count(1, "series", "series")).toBe("1 series");
    expect(count(3, "series", "series")).toBe("3 series");
  });
});
