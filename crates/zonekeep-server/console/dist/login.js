// The login form: the admin token, kept in this tab's sessionStorage only. The page shows no data
// until a token is given and the host took it.
import { html, useState } from "./html.js";
/** The form; `refused` says the last token was wrong. */
export function Login({ refused, onToken }) {
    const [value, setValue] = useState("");
    const submit = (e) => {
        e.preventDefault();
        const t = value.trim();
        if (t !== "")
            onToken(t);
    };
    return html `<form class="login" data-testid="login-form" onSubmit=${submit}>
    <h1>zonekeep console</h1>
    <p>Sign in with this host's admin token (<code>--admin-token</code>, <code>ZONEKEEP_ADMIN_TOKEN</code>). It is kept in this tab only.</p>
    ${refused ? html `<p class="error" data-testid="login-refused">wrong credential</p>` : null}
    <label>admin token
      <input type="password" autocomplete="off" data-testid="login-token" value=${value}
        onInput=${(e) => setValue(e.target.value)} />
    </label>
    <button type="submit" data-testid="login-submit">sign in</button>
  </form>`;
}
/** What a host with the admin API off shows. */
export function AdminOff() {
    return html `<div class="login" data-testid="admin-off">
    <h1>zonekeep console</h1>
    <p class="error">the admin API is off on this host</p>
    <p>Start the host with an admin token (<code>--admin-token</code> or <code>ZONEKEEP_ADMIN_TOKEN</code>, at least 16 bytes) to use the console.</p>
  </div>`;
}
