/**
 * The WebTransport transport of PROTOCOL.md §1.1 (version 6), as a {@link ZoneConnection} uses it.
 *
 * - **Discovery.** A host serving WebTransport answers `GET /webtransport` on its HTTP port with
 *   `{ "url": "https://127.0.0.1:4434", "certificate_hashes": [{ "algorithm": "sha-256", "value":
 *   "<base64>" }] }` (404 when WebTransport is off): {@link discoverWebTransport}. The session URL is
 *   that `url` + `/zones/{zone}` + the entry URL's query ({@link webTransportSessionUrl}).
 * - **The control stream.** One bidirectional stream carries every message that must arrive, each
 *   framed as `varint (u32)` length + the message ({@link frameMessage}, {@link MessageFramer}).
 * - **Datagrams.** States (§5.8) from the host, Inputs (§4.5) from the client: one message each.
 *
 * {@link WebTransportSocket} wraps a session in the {@link SocketLike} shape the connection speaks
 * (messages of the control stream arrive through `onmessage`, framing removed) plus datagrams.
 * Everything the platform provides is described structurally ({@link WebTransportLike},
 * {@link FetchLike}), so tests can supply in-memory doubles and the declarations need no DOM types.
 */

import type { SocketLike } from "./connectiontypes.js";
import { LIMITS } from "./messages.js";
import { DecodeError, Reader, Writer } from "./wire.js";

/** What a read from a stream gives: a chunk, or `done` at its end. */
export interface StreamReadResultLike<T> {
  /** True at the end of the stream. */
  done: boolean;
  /** The chunk (absent when done). */
  value?: T;
}

/** The part of a `ReadableStreamDefaultReader` the transport uses. */
export interface StreamReaderLike<T> {
  /** The next chunk. */
  read(): Promise<StreamReadResultLike<T>>;
  /** Stops reading. */
  cancel(reason?: unknown): Promise<void>;
}

/** The part of a `ReadableStream` the transport uses. */
export interface ReadableLike<T> {
  /** Locks the stream to one reader. */
  getReader(): StreamReaderLike<T>;
}

/** The part of a `WritableStreamDefaultWriter` the transport uses. */
export interface StreamWriterLike<T> {
  /** Queues one chunk. */
  write(chunk: T): Promise<void>;
  /** Closes the stream after the queued chunks. */
  close(): Promise<void>;
}

/** The part of a `WritableStream` the transport uses. */
export interface WritableLike<T> {
  /** Locks the stream to one writer. */
  getWriter(): StreamWriterLike<T>;
}

/** A bidirectional stream of a session. */
export interface BidirectionalStreamLike {
  /** Bytes from the host. */
  readable: ReadableLike<Uint8Array>;
  /** Bytes to the host. */
  writable: WritableLike<Uint8Array>;
}

/** How a session ended (`WebTransportCloseInfo`). */
export interface WebTransportCloseInfoLike {
  /** The application error code: 4000 + the Kick code after a Kick (§1.1). */
  closeCode?: number;
  /** Why. */
  reason?: string;
}

/** The part of the browser's `WebTransport` the connection uses. */
export interface WebTransportLike {
  /** Resolves when the session is established; rejects when it cannot be. */
  readonly ready: Promise<unknown>;
  /** Resolves when the session closed cleanly, rejects when it failed. */
  readonly closed: Promise<WebTransportCloseInfoLike>;
  /** The session's datagrams. */
  readonly datagrams: {
    /** Datagrams from the host, one message each. */
    readonly readable: ReadableLike<Uint8Array>;
    /** Datagrams to the host. */
    readonly writable: WritableLike<Uint8Array>;
    /** The largest datagram the path carries, in bytes (when the platform says). */
    readonly maxDatagramSize?: number;
  };
  /** Opens a bidirectional stream. */
  createBidirectionalStream(): Promise<BidirectionalStreamLike>;
  /** Closes the session. */
  close(info?: WebTransportCloseInfoLike): void;
}

/** A certificate hash to pin (`WebTransportHash`): a development host's self-signed certificate. */
export interface CertificateHash {
  /** `"sha-256"`. */
  algorithm: string;
  /** The hash's bytes. */
  value: ArrayBuffer;
}

/** What the connection passes to a {@link WebTransportFactory} (`WebTransportOptions`). */
export interface WebTransportOptionsLike {
  /** The certificates to accept, when the host serves a self-signed development certificate. */
  serverCertificateHashes?: CertificateHash[];
}

/** Opens a WebTransport session to `url` (default: `new WebTransport(url, options)`). */
export type WebTransportFactory = (url: string, options?: WebTransportOptionsLike) => WebTransportLike;

/** The part of a `fetch` Response discovery reads. */
export interface FetchResponseLike {
  /** HTTP status. */
  status: number;
  /** Status in 200..=299. */
  ok: boolean;
  /** The body as JSON. */
  json(): Promise<unknown>;
}

/** `fetch` as discovery uses it: a GET of `url`. */
export type FetchLike = (url: string) => Promise<FetchResponseLike>;

/** Where and how to open a host's WebTransport sessions: its answer to `GET /webtransport`. */
export interface WebTransportEndpoint {
  /** The base URL of its sessions, e.g. `https://127.0.0.1:4434`. */
  url: string;
  /** The certificate hashes to pin (empty when the host has a configured certificate). */
  certificateHashes: Array<{ algorithm: string; value: Uint8Array }>;
}

/** Which transport carries a session. */
export type TransportKind = "websocket" | "webtransport";

/**
 * How a {@link ZoneConnection} picks its transport: `auto` tries WebTransport and falls back to
 * WebSocket (remembering it), `webtransport` uses it whenever the host offers it, `websocket`
 * never tries it.
 */
export type TransportMode = "auto" | TransportKind;

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Decodes standard (or URL-safe) base64, padded or not; null when it is not base64. */
export function base64ToBytes(text: string): Uint8Array | null {
  const s = text.replace(/=+$/, "").replace(/-/g, "+").replace(/_/g, "/");
  if (s.length % 4 === 1 || /[^A-Za-z0-9+/]/.test(s)) return null;
  const out = new Uint8Array(Math.floor((s.length * 3) / 4));
  let acc = 0;
  let bits = 0;
  let n = 0;
  for (const c of s) {
    acc = (acc << 6) | B64.indexOf(c);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >> bits) & 0xff;
    }
  }
  return out;
}

/** The `/zones/{zone}` segment and query of a WebSocket entry URL, or null when it names no zone. */
export function zoneOfEntryUrl(entryUrl: string): { zone: string; query: string } | null {
  let u: URL;
  try {
    u = new URL(entryUrl);
  } catch {
    return null;
  }
  const m = /^\/zones\/([^/]+)$/.exec(u.pathname);
  if (m === null || m[1] === undefined) return null;
  return { zone: m[1], query: u.search };
}

/**
 * The HTTP origin of a WebSocket entry URL (`ws://h:p/…` → `http://h:p`, `wss` → `https`); null
 * when it is not a `ws://` or `wss://` URL.
 */
export function httpOriginOf(entryUrl: string): string | null {
  let u: URL;
  try {
    u = new URL(entryUrl);
  } catch {
    return null;
  }
  const scheme = u.protocol.toLowerCase();
  if (scheme !== "ws:" && scheme !== "wss:") return null;
  return `${scheme === "wss:" ? "https" : "http"}://${u.host}`;
}

/** The WebTransport session URL for `entryUrl`: `endpoint` + `/zones/{zone}` + the entry's query. */
export function webTransportSessionUrl(endpoint: string, entryUrl: string): string | null {
  const z = zoneOfEntryUrl(entryUrl);
  if (z === null) return null;
  return `${endpoint.replace(/\/+$/, "")}/zones/${z.zone}${z.query}`;
}

/** Discovery failed: the host's answer was not what §1.1 describes (or the request failed). */
export class DiscoveryError extends Error {
  /** An error saying why. */
  constructor(detail: string) {
    super(`WebTransport discovery: ${detail}`);
    this.name = "DiscoveryError";
  }
}

/**
 * Asks the host of `entryUrl` where its WebTransport sessions are (`GET {http origin}/webtransport`,
 * §1.1). Null when it answers 404 (WebTransport off); throws a {@link DiscoveryError} for any other
 * failure.
 */
export async function discoverWebTransport(entryUrl: string, fetchFn: FetchLike): Promise<WebTransportEndpoint | null> {
  const origin = httpOriginOf(entryUrl);
  if (origin === null) throw new DiscoveryError(`not a ws:// or wss:// entry URL: ${entryUrl}`);
  let res: FetchResponseLike;
  try {
    res = await fetchFn(`${origin}/webtransport`);
  } catch (e) {
    throw new DiscoveryError(e instanceof Error ? e.message : String(e));
  }
  if (res.status === 404) return null;
  if (!res.ok) throw new DiscoveryError(`HTTP ${res.status}`);
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    throw new DiscoveryError("the answer is not JSON");
  }
  const b = body as { url?: unknown; certificate_hashes?: unknown } | null;
  if (b === null || typeof b !== "object" || typeof b.url !== "string" || !/^https:\/\/[^/]/i.test(b.url)) {
    throw new DiscoveryError("the answer has no https:// url");
  }
  const raw = b.certificate_hashes ?? [];
  if (!Array.isArray(raw)) throw new DiscoveryError("certificate_hashes is not a list");
  const certificateHashes: WebTransportEndpoint["certificateHashes"] = [];
  for (const h of raw as unknown[]) {
    const hh = h as { algorithm?: unknown; value?: unknown } | null;
    if (hh === null || typeof hh !== "object" || typeof hh.algorithm !== "string" || typeof hh.value !== "string") {
      throw new DiscoveryError("a certificate hash is not { algorithm, value }");
    }
    const value = base64ToBytes(hh.value);
    if (value === null) throw new DiscoveryError("a certificate hash is not base64");
    certificateHashes.push({ algorithm: hh.algorithm, value });
  }
  return { url: b.url, certificateHashes };
}

/** The options to open a session with `endpoint`: its certificate hashes, when it has any. */
export function webTransportOptions(endpoint: WebTransportEndpoint): WebTransportOptionsLike | undefined {
  if (endpoint.certificateHashes.length === 0) return undefined;
  return {
    serverCertificateHashes: endpoint.certificateHashes.map((h) => {
      const value = new ArrayBuffer(h.value.length);
      new Uint8Array(value).set(h.value);
      return { algorithm: h.algorithm, value };
    }),
  };
}

/** One message framed for the control stream: `varint (u32)` length, then the message (§1.1). */
export function frameMessage(message: Uint8Array): Uint8Array {
  return new Writer(message.length + 5).varintU32(message.length).raw(message).finish();
}

/**
 * Splits the bytes of a control stream into messages (`varint (u32)` length + message, §1.1),
 * whatever the chunking. A length over `maxMessage` is refused (`too_long`) before anything is
 * buffered, so it never holds more than one message of at most `maxMessage` bytes.
 */
export class MessageFramer {
  /** The longest message accepted (the direction's §7 limit). */
  readonly maxMessage: number;
  private header: number[] = [];
  private body: Uint8Array | null = null;
  private filled = 0;

  /** A framer refusing messages over `maxMessage` bytes (default: the server → client limit, 1 MiB). */
  constructor(maxMessage: number = LIMITS.serverMessage) {
    this.maxMessage = maxMessage;
  }

  /** Bytes of an incomplete message held (its header included). */
  get buffered(): number {
    return this.header.length + this.filled;
  }

  /**
   * Takes the next chunk of the stream; returns the messages it completed, in order. Throws a
   * {@link DecodeError} for a malformed or oversized length (the stream is then unusable).
   */
  push(chunk: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    let off = 0;
    while (off < chunk.length) {
      const body = this.body;
      if (body === null) {
        const b = chunk[off++] ?? 0;
        this.header.push(b);
        if ((b & 0x80) !== 0) {
          if (this.header.length >= 5) throw new DecodeError("overflow", "frame length exceeds u32");
          continue;
        }
        const len = new Reader(Uint8Array.from(this.header)).varintU32();
        this.header = [];
        if (len > this.maxMessage) {
          throw new DecodeError("too_long", `framed message of ${len} bytes > ${this.maxMessage}`);
        }
        if (len === 0) {
          out.push(new Uint8Array(0));
          continue;
        }
        this.body = new Uint8Array(len);
        this.filled = 0;
        continue;
      }
      const take = Math.min(body.length - this.filled, chunk.length - off);
      body.set(chunk.subarray(off, off + take), this.filled);
      this.filled += take;
      off += take;
      if (this.filled === body.length) {
        out.push(body);
        this.body = null;
        this.filled = 0;
      }
    }
    return out;
  }
}

/** The datagram size assumed when the platform does not say (a conservative QUIC payload). */
export const DEFAULT_MAX_DATAGRAM_SIZE = 1_200;

/**
 * One WebTransport session in the shape of a {@link SocketLike}: `onopen` once the session is
 * ready and the control stream open, `onmessage` for each message of the control stream (framing
 * removed, `data` a Uint8Array), `send` frames a message onto it, `onclose` once when the session
 * ends (`code`: its close code — 4000 + the Kick code after a Kick — 1000 for a close without one,
 * 1006 when it failed). Datagrams arrive through {@link ondatagram} and go out with
 * {@link sendDatagram}. A malformed or oversized frame on the control stream is reported once
 * through {@link onfailure}.
 */
export class WebTransportSocket implements SocketLike {
  /** Unused (messages arrive as Uint8Array); kept for the {@link SocketLike} shape. */
  binaryType = "arraybuffer";
  /** The session is ready and the control stream open. */
  onopen: ((ev: unknown) => void) | null = null;
  /** One message from the control stream. */
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  /** The session ended (once). */
  onclose: ((ev: { code?: number; reason?: string }) => void) | null = null;
  /** Unused: failures end in {@link onclose} or {@link onfailure}. */
  onerror: ((ev: unknown) => void) | null = null;
  /** One datagram from the host. */
  ondatagram: ((bytes: Uint8Array) => void) | null = null;
  /** The control stream broke the framing rules (a {@link DecodeError}). */
  onfailure: ((error: Error) => void) | null = null;
  /** The session. */
  readonly transport: WebTransportLike;
  private streamWriter: StreamWriterLike<Uint8Array> | null = null;
  private datagramWriter: StreamWriterLike<Uint8Array> | null = null;
  private readers: Array<StreamReaderLike<Uint8Array>> = [];
  private ended = false;
  private closing = false;
  /** The control stream is being read (a close waits for what it already received). */
  private pumping = false;

  /** Wraps `transport` and starts opening its control stream. */
  constructor(transport: WebTransportLike, maxMessage: number = LIMITS.serverMessage) {
    this.transport = transport;
    transport.closed.then(
      (info) => {
        const code = info?.closeCode ?? 0;
        void this.endAfterDrain(code === 0 ? 1000 : code, info?.reason ?? "");
      },
      (e: unknown) => void this.endAfterDrain(1006, `WebTransport session failed: ${e instanceof Error ? e.message : String(e)}`),
    );
    void this.start(maxMessage);
  }

  /** The largest datagram this session carries. */
  get maxDatagramSize(): number {
    const n = this.transport.datagrams.maxDatagramSize;
    return typeof n === "number" && n > 0 ? n : DEFAULT_MAX_DATAGRAM_SIZE;
  }

  private async start(maxMessage: number): Promise<void> {
    let stream: BidirectionalStreamLike;
    try {
      await this.transport.ready;
      stream = await this.transport.createBidirectionalStream();
    } catch (e) {
      // `closed` rejects too when `ready` does; report at once rather than rely on it.
      const reason = `WebTransport session not established: ${e instanceof Error ? e.message : String(e)}`;
      this.close(1000, reason);
      this.end(1006, reason);
      return;
    }
    if (this.ended) return;
    this.streamWriter = stream.writable.getWriter();
    this.datagramWriter = this.transport.datagrams.writable.getWriter();
    void this.pumpStream(stream.readable.getReader(), new MessageFramer(maxMessage));
    void this.pumpDatagrams(this.transport.datagrams.readable.getReader());
    this.onopen?.({});
  }

  private async pumpStream(reader: StreamReaderLike<Uint8Array>, framer: MessageFramer): Promise<void> {
    this.readers.push(reader);
    this.pumping = true;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (this.ended) return;
        if (done) break;
        if (value === undefined) continue;
        for (const m of framer.push(value)) {
          if (this.ended) return;
          this.onmessage?.({ data: m });
        }
      }
    } catch (e) {
      this.pumping = false;
      if (this.ended) return;
      if (e instanceof DecodeError) {
        this.onfailure?.(e);
        return;
      }
    }
    this.pumping = false;
    // The control stream ended: the session is over (its `closed` says how).
    this.abort("control stream ended");
  }

  private async pumpDatagrams(reader: StreamReaderLike<Uint8Array>): Promise<void> {
    this.readers.push(reader);
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (this.ended || done) return;
        if (value !== undefined) this.ondatagram?.(value);
      }
    } catch {
      // Datagrams stop when the session closes; `closed` reports it.
    }
  }

  /** Closes the session (if not yet) so that `closed` settles and reports the end. */
  private abort(reason: string): void {
    if (this.ended) return;
    this.close(1000, reason);
  }

  /**
   * Reports the session's end once the control stream has handed over what it already received
   * (a Kick the host sent just before closing arrives before the close), within a bounded number
   * of turns: a stream that neither yields nor ends does not hold the close back.
   */
  private async endAfterDrain(code: number, reason: string): Promise<void> {
    for (let i = 0; i < 64 && this.pumping && !this.ended; i++) await Promise.resolve();
    this.end(code, reason);
  }

  private end(code: number, reason: string): void {
    if (this.ended) return;
    this.ended = true;
    for (const r of this.readers) r.cancel().catch(() => {});
    this.readers = [];
    this.onclose?.({ code, reason });
  }

  /** Frames `data` onto the control stream (dropped once the session ended). */
  send(data: Uint8Array): void {
    const w = this.streamWriter;
    if (this.ended || w === null) return;
    w.write(frameMessage(data)).catch(() => {});
  }

  /** Sends one datagram; false when the session cannot (not open, or ended). */
  sendDatagram(data: Uint8Array): boolean {
    const w = this.datagramWriter;
    if (this.ended || w === null) return false;
    w.write(data).catch(() => {});
    return true;
  }

  /** Closes the session with `code` as its application close code. */
  close(code = 1000, reason = ""): void {
    if (this.closing) return;
    this.closing = true;
    try {
      this.transport.close({ closeCode: code, reason: reason.slice(0, 200) });
    } catch {
      // A session that failed may refuse to close; `closed` has settled or will.
    }
  }
}
