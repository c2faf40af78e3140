/**
 * Every message of PROTOCOL.md §4–§5, as the SDK hands it around: client → server (tags
 * 0x01..=0x7f) and server → client (0x80..=0xff), with the rules a client applies to what they carry
 * (where a Redirect or a Transfer may lead, the known-set hash). The protocol's numbers are in
 * `protocol.ts`, the Kick codes in `kickcodes.ts`, content versions in `contentversions.ts` and the
 * encode and total decode of every message in `messagecodec.ts`; this module re-exports them all.
 */
export { compareContentVersions } from "./contentversions.js";
export { KickCode, kickCodeName, kickResumesElsewhere } from "./kickcodes.js";
export { decodeClientMessage, decodeServerMessage, encodeClientMessage, encodeServerMessage, } from "./messagecodec.js";
export { CHARACTER_PROTOCOL, CONTENT_VERSION_PROTOCOL, DATAGRAM_VERSION, ENTRIES_PROTOCOL, HALT_PROTOCOL, LIMITS, peekTag, RESUME_FROM_VERSION, SUPPORTED_VERSIONS, Tag, TRANSFER_PROTOCOL, } from "./protocol.js";
/**
 * FNV-1a (32 bit) over each id's four little-endian bytes, in order (§5.7): what a
 * {@link KnownSetCheck} carries.
 */
export function knownSetHash(ids) {
    let h = 0x811c9dc5;
    for (const id of ids) {
        for (let k = 0; k < 4; k++) {
            h ^= (id >>> (8 * k)) & 0xff;
            h = Math.imul(h, 0x01000193) >>> 0;
        }
    }
    return h >>> 0;
}
/**
 * The URL a Redirect leads to, or null when it is not an absolute `ws://` or `wss://` URL, which a
 * client must refuse (§5.3.1): a Redirect must not send a ticket anywhere but to a zone host. The
 * scheme is matched without regard to case. The same rule as the Rust `Redirect::websocket_url`.
 */
export function redirectTarget(r) {
    const i = r.url.indexOf("://");
    if (i < 0)
        return null;
    const scheme = r.url.slice(0, i).toLowerCase();
    const rest = r.url.slice(i + 3);
    // An empty authority (`ws:///zones/a`) names no host.
    if ((scheme !== "ws" && scheme !== "wss") || rest === "" || rest.startsWith("/"))
        return null;
    return r.url;
}
/**
 * The URL a Transfer leads to, or null when it is not an absolute `ws://` or `wss://` URL: the
 * client then ignores the Transfer (§5.3.2), so the credential never goes anywhere but to a zone
 * host. The same rule as {@link redirectTarget} and the Rust `Transfer::websocket_url`.
 */
export function transferTarget(t) {
    return redirectTarget({ type: "redirect", url: t.url, zoneId: t.zoneId });
}
/**
 * The URLs of `entries` a client may connect to (§5.3.1): absolute `ws://` or `wss://` URLs, the
 * others skipped, as a Redirect to them would be refused.
 */
export function websocketEntries(entries) {
    return (entries ?? []).filter((url) => redirectTarget({ type: "redirect", url, zoneId: "" }) !== null);
}
