// Small pieces every page uses: its heading with when it was last updated, and the line that says
// what an action did.
import { clock } from "./format.js";
import { html, useState } from "./html.js";
import { describe } from "./api.js";
/** A page's heading, when its data was last loaded, and the last load's error. */
export function Head({ title, at, error, children }) {
    return html `<div class="head">
    <h1>${title}</h1>
    ${children}
    <span class="updated" data-testid="updated">${at === null ? "loading…" : `updated ${clock(at)}`}</span>
    ${error === null ? null : html `<p class="error" data-testid="load-error">${error}</p>`}
  </div>`;
}
/**
 * The last action's outcome, and `act(label, f)`: runs `f`, then says `label: done` (or what `f`
 * returned) or the error, and calls `after` (a reload).
 */
export function useAction(after) {
    const [said, setSaid] = useState(null);
    const [busy, setBusy] = useState(false);
    const act = async (label, f) => {
        setBusy(true);
        try {
            const r = await f();
            setSaid({ ok: true, text: `${label}: ${r ?? "done"}` });
        }
        catch (e) {
            setSaid({ ok: false, text: `${label}: ${describe(e)}` });
        }
        finally {
            setBusy(false);
            after();
        }
    };
    return { said, busy, act };
}
/** The line under a page's heading that says what the last action did. */
export function SaidLine({ said }) {
    if (said === null)
        return null;
    return html `<p class=${said.ok ? "said ok" : "said error"} data-testid="said">${said.text}</p>`;
}
