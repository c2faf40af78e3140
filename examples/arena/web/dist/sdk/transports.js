/**
 * How a {@link ZoneConnection}'s attempt reaches its zone (§1.1): over a WebSocket, or over a
 * WebTransport session found through the host's discovery (`GET /webtransport`). In auto mode a
 * WebTransport try that fails or brings no Welcome in time goes over WebSocket instead, and every
 * later attempt does too (remembered across reloads). A Redirect's hop goes over the transport the
 * attempt was on (§5.3.1).
 */
import { transportMemoryKey, } from "./connectiontypes.js";
import { DATAGRAM_VERSION } from "./messages.js";
import { defaultSocketFactory, detach, platformFetch, platformMemory, platformWebTransport } from "./sockets.js";
import { discoverWebTransport, webTransportOptions, webTransportSessionUrl, WebTransportSocket, zoneOfEntryUrl, } from "./webtransport.js";
/** The socket of a connection's current attempt, and the choice of its transport. */
export class Transports {
    /** The current socket (null between sockets). */
    socket = null;
    /** The current socket when it is a WebTransport session. */
    wt = null;
    /** The transport of the current (or last) attempt's socket. */
    kind = null;
    /** WebTransport failed in auto mode: every later attempt goes over WebSocket. */
    webSocketOnly = false;
    opts;
    versions;
    port;
    mode;
    memory;
    /** Auto mode: WebTransport is being tried and has no Welcome yet; a failure falls back. */
    trial = false;
    /** Bumped whenever a WebTransport try starts or ends, so its async steps know they are stale. */
    tries = 0;
    timer = null;
    /** The transports of a connection offering `versions`; auto mode reads what the memory kept. */
    constructor(options, versions, port) {
        this.opts = options;
        this.versions = versions;
        this.port = port;
        this.mode = options.transport ?? "auto";
        this.memory = options.transportMemory === undefined ? platformMemory() : options.transportMemory;
        if (this.mode === "auto") {
            try {
                this.webSocketOnly = this.memory?.getItem(transportMemoryKey(options.url)) === "websocket";
            }
            catch {
                // Storage refused: nothing remembered.
            }
        }
    }
    /** Opens the attempt's socket where it starts: over WebTransport when it should be tried. */
    start(gen) {
        const wt = this.webTransportFactory();
        if (wt !== null)
            void this.openWebTransport(gen, wt);
        else
            this.openSocket(gen, this.port.entryUrl());
    }
    /** The socket is gone (detached, not closed): nothing of it reaches the connection any more. */
    dropped() {
        this.timer = null;
        this.trial = false;
        this.tries += 1;
        const sock = this.socket;
        this.socket = null;
        this.wt = null;
        if (sock !== null)
            detach(sock);
    }
    /** The host answered over WebTransport: its close decides, not the auto-mode timeout. */
    kickHeard() {
        if (this.trial) {
            this.trial = false;
            this.port.cancel(this.timer);
            this.timer = null;
        }
    }
    /** The WebTransport session's Welcome arrived: the auto-mode try succeeded. */
    welcomed() {
        this.port.cancel(this.timer);
        this.timer = null;
        this.trial = false;
    }
    /**
     * The WebTransport factory when this attempt should try WebTransport (§1.1): not in websocket
     * mode, nor after auto mode fell back; version 6 offered; an entry URL naming a zone; a platform
     * (or an option) providing WebTransport and fetch. Null = WebSocket.
     */
    webTransportFactory() {
        if (this.mode === "websocket" || this.webSocketOnly)
            return null;
        if (!this.versions.some((v) => v >= DATAGRAM_VERSION))
            return null;
        if (zoneOfEntryUrl(this.port.entryUrl()) === null)
            return null;
        if ((this.opts.fetch ?? platformFetch()) === null)
            return null;
        return this.opts.webTransport ?? platformWebTransport();
    }
    /**
     * Tries this attempt over WebTransport: discovery, the session, the Hello on its control stream.
     * In auto mode the Welcome must come within `webTransportTimeoutMs`, or the attempt goes over
     * WebSocket ({@link fallBack}).
     */
    async openWebTransport(gen, factory) {
        const auto = this.mode === "auto";
        const attemptTry = ++this.tries;
        const stale = () => gen !== this.port.gen() || attemptTry !== this.tries;
        this.kind = "webtransport";
        this.trial = auto;
        if (auto) {
            const ms = this.opts.webTransportTimeoutMs ?? 3000;
            this.timer = this.port.later(() => {
                this.timer = null;
                if (!stale() && this.trial)
                    this.fallBack(gen, `WebTransport: no Welcome within ${ms} ms`, true);
            }, ms);
        }
        let endpoint;
        try {
            const fetchFn = this.opts.fetch ?? platformFetch();
            if (fetchFn === null)
                throw new Error("no fetch to discover WebTransport with");
            endpoint = await discoverWebTransport(this.port.targetUrl(), fetchFn);
        }
        catch (e) {
            if (!stale())
                this.webTransportFailed(gen, e instanceof Error ? e : new Error(String(e)));
            return;
        }
        if (stale())
            return;
        const url = endpoint === null ? null : webTransportSessionUrl(endpoint.url, this.port.targetUrl());
        if (endpoint === null || url === null) {
            // The host serves no WebTransport: nothing to wait for, in either mode.
            const host = this.port.redirected() ? "the zone's owner" : "the host";
            this.fallBack(gen, `${host} serves no WebTransport (GET /webtransport: 404)`, auto);
            return;
        }
        let sock;
        try {
            sock = new WebTransportSocket(factory(url, webTransportOptions(endpoint)));
        }
        catch (e) {
            this.webTransportFailed(gen, e instanceof Error ? e : new Error(String(e)));
            return;
        }
        this.socket = sock;
        this.wt = sock;
        sock.onopen = () => {
            if (stale())
                return;
            this.port.opened();
        };
        sock.onmessage = (ev) => {
            if (stale())
                return;
            try {
                this.port.message(ev.data, gen);
            }
            catch (e) {
                this.port.fail(gen, e instanceof Error ? e : new Error(String(e)));
            }
        };
        sock.ondatagram = (bytes) => {
            if (stale())
                return;
            try {
                this.port.datagram(bytes);
            }
            catch (e) {
                this.port.fail(gen, e instanceof Error ? e : new Error(String(e)));
            }
        };
        sock.onfailure = (e) => {
            if (!stale())
                this.port.fail(gen, e);
        };
        sock.onclose = (ev) => {
            if (stale())
                return;
            const code = ev.code ?? 1006;
            // The host answered (a Kick, or its close code) over WebTransport: that ends the attempt.
            const answered = this.port.kicked() || (code > 4000 && code <= 4999);
            if (this.trial && !answered) {
                this.webTransportFailed(gen, new Error(`WebTransport session ended before Welcome: ${ev.reason ?? ""}`));
                return;
            }
            this.port.gone(gen, code, ev.reason ?? "", null);
        };
    }
    /**
     * WebTransport failed for this attempt: in auto mode the attempt goes over WebSocket (for good),
     * otherwise it is a failed attempt like a socket that could not connect.
     */
    webTransportFailed(gen, error) {
        if (this.mode === "auto")
            this.fallBack(gen, error.message, true);
        else
            this.port.gone(gen, 1006, error.message, error);
    }
    /**
     * Ends this attempt's WebTransport try quietly and sends the same Hello over WebSocket to the
     * entry URL; with `remember`, every later attempt goes over WebSocket too (and the choice is kept
     * in the transport memory, so a reload does not wait again).
     */
    fallBack(gen, reason, remember) {
        if (gen !== this.port.gen())
            return;
        this.dropWebTransport("falling back to WebSocket");
        if (remember) {
            this.webSocketOnly = true;
            try {
                this.memory?.setItem(transportMemoryKey(this.opts.url), "websocket");
            }
            catch {
                // Storage full or refused: remembered for this connection only.
            }
        }
        this.port.emit("fallback", { reason, remembered: remember });
        if (gen !== this.port.gen())
            return; // a handler closed the connection
        this.port.startHandshakeTimer(gen);
        this.openSocket(gen, this.port.targetUrl());
    }
    /** Closes this attempt's WebTransport session (if any) without reporting its end. */
    dropWebTransport(reason) {
        this.port.cancel(this.timer);
        this.timer = null;
        this.trial = false;
        this.tries += 1;
        const sock = this.wt;
        this.wt = null;
        if (sock === null)
            return;
        if (this.socket === sock)
            this.socket = null;
        detach(sock);
        try {
            sock.close(1000, reason);
        }
        catch {
            // Already gone.
        }
    }
    /** Opens a socket to `url` that sends this attempt's Hello; false if the factory failed. */
    openSocket(gen, url) {
        this.kind = "websocket";
        let sock;
        try {
            sock = (this.opts.socket ?? defaultSocketFactory)(url);
        }
        catch (e) {
            this.port.gone(gen, 1006, "socket factory failed", e instanceof Error ? e : new Error(String(e)));
            return false;
        }
        this.socket = sock;
        sock.binaryType = "arraybuffer";
        sock.onopen = () => {
            if (gen !== this.port.gen())
                return;
            this.port.opened();
        };
        sock.onmessage = (ev) => {
            if (gen !== this.port.gen())
                return;
            try {
                this.port.message(ev.data, gen);
            }
            catch (e) {
                // A message we cannot decode means the two sides disagree: end this socket.
                this.port.fail(gen, e instanceof Error ? e : new Error(String(e)));
            }
        };
        sock.onerror = () => {
            // A close event always follows an error; it carries the code.
        };
        sock.onclose = (ev) => this.port.gone(gen, ev.code ?? 1006, ev.reason ?? "", null);
        return true;
    }
    /**
     * Follows a Redirect (§5.3.1): closes this socket quietly and sends the same Hello to the URL it
     * names. Throws a {@link RedirectError} for a fourth Redirect or a URL that is not a WebSocket URL.
     */
    follow(gen, r) {
        const url = this.port.hop(r);
        // A Redirect over WebTransport goes on over WebTransport: the owner is asked where its
        // sessions are, as the entry host was (§1.1, §5.3.1).
        const overWebTransport = this.wt !== null;
        this.dropWebTransport("redirected");
        const old = this.socket;
        this.socket = null;
        if (old !== null) {
            // Not a lost connection: this socket's close must not reach the connection.
            detach(old);
            try {
                old.close(1000, "redirected");
            }
            catch {
                // The host closes after a Redirect anyway.
            }
        }
        this.port.emit("redirect", r);
        if (gen !== this.port.gen())
            return; // a handler closed the connection
        const wt = overWebTransport ? this.webTransportFactory() : null;
        if (wt !== null)
            void this.openWebTransport(gen, wt);
        else
            this.openSocket(gen, url);
    }
}
