// Benchmark: the shooting gallery's confirmed-hit rate with lag compensation at a 150 ms round trip
// (NetSim 70 ms + U(0, 10) ms each way) and 0, 2 and 5 % loss, over WebSocket (Chromium without QUIC)
// and over WebTransport. A scripted player clicks the centre of targets exactly where the page draws
// them (gallery-shots.mjs); a shot the player saw hit should be confirmed. Each page gets its own
// NetSim setting (`/dev/netsim?sub=`, the subject of its ticket) and draws for a warm-up first, so
// its adaptive delay has met the loss before the shots. BENCHMARKS.md quotes the table it prints.
//
//   cargo build -p zonekeep
//   cd tests/browser && ZONEKEEP_CHROMIUM=/usr/bin/chromium node gallery-loss.mjs [shots] [warmup s]
//
// ZONEKEEP_BIN picks another binary; LOSSES=0,0.02 and TRANSPORTS=websocket narrow the runs;
// BLOCK_UDP=1 keeps a page that does not take `?transport=` on WebSocket for the WebSocket runs.
import { launchChromium, setNetSim, startServer } from "./harness.mjs";
import { summary, volley } from "./gallery-shots.mjs";
import { requireChromium } from "./services.mjs";

const SHOTS = Number(process.argv[2] ?? 100);
const WARMUP_S = Number(process.argv[3] ?? 15);
const LATENCY_MS = 70;
const JITTER_MS = 10;
const LOSSES = (process.env.LOSSES ?? "0,0.02,0.05").split(",").map(Number);
const TRANSPORTS = (process.env.TRANSPORTS ?? "websocket,webtransport").split(",");

/**
 * The page's own NetSim (`sub`), or, for a page that does not say its subject, the host-wide one;
 * a host from before NetSim was per subject takes the host-wide setting at `/dev/netsim`.
 */
async function setLink(base, setting, sub) {
  try {
    await setNetSim(base, setting, sub);
  } catch (e) {
    if (sub !== null || !String(e).includes("HTTP 404")) throw e;
    const r = await fetch(`${base}/dev/netsim`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(setting),
    });
    if (!r.ok) throw new Error(`/dev/netsim: HTTP ${r.status} ${await r.text()}`);
  }
}

const chromium = requireChromium("gallery-loss.mjs");
if (chromium === null) process.exit(2);
const server = await startServer();
const rows = [];
try {
  for (const transport of TRANSPORTS) {
    const browser = await launchChromium(chromium, { quic: transport === "webtransport" });
    try {
      for (const loss of LOSSES) {
        const zone = `gallery-loss-${transport}-${Math.round(loss * 100)}`;
        // A page that does not take `?transport=` (an older build) is kept off WebTransport by a
        // network that drops UDP.
        if (process.env.BLOCK_UDP === "1" && transport === "websocket") await setLink(server.base, { block_udp: true }, null);
        const page = await browser.context.newPage();
        const errors = [];
        page.on("pageerror", (e) => errors.push(String(e)));
        await page.goto(`${server.base}/gallery?zone=${zone}&name=marksman&transport=${transport}`);
        await page.waitForFunction(
          () => window.gallery?.state === "open" && Object.keys(window.gallery.targets).length > 0,
          null,
          { timeout: 30000 },
        );
        const sub = await page.evaluate(() => window.gallery.subject ?? null);
        await setLink(server.base, { latency_ms: LATENCY_MS, jitter_ms: JITTER_MS, loss }, sub);
        await page.waitForFunction((min) => window.gallery.rttMs >= min, LATENCY_MS, { timeout: 60000 });
        await page.waitForTimeout(WARMUP_S * 1000);
        const shots = await volley(page, SHOTS, true);
        const s = summary(shots);
        const link = await page.evaluate(() => ({
          rtt: window.gallery.rttMs,
          delay: window.gallery.delayMs,
          transport: window.gallery.transport ?? "?",
        }));
        const behind = shots.map((r) => r.ticksBehind).sort((a, b) => a - b);
        const row = {
          transport: link.transport,
          loss,
          confirmed: s.confirmed,
          seen: s.seen,
          rate: s.rate,
          medianBehind: s.medianBehind,
          maxBehind: behind[behind.length - 1] ?? 0,
          rtt: Math.round(link.rtt),
          delay: Math.round(link.delay),
          errors: errors.length,
        };
        rows.push(row);
        console.log(JSON.stringify(row));
        if (sub === null) await setLink(server.base, { latency_ms: 0, jitter_ms: 0, loss: 0 }, null);
        await page.close();
      }
    } finally {
      await browser.close();
    }
  }
} finally {
  await server.stop();
}
console.log("\n| transport | loss | confirmed / seen hit | rate | judged ticks back (median · max) | page RTT · delay at the end |");
console.log("|---|---|---|---|---|---|");
for (const r of rows) {
  console.log(
    `| ${r.transport} | ${(r.loss * 100).toFixed(0)} % | ${r.confirmed} / ${r.seen} | **${(100 * r.rate).toFixed(1)} %** | ` +
      `${r.medianBehind} · ${r.maxBehind} | ${r.rtt} ms · ${r.delay} ms |`,
  );
}
