/**
 * `1 error`, `2 errors`, `0 files`: a number and its noun worded for it. The plural is the noun and an `s`
 * unless given (`count(n, "series", "series")`).
 */
export function count(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}
