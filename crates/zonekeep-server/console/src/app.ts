// The console's entry: the login gate, the header, and hash routing (#/hosts, #/zones,
// #/zones/{id}, #/modules). Loaded by index.html.
import { call, clearToken, onLost, setSelf, setToken, token } from "./api.js";
import { html, render, useEffect, useState, type View } from "./html.js";
import { Hosts } from "./hosts.js";
import { AdminOff, Login } from "./login.js";
import { Modules } from "./modules.js";
import type { HostsAnswer } from "./types.js";
import { Zone } from "./zone.js";
import { Zones } from "./zones.js";

/** Where the page is: a page name, and the zone for a zone's page. */
type Route = { page: "hosts" } | { page: "zones" } | { page: "zone"; id: string } | { page: "modules" };

function routeOf(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/");
  if (parts[0] === "zones" && parts[1] !== undefined && parts[1] !== "") return { page: "zone", id: decodeURIComponent(parts[1]) };
  if (parts[0] === "zones") return { page: "zones" };
  if (parts[0] === "modules") return { page: "modules" };
  return { page: "hosts" };
}

/** `checking` until the host said whether its admin API is on and took the token. */
type Gate = "checking" | "off" | "login" | "in";

function App(): View {
  const [gate, setGate] = useState<Gate>("checking");
  const [refused, setRefused] = useState(false);
  const [me, setMe] = useState<string | null>(null);
  const [hash, setHash] = useState(location.hash);

  useEffect(() => {
    const follow = () => setHash(location.hash);
    addEventListener("hashchange", follow);
    return () => removeEventListener("hashchange", follow);
  }, []);

  /** Tries the token: `GET /admin/hosts` answers anything but 401 once the host took it. */
  const signIn = async (t: string) => {
    setToken(t);
    setGate("checking");
    try {
      const hosts = await call<HostsAnswer>("/admin/hosts");
      setSelf(hosts.self);
      setMe(hosts.self);
    } catch {
      // A 401 or `admin_disabled` went to onLost; any other error (a host without a store
      // answering 503) still means the token was taken.
      if (token() === null) return;
    }
    setRefused(false);
    setGate((g) => (g === "checking" ? "in" : g));
  };

  useEffect(() => {
    onLost((why) => {
      if (why === "admin-off") {
        setGate("off");
        return;
      }
      clearToken();
      setRefused(why === "unauthorized");
      setGate("login");
    });
    void (async () => {
      let on = true;
      try {
        const r = await fetch("/console/state.json", { cache: "no-store" });
        on = ((await r.json()) as { admin_api?: boolean }).admin_api !== false;
      } catch {
        // Then the first admin call says.
      }
      if (!on) return setGate("off");
      const t = token();
      if (t === null) return setGate("login");
      await signIn(t);
    })();
  }, []);

  if (gate === "checking") return html`<p class="note">…</p>`;
  if (gate === "off") return html`<${AdminOff} />`;
  if (gate === "login") return html`<${Login} refused=${refused} onToken=${(t: string) => void signIn(t)} />`;

  const route = routeOf(hash);
  const signOut = () => {
    clearToken();
    setRefused(false);
    setGate("login");
  };
  const tab = (href: string, label: string, on: boolean) => html`<a href=${href} class=${on ? "on" : ""} data-testid=${`nav-${label}`}>${label}</a>`;
  return html`<div>
    <header>
      <strong>zonekeep</strong>
      <nav>
        ${tab("#/hosts", "hosts", route.page === "hosts")}
        ${tab("#/zones", "zones", route.page === "zones" || route.page === "zone")}
        ${tab("#/modules", "modules", route.page === "modules")}
      </nav>
      <span class="who">${me === null ? "" : `on ${me}`}</span>
      <button class="link" data-testid="sign-out" onClick=${signOut}>sign out</button>
    </header>
    <main>
      ${route.page === "hosts" ? html`<${Hosts} />` : null}
      ${route.page === "zones" ? html`<${Zones} />` : null}
      ${route.page === "zone" ? html`<${Zone} key=${route.id} id=${route.id} />` : null}
      ${route.page === "modules" ? html`<${Modules} />` : null}
    </main>
  </div>`;
}

const root = document.getElementById("app");
if (root !== null) render(html`<${App} />`, root);
