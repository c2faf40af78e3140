// Finding the outside programs and services the browser tests need, and saying clearly when one is
// missing: the test is then reported as skipped (never as passed), and under CI=true the run fails
// instead.
import { appendFileSync, existsSync } from "node:fs";
import { delimiter, join } from "node:path";

import { chromiumPath } from "./harness.mjs";

/**
 * Reports `suite` as skipped for `reason`: a `SKIPPED:` line on stderr, also appended to
 * $ZONEKEEP_SKIPPED_LOG when set (scripts/test-all.sh lists them at the end). Throws when CI=true,
 * where a missing service must fail the run.
 */
function skipped(suite, reason) {
  if (process.env.CI === "true") {
    throw new Error(`${suite}: ${reason}, and CI=true requires it`);
  }
  const line = `SKIPPED: browser ${suite}: ${reason}`;
  console.error(line);
  if (process.env.ZONEKEEP_SKIPPED_LOG) appendFileSync(process.env.ZONEKEEP_SKIPPED_LOG, `${line}\n`);
}

/**
 * The Chromium executable for `suite`, or null after reporting the suite as skipped.
 * Throws when CI=true, where a missing browser must fail the run.
 */
export function requireChromium(suite) {
  const path = chromiumPath();
  if (path !== null) return path;
  skipped(suite, "no Chromium at $ZONEKEEP_CHROMIUM or /usr/bin/chromium");
  return null;
}

/** The first `name` executable on $PATH, or null. */
function onPath(name) {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir !== "" && existsSync(join(dir, name))) return join(dir, name);
  }
  return null;
}

/**
 * PostgreSQL for `suite`: `{ url, psql }` (the URL from $ZONEKEEP_TEST_POSTGRES, as the Rust tests
 * take it, and the `psql` client that makes each run a schema of its own), or null after reporting
 * the suite as skipped. Throws when CI=true, where the database must be there.
 */
export function requirePostgres(suite) {
  const url = process.env.ZONEKEEP_TEST_POSTGRES ?? "";
  if (url === "") {
    skipped(suite, "ZONEKEEP_TEST_POSTGRES not set");
    return null;
  }
  const psql = onPath("psql");
  if (psql === null) {
    skipped(suite, "no psql on $PATH (the PostgreSQL client makes the test's schema)");
    return null;
  }
  return { url, psql };
}

/**
 * The NATS server (with JetStream) for `suite`: its URL from $ZONEKEEP_TEST_NATS, as the Rust tests
 * take it, or null after reporting the suite as skipped. Throws when CI=true, where it must be there.
 */
export function requireNats(suite) {
  const url = process.env.ZONEKEEP_TEST_NATS ?? "";
  if (url === "") {
    skipped(suite, "ZONEKEEP_TEST_NATS not set");
    return null;
  }
  return url;
}
