// Every call the console makes: the host's own admin API, with the operator's token as a bearer
// credential. The token lives in sessionStorage only (gone with the tab). Another host's admin API
// is reached through this host's fleet proxy, `/admin/hosts/{id}/api/admin/...`, so the page talks
// to its own origin alone.

const TOKEN_KEY = "zonekeep-console-token";

/** The operator's token, or null before signing in. */
export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Keeps the token for this tab. */
export function setToken(t: string): void {
  sessionStorage.setItem(TOKEN_KEY, t);
}

/** Forgets the token. */
export function clearToken(): void {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** An admin API error: the HTTP status and the API's error code and message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Why the page must leave the data: no credential, the credential was refused, or the admin API is off. */
export type Lost = "missing" | "unauthorized" | "admin-off";

let lost: (why: Lost) => void = () => {};

/** Who hears that the credential was refused or the admin API is off (the app: it shows the login). */
export function onLost(f: (why: Lost) => void): void {
  lost = f;
}

let selfId: string | null = null;

/** Remembers which host this page is served by (`"self"` of `GET /admin/hosts`). */
export function setSelf(id: string | null): void {
  selfId = id;
}

/** The id of the host serving this page, once known. */
export function self(): string | null {
  return selfId;
}

/**
 * The URL of `path` (`admin/zones/...`, no leading slash) on host `host`: this host's own route when
 * `host` is this host (or null: a host outside a fleet), else through the fleet proxy.
 */
export function onHost(host: string | null | undefined, path: string): string {
  if (host === null || host === undefined || host === selfId) return `/${path}`;
  return `/admin/hosts/${encodeURIComponent(host)}/api/${path}`;
}

/** A request's method and body: `body` is sent as JSON, `raw` as it is with `contentType`. */
export interface CallOptions {
  method?: string;
  body?: unknown;
  raw?: Blob;
  contentType?: string;
}

/**
 * Sends an admin request with the token; resolves with the response when it is 2xx, throws
 * [`ApiError`] otherwise. A 401 from this host itself (not one relayed from another host) or a
 * 404 `admin_disabled` is also told to the app, which leaves the data for the login form.
 */
export async function send(path: string, opts: CallOptions = {}): Promise<Response> {
  const t = token();
  if (t === null) {
    lost("missing");
    throw new ApiError(401, "unauthorized", "no credential");
  }
  const headers: Record<string, string> = { authorization: `Bearer ${t}` };
  let body: BodyInit | undefined;
  if (opts.raw !== undefined) {
    body = opts.raw;
    headers["content-type"] = opts.contentType ?? "application/octet-stream";
  } else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] = "application/json";
  }
  const method = opts.method ?? (body === undefined ? "GET" : "POST");
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body, cache: "no-store" });
  } catch (e) {
    throw new ApiError(0, "network", `this host did not answer: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (res.ok) return res;
  const text = await res.text();
  let code = `http_${res.status}`;
  let message = text === "" ? res.statusText : text;
  try {
    const e = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error;
    if (e?.code !== undefined) code = e.code;
    if (e?.message !== undefined) message = e.message;
  } catch {
    // Not JSON: keep the text.
  }
  const relayed = path.startsWith("/admin/hosts/") && path.includes("/api/");
  if (res.status === 401 && !relayed) lost("unauthorized");
  if (res.status === 404 && code === "admin_disabled") lost("admin-off");
  throw new ApiError(res.status, code, message);
}

/** [`send`], then the answer's JSON (null for an empty body). */
export async function call<T>(path: string, opts: CallOptions = {}): Promise<T> {
  const res = await send(path, opts);
  const text = await res.text();
  return (text === "" ? null : JSON.parse(text)) as T;
}

/** POSTs `body` as JSON to `path`; the answer's JSON. */
export function post<T>(path: string, body: unknown = {}): Promise<T> {
  return call<T>(path, { method: "POST", body });
}

/** What an error says, for a message line. */
export function describe(e: unknown): string {
  if (e instanceof ApiError) return e.status === 0 ? e.message : `${e.code} (${e.status}): ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}
