// The Play page's model and view (the committed dist/play.js, which dist-fresh.test.mjs proves is
// built from source): what the player is shown as a search goes, and which buttons they get when it
// fails — "search again" for a failure another search may not meet, none for an outdated build.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  initialModel,
  matched,
  matchEnded,
  playing,
  playView,
  probeEnded,
  regionRows,
  searchChanged,
  searchFailed,
  searchStarted,
} from "../dist/play.js";
import { MatchError } from "../dist/sdk/index.js";

const probes = [
  { region: "us", url: "http://us.test", challenge: "c2" },
  { region: "eu", url: "http://eu.test", challenge: "c1" },
];

function search(state, extra = {}) {
  return { search: "s-1", queue: "duel", state, reason: null, rtt_ms: {}, region: null, heartbeat_secs: 10, probes: [], assignment: null, ...extra };
}

const assignment = {
  match: "m-1",
  zone: "duel-1",
  kind: "arena",
  url: "ws://h/zones/duel-1",
  host: null,
  ticket: "t",
  expires_at: 0,
  players: ["ada", "bob"],
};

test("a search as it goes: regions measuring, measured, recorded, chosen; queued; found; playing", () => {
  let m = searchStarted(initialModel("duel"));
  assert.deepEqual(playView(initialModel("duel")).play, true);
  m = searchChanged(m, search("probing", { probes }));
  let v = playView(m);
  assert.equal(v.cancel, true);
  assert.equal(v.play, false);
  assert.match(v.headline, /Measuring/);
  assert.deepEqual(v.regions.map((r) => [r.region, r.text]), [["eu", "measuring…"], ["us", "measuring…"]]);

  m = probeEnded(m, { region: "eu", rttMs: 12, error: null });
  m = probeEnded(m, { region: "us", rttMs: null, error: new MatchError("probe_unavailable", "no host", { status: 503 }) });
  assert.deepEqual(regionRows(m).map((r) => r.text), ["12 ms", "no answer (probe_unavailable)"]);

  m = searchChanged(m, search("queued", { rtt_ms: { eu: 11 } }));
  v = playView(m);
  assert.match(v.headline, /Looking for an opponent \(queue duel\)/);
  assert.deepEqual(v.regions.map((r) => [r.region, r.text, r.chosen]), [["eu", "11 ms", false], ["us", "no answer (probe_unavailable)", false]]);

  m = searchChanged(m, search("proposed", { rtt_ms: { eu: 11 }, region: "eu" }));
  v = playView(m);
  assert.match(v.headline, /Opponent found/);
  assert.equal(v.regions[0].chosen, true);
  assert.equal(v.cancel, true);

  m = matched(m, assignment);
  v = playView(m);
  assert.match(v.headline, /connecting/);
  assert.match(v.detail, /ada, bob/);
  assert.equal(v.cancel || v.again || v.play, false);

  m = playing(m);
  assert.equal(playView(m).visible, false);
  m = matchEnded(m, { reason: "ZONE_STOPPED: match over", reload: false });
  v = playView(m);
  assert.equal(v.visible, true);
  assert.equal(v.again, true);
});

test("outdated: 'update to keep playing' and no button at all", () => {
  const e = new MatchError("client_outdated", "below the floor", { status: 426 });
  const v = playView(searchFailed(searchStarted(initialModel("duel")), e));
  assert.match(v.headline, /Update to keep playing/);
  assert.deepEqual([v.play, v.cancel, v.again], [false, false, false]);
  const reload = playView(matchEnded(playing(initialModel("duel")), { reason: "CONTENT_OUTDATED", reload: true }));
  assert.match(reload.headline, /Update to keep playing/);
  assert.equal(reload.again, false);
});

test("a retryable failure offers 'search again'; others do not; a cancel is back to Play", () => {
  const started = searchStarted(initialModel("duel"));
  for (const e of [
    new MatchError("no_show", "the search ended: expired (no_show)", { retryable: true }),
    new MatchError("no_probe_result", "no region", { retryable: true }),
    new MatchError("network", "no answer"),
  ]) {
    const v = playView(searchFailed(started, e));
    assert.equal(v.again, true, e.code);
    assert.equal(v.play, false);
    assert.match(v.headline, /No match this time/);
  }
  for (const e of [new MatchError("unknown_queue", "no queue duel", { status: 404 }), new MatchError("malformed", "bad")]) {
    const v = playView(searchFailed(started, e));
    assert.equal(v.again, false, e.code);
    assert.match(v.headline, /Cannot search/);
  }
  const noDev = playView(searchFailed(started, new MatchError("no_ticket", "x", { retryable: true }), "start the host with --dev"));
  assert.equal(noDev.again, false);
  assert.equal(noDev.detail, "start the host with --dev");

  const cancelled = searchFailed(started, new MatchError("cancelled", "the search was cancelled", { aborted: true }));
  assert.equal(cancelled.phase, "idle");
  const v = playView(cancelled);
  assert.equal(v.play, true);
  assert.equal(v.detail, "Search cancelled.");
  assert.deepEqual(v.regions, [], "the cancelled search's regions are gone");
});
