// Finding the outside programs the browser tests need, and saying clearly when one is missing: the
// test is then reported as skipped (never as passed), and under CI=true the run fails instead.
import { appendFileSync } from "node:fs";

import { chromiumPath } from "./harness.mjs";

/**
 * The Chromium executable for `suite`, or null after reporting the suite as skipped: a `SKIPPED:` line
 * on stderr, also appended to $ZONEKEEP_SKIPPED_LOG when set (scripts/test-all.sh lists them at the end).
 * Throws when CI=true, where a missing browser must fail the run.
 */
export function requireChromium(suite) {
  const path = chromiumPath();
  if (path !== null) return path;
  const reason = "no Chromium at $ZONEKEEP_CHROMIUM or /usr/bin/chromium";
  if (process.env.CI === "true") {
    throw new Error(`${suite}: ${reason}, and CI=true requires it`);
  }
  const line = `SKIPPED: browser ${suite}: ${reason}`;
  console.error(line);
  if (process.env.ZONEKEEP_SKIPPED_LOG) appendFileSync(process.env.ZONEKEEP_SKIPPED_LOG, `${line}\n`);
  return null;
}
