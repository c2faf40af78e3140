/**
 * Content versions (PROTOCOL.md §4.1.2): the dotted numbers a client and a host compare, so a client
 * built for older game content than the host accepts is told to reload.
 */

import { LIMITS } from "./protocol.js";

/**
 * Compares two content versions (§4.1.2), dotted numbers such as `1.4.0`, numerically component by
 * component, a missing component counting as 0: negative when `a` is older than `b`, 0 when they
 * are the same version (`1.4` and `1.4.0`), positive when `a` is newer. Null when either is not a
 * dotted number (empty included) or is longer than 64 bytes.
 */
export function compareContentVersions(a: string, b: string): number | null {
  const parse = (v: string): string[] | null => {
    if (v.length === 0 || v.length > LIMITS.contentVersion || !/^[0-9]+(\.[0-9]+)*$/.test(v)) return null;
    const parts = v.split(".").map((p) => p.replace(/^0+/, ""));
    while (parts.length > 0 && parts[parts.length - 1] === "") parts.pop();
    return parts;
  };
  const pa = parse(a);
  const pb = parse(b);
  if (pa === null || pb === null) return null;
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? "";
    const y = pb[i] ?? "";
    // Without leading zeros, the longer run of digits is the larger number (no precision limit).
    if (x.length !== y.length) return x.length < y.length ? -1 : 1;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}
