// Scripted shooting at the gallery page's drawn targets, shared by the gallery's browser test and
// its benchmark under loss (gallery-loss.mjs).

/**
 * Runs in the page: fires `n` shots one after another, each at the centre of a drawn target, by a
 * pointer event on the canvas at the target's drawn position, and waits for each verdict before the
 * next. A target the zone already took down is still drawn for the interpolation delay; it is not
 * aimed at again. Returns the page's records of those shots.
 */
export async function volley(page, n, compensated) {
  return page.evaluate(
    async ({ n, compensated }) => {
      const g = window.gallery;
      g.setCompensation(compensated);
      const canvas = document.querySelector("canvas");
      const nextFrame = () => new Promise((r) => requestAnimationFrame(() => r()));
      const down = new Set();
      const fired = [];
      for (let i = 0; i < n; i++) {
        // A target drawn in the last frame and still up (a hit one respawns with a new id).
        let target;
        for (let wait = 0; target === undefined; wait++) {
          if (wait > 600) throw new Error("no fresh target drawn for 600 frames");
          await nextFrame();
          const fresh = Object.values(g.targets).filter((t) => !down.has(t.id));
          target = fresh[Math.floor(Math.random() * fresh.length)];
        }
        // Same task as the frame's state is read in: aimed exactly where the page drew it.
        const p = g.toClient(target.x, target.y);
        const before = g.shots.length;
        canvas.dispatchEvent(
          new PointerEvent("pointerdown", { clientX: p.x, clientY: p.y, button: 0, bubbles: true }),
        );
        const record = g.shots[before];
        if (record === undefined) throw new Error("the click fired no shot");
        fired.push(record);
        for (let wait = 0; record.outcome === null; wait++) {
          if (wait > 600) throw new Error(`no verdict for shot ${record.seq}`);
          await nextFrame();
        }
        if (record.outcome === "hit") down.add(record.target);
      }
      return fired.map((r) => ({ ...r }));
    },
    { n, compensated },
  );
}

export function summary(shots) {
  const seen = shots.filter((s) => s.saw !== null);
  const confirmed = seen.filter((s) => s.outcome === "hit");
  const behind = shots.map((s) => s.ticksBehind).sort((a, b) => a - b);
  return {
    fired: shots.length,
    seen: seen.length,
    confirmed: confirmed.length,
    rate: seen.length === 0 ? 0 : confirmed.length / seen.length,
    unjudged: shots.filter((s) => s.outcome !== "hit" && s.outcome !== "miss").length,
    medianBehind: behind[Math.floor(behind.length / 2)] ?? 0,
  };
}
