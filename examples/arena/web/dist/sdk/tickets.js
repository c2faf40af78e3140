/**
 * What a {@link ZoneConnection} reads from the strings it is handed, without verifying anything: a
 * ticket's claims (how long a transfer credential lasts, the principal a ticket admits), and an entry
 * URL rewritten to name the zone a Transfer moved the session to.
 */
/** The claims of a ticket (a compact JWS), or null when it is not one that can be read. */
function ticketClaims(ticket) {
    try {
        const part = ticket.split(".")[1] ?? "";
        const bin = atob(part.replace(/-/g, "+").replace(/_/g, "/"));
        const json = new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
        const claims = JSON.parse(json);
        return typeof claims === "object" && claims !== null && !Array.isArray(claims) ? claims : null;
    }
    catch {
        return null;
    }
}
/** How long a credential is valid from now, ms, by its `exp` (600 s when it cannot be read). */
export function credentialLifetimeMs(ticket) {
    const exp = ticketClaims(ticket)?.exp;
    if (typeof exp === "number" && Number.isFinite(exp))
        return Math.max(0, exp * 1000 - Date.now());
    // Not a readable JWS: the documented lifetime stands in.
    return 600_000;
}
/** The principal a ticket admits (its `sub`), or null when it cannot be read. */
export function ticketSubject(ticket) {
    const sub = ticketClaims(ticket)?.sub;
    return typeof sub === "string" && sub !== "" ? sub : null;
}
/** `url` naming `zone` in place of the zone its `/zones/{zone}` path names (unchanged otherwise). */
export function withZone(url, zone) {
    try {
        const u = new URL(url);
        if (!/^\/zones\/[^/]+$/.test(u.pathname))
            return url;
        u.pathname = `/zones/${encodeURIComponent(zone)}`;
        return u.toString();
    }
    catch {
        return url;
    }
}
