/**
 * What a {@link ZoneConnection} needs of the platform and of its sockets: the platform's WebSocket,
 * WebTransport, `fetch` and `sessionStorage` when none is injected, a socket detached from the
 * connection, a message's bytes, a Delta's BASELINE flag read without decoding it, and the byte rate
 * over the last second.
 */

import type { SocketLike, TransportMemory } from "./connectiontypes.js";
import { WebTransportSocket, type FetchLike, type WebTransportFactory, type WebTransportLike } from "./webtransport.js";
import { Reader } from "./wire.js";

export function toBytes(data: unknown): Uint8Array | null {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

/** Whether a Delta message's flags say BASELINE (tag, varint tick, varint ack, flags). */
export function isBaseline(bytes: Uint8Array): boolean {
  try {
    const r = new Reader(bytes);
    r.u8();
    r.varintU64();
    r.varintU32();
    return (r.u8() & 1) !== 0;
  } catch {
    return false;
  }
}

/** The platform's WebTransport, or null when it has none. */
export function platformWebTransport(): WebTransportFactory | null {
  const WT = (globalThis as { WebTransport?: new (url: string, options?: unknown) => WebTransportLike }).WebTransport;
  if (WT === undefined) return null;
  return (url, options) => (options === undefined ? new WT(url) : new WT(url, options));
}

/** The platform's fetch, or null when it has none. */
export function platformFetch(): FetchLike | null {
  const f = (globalThis as { fetch?: FetchLike }).fetch;
  return f === undefined ? null : (url) => f(url);
}

/** The platform's sessionStorage, or null when it has none (or refuses access). */
export function platformMemory(): TransportMemory | null {
  try {
    return (globalThis as { sessionStorage?: TransportMemory }).sessionStorage ?? null;
  } catch {
    return null;
  }
}

/** Stops a socket from reaching the connection (its close, messages, datagrams). */
export function detach(sock: SocketLike): void {
  sock.onopen = null;
  sock.onmessage = null;
  sock.onclose = null;
  sock.onerror = null;
  if (sock instanceof WebTransportSocket) {
    sock.ondatagram = null;
    sock.onfailure = null;
  }
}

export function defaultSocketFactory(url: string): SocketLike {
  const WS = (globalThis as { WebSocket?: new (url: string) => SocketLike }).WebSocket;
  if (WS === undefined) {
    throw new Error("no global WebSocket: pass a `socket` factory in ZoneConnectionOptions");
  }
  return new WS(url);
}
