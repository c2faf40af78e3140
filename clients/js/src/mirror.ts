/**
 * The client's known set (PROTOCOL.md §5.5): the entities it holds, ascending by id, with their kind,
 * the quantized position last received and their field values in wire form. {@link Mirror.apply}
 * applies a decoded Delta in exactly the spec's order: BASELINE clears, despawns are removed, updates
 * are applied by index into the post-despawn set, spawns are inserted.
 */

import { decodeDelta, type Delta, type KnownEntry } from "./delta.js";
import { knownSetHash, type KnownSetCheck, type ResumeFrom } from "./messages.js";
import { posDecode } from "./quant.js";
import type { FieldValue, Schema } from "./schema.js";
import { DecodeError } from "./wire.js";

/** One entity as the server last described it. */
export interface MirrorEntity {
  /** Entity id. */
  readonly id: number;
  /** Kind id. */
  readonly kind: number;
  /** Quantized x last received. */
  qx: number;
  /** Quantized y last received. */
  qy: number;
  /** Field values in wire form, one per field of the kind. */
  fields: FieldValue[];
}

/** What one applied Delta changed, by id. */
export interface MirrorChanges {
  /** Ids removed (despawned, or dropped by a BASELINE). */
  removed: number[];
  /** Ids whose position or fields changed. */
  updated: number[];
  /** Ids inserted. */
  spawned: number[];
}

const I32_MIN = -0x8000_0000;
const I32_MAX = 0x7fff_ffff;

/** The known set of one connection. */
export class Mirror {
  /** The schema the entities are decoded with. */
  readonly schema: Schema;
  private ids: number[] = [];
  private readonly byId = new Map<number, MirrorEntity>();
  private lastTick = 0;

  /** An empty known set for `schema`. */
  constructor(schema: Schema) {
    this.schema = schema;
  }

  /** Number of known entities. */
  get size(): number {
    return this.ids.length;
  }

  /** The entity with `id`, if known. */
  get(id: number): MirrorEntity | undefined {
    return this.byId.get(id);
  }

  /** Entities ascending by id. */
  *entities(): IterableIterator<MirrorEntity> {
    for (const id of this.ids) {
      const e = this.byId.get(id);
      if (e !== undefined) yield e;
    }
  }

  /** The known set as `[id, kind]` pairs ascending by id (what {@link decodeDelta} needs). */
  known(): KnownEntry[] {
    const out: KnownEntry[] = [];
    for (const e of this.entities()) out.push([e.id, e.kind]);
    return out;
  }

  /** Decoded x of an entity's position. */
  x(e: MirrorEntity): number {
    return posDecode(e.qx, this.schema.posStep);
  }

  /** Decoded y of an entity's position. */
  y(e: MirrorEntity): number {
    return posDecode(e.qy, this.schema.posStep);
  }

  /** Tick of the last applied Delta (0 before the first). */
  get tick(): number {
    return this.lastTick;
  }

  /**
   * Whether this known set is the one a KnownSetCheck describes (§5.7): same count, same
   * {@link knownSetHash} of the ids. A mismatch means a Delta was mis-applied.
   */
  matches(check: KnownSetCheck): boolean {
    return this.ids.length === check.count && knownSetHash(this.ids) === check.hash;
  }

  /**
   * What a resuming Hello says this known set holds (§4.1.1): the tick of the last applied Delta
   * and the count and hash a KnownSetCheck would state; null before any Delta was applied.
   */
  resumeFrom(): ResumeFrom | null {
    if (this.lastTick === 0) return null;
    return { tick: this.lastTick, count: this.ids.length, hash: knownSetHash(this.ids) };
  }

  /**
   * An independent copy: the same entities (each copied, fields included) and the same tick, so
   * applying a Delta to one never changes the other. What a {@link StateRing} keeps per State.
   */
  clone(): Mirror {
    const copy = new Mirror(this.schema);
    copy.ids = this.ids.slice();
    for (const [id, e] of this.byId) {
      copy.byId.set(id, { id: e.id, kind: e.kind, qx: e.qx, qy: e.qy, fields: e.fields.slice() });
    }
    copy.lastTick = this.lastTick;
    return copy;
  }

  /** Forgets every entity. */
  clear(): void {
    this.ids = [];
    this.byId.clear();
  }

  /** Decodes a Delta message against this known set and applies it. */
  receive(bytes: Uint8Array): { delta: Delta; changes: MirrorChanges } {
    const delta = decodeDelta(bytes, this.schema, this.known());
    return { delta, changes: this.apply(delta) };
  }

  /**
   * Applies a Delta decoded against this known set. Nothing changes if it throws: every check runs
   * before the first write.
   */
  apply(delta: Delta): MirrorChanges {
    const removed: number[] = [];
    let after: number[];
    if (delta.baseline) {
      removed.push(...this.ids);
      after = [];
    } else {
      const gone = new Set(delta.despawns);
      for (const id of delta.despawns) {
        if (!this.byId.has(id)) throw new DecodeError("invalid", `despawned id ${id} is not known`);
      }
      after = this.ids.filter((id) => !gone.has(id));
      removed.push(...delta.despawns);
    }

    // Resolve and check every update before touching state.
    const planned: Array<{ e: MirrorEntity; qx: number; qy: number }> = [];
    for (const u of delta.updates) {
      const id = after[u.index];
      const e = id === undefined ? undefined : this.byId.get(id);
      if (e === undefined || e.id !== u.id) {
        throw new DecodeError("invalid", `update index ${u.index} does not name entity ${u.id}`);
      }
      let qx = e.qx;
      let qy = e.qy;
      if (u.pos !== null) {
        if (u.pos.form === "absolute") {
          qx = u.pos.qx;
          qy = u.pos.qy;
        } else {
          qx += u.pos.dx;
          qy += u.pos.dy;
        }
      }
      if (qx < I32_MIN || qx > I32_MAX || qy < I32_MIN || qy > I32_MAX) {
        throw new DecodeError("invalid", `entity ${e.id} moved outside the i32 position range`);
      }
      planned.push({ e, qx, qy });
    }
    const afterSet = new Set(after);
    for (const s of delta.spawns) {
      if (afterSet.has(s.id)) throw new DecodeError("invalid", `spawned id ${s.id} is already known`);
      if (this.schema.kinds[s.kind] === undefined) throw new DecodeError("invalid", `kind ${s.kind}`);
    }

    // Commit.
    for (const id of removed) if (!afterSet.has(id)) this.byId.delete(id);
    const updated: number[] = [];
    delta.updates.forEach((u, i) => {
      const p = planned[i];
      if (p === undefined) return;
      p.e.qx = p.qx;
      p.e.qy = p.qy;
      for (const [fi, v] of u.fields) p.e.fields[fi] = v;
      updated.push(p.e.id);
    });
    const spawned: number[] = [];
    for (const s of delta.spawns) {
      this.byId.set(s.id, { id: s.id, kind: s.kind, qx: s.qx, qy: s.qy, fields: [...s.fields] });
      spawned.push(s.id);
    }
    this.ids = mergeAscending(after, spawned);
    this.lastTick = delta.tick;
    return { removed, updated, spawned };
  }
}

/** Merges two ascending id lists. */
function mergeAscending(a: readonly number[], b: readonly number[]): number[] {
  if (b.length === 0) return a.slice();
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const x = a[i];
    const y = b[j];
    if (y === undefined || (x !== undefined && x < y)) {
      out.push(x as number);
      i++;
    } else {
      out.push(y);
      j++;
    }
  }
  return out;
}
