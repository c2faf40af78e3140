// The client's known set (PROTOCOL.md §5.5): the entities it holds, ascending by id, with their kind,
// the quantized position last received and their field values in wire form. Mirror.Apply applies a
// decoded Delta in exactly the spec's order: BASELINE clears, despawns are removed, updates are applied
// by index into the post-despawn set, spawns are inserted.
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>One entity as the server last described it.</summary>
    public sealed class MirrorEntity
    {
        /// <summary>Entity id.</summary>
        public readonly uint Id;
        /// <summary>Kind id.</summary>
        public readonly int Kind;
        /// <summary>Quantized x last received.</summary>
        public int Qx;
        /// <summary>Quantized y last received.</summary>
        public int Qy;
        /// <summary>Field values in wire form, one per field of the kind.</summary>
        public FieldValue[] Fields;

        /// <summary>An entity.</summary>
        public MirrorEntity(uint id, int kind, int qx, int qy, FieldValue[] fields)
        {
            Id = id;
            Kind = kind;
            Qx = qx;
            Qy = qy;
            Fields = fields;
        }
    }

    /// <summary>What one applied Delta changed, by id.</summary>
    public sealed class MirrorChanges
    {
        /// <summary>Ids removed (despawned, or dropped by a BASELINE).</summary>
        public List<uint> Removed = new List<uint>();
        /// <summary>Ids whose position or fields changed.</summary>
        public List<uint> Updated = new List<uint>();
        /// <summary>Ids inserted.</summary>
        public List<uint> Spawned = new List<uint>();
    }

    /// <summary>The known set of one connection.</summary>
    public sealed class Mirror
    {
        /// <summary>The schema the entities are decoded with.</summary>
        public readonly Schema Schema;
        private List<uint> _ids = new List<uint>();
        private readonly Dictionary<uint, MirrorEntity> _byId = new Dictionary<uint, MirrorEntity>();
        private long _lastTick;

        /// <summary>An empty known set for <paramref name="schema"/>.</summary>
        public Mirror(Schema schema) { Schema = schema; }

        /// <summary>Number of known entities.</summary>
        public int Count { get { return _ids.Count; } }

        /// <summary>The entity with <paramref name="id"/>, or null.</summary>
        public MirrorEntity Get(uint id)
        {
            MirrorEntity e;
            return _byId.TryGetValue(id, out e) ? e : null;
        }

        /// <summary>The known ids, ascending (read-only view).</summary>
        public IReadOnlyList<uint> Ids { get { return _ids; } }

        /// <summary>Entities ascending by id.</summary>
        public IEnumerable<MirrorEntity> Entities()
        {
            foreach (uint id in _ids) yield return _byId[id];
        }

        /// <summary>The known set as (id, kind) pairs ascending by id (what <see cref="DeltaCodec.Decode"/> needs).</summary>
        public List<KnownEntry> Known()
        {
            List<KnownEntry> out_ = new List<KnownEntry>(_ids.Count);
            foreach (uint id in _ids) out_.Add(new KnownEntry(id, _byId[id].Kind));
            return out_;
        }

        /// <summary>Decoded x of an entity's position.</summary>
        public float X(MirrorEntity e) { return Quant.PosDecode(e.Qx, Schema.PosStep); }

        /// <summary>Decoded y of an entity's position.</summary>
        public float Y(MirrorEntity e) { return Quant.PosDecode(e.Qy, Schema.PosStep); }

        /// <summary>Tick of the last applied Delta (0 before the first).</summary>
        public long Tick { get { return _lastTick; } }

        /// <summary>Whether this known set is the one a KnownSetCheck describes (§5.7): same count, same hash.</summary>
        public bool Matches(KnownSetCheck check)
        {
            return _ids.Count == check.Count && KnownSet.Hash(_ids) == check.Hash;
        }

        /// <summary>
        /// What a resuming Hello says this known set holds (§4.1.1): the tick of the last applied Delta and the
        /// count and hash a KnownSetCheck would state; null before any Delta was applied.
        /// </summary>
        public ResumeFrom ResumeFrom()
        {
            if (_lastTick == 0) return null;
            return new ResumeFrom { Tick = _lastTick, Count = (uint)_ids.Count, Hash = KnownSet.Hash(_ids) };
        }

        /// <summary>An independent copy: applying a Delta to one never changes the other.</summary>
        public Mirror Clone()
        {
            Mirror copy = new Mirror(Schema);
            copy._ids = new List<uint>(_ids);
            foreach (KeyValuePair<uint, MirrorEntity> kv in _byId)
            {
                MirrorEntity e = kv.Value;
                copy._byId[kv.Key] = new MirrorEntity(e.Id, e.Kind, e.Qx, e.Qy, (FieldValue[])e.Fields.Clone());
            }
            copy._lastTick = _lastTick;
            return copy;
        }

        /// <summary>Forgets every entity.</summary>
        public void Clear()
        {
            _ids.Clear();
            _byId.Clear();
        }

        /// <summary>Decodes a Delta message against this known set and applies it.</summary>
        public Delta Receive(byte[] bytes, out MirrorChanges changes)
        {
            Delta delta = DeltaCodec.Decode(bytes, Schema, Known());
            changes = Apply(delta);
            return delta;
        }

        private struct Planned
        {
            public MirrorEntity E;
            public int Qx;
            public int Qy;
        }

        /// <summary>
        /// Applies a Delta decoded against this known set. Nothing changes if it throws: every check runs
        /// before the first write.
        /// </summary>
        public MirrorChanges Apply(Delta delta)
        {
            MirrorChanges changes = new MirrorChanges();
            List<uint> removed = changes.Removed;
            List<uint> after;
            if (delta.Baseline)
            {
                removed.AddRange(_ids);
                after = new List<uint>();
            }
            else
            {
                HashSet<uint> gone = new HashSet<uint>(delta.Despawns);
                foreach (uint id in delta.Despawns)
                {
                    if (!_byId.ContainsKey(id)) throw new ProtocolException(DecodeErrorKind.Invalid, "despawned id " + id + " is not known");
                }
                after = new List<uint>(_ids.Count);
                foreach (uint id in _ids) if (!gone.Contains(id)) after.Add(id);
                removed.AddRange(delta.Despawns);
            }

            // Resolve and check every update before touching state.
            Planned[] planned = new Planned[delta.Updates.Count];
            for (int i = 0; i < delta.Updates.Count; i++)
            {
                Update u = delta.Updates[i];
                MirrorEntity e = u.Index >= 0 && u.Index < after.Count ? Get(after[u.Index]) : null;
                if (e == null || e.Id != u.Id)
                    throw new ProtocolException(DecodeErrorKind.Invalid, "update index " + u.Index + " does not name entity " + u.Id);
                long qx = e.Qx;
                long qy = e.Qy;
                if (u.Pos.HasValue)
                {
                    PosForm p = u.Pos.Value;
                    if (p.Form == PosFormKind.Absolute)
                    {
                        qx = p.Qx;
                        qy = p.Qy;
                    }
                    else
                    {
                        qx += p.Dx;
                        qy += p.Dy;
                    }
                }
                if (qx < int.MinValue || qx > int.MaxValue || qy < int.MinValue || qy > int.MaxValue)
                    throw new ProtocolException(DecodeErrorKind.Invalid, "entity " + e.Id + " moved outside the i32 position range");
                foreach (FieldChange f in u.Fields)
                {
                    if (f.Index < 0 || f.Index >= e.Fields.Length)
                        throw new ProtocolException(DecodeErrorKind.Invalid, "field " + f.Index + " of entity " + e.Id);
                }
                planned[i] = new Planned { E = e, Qx = (int)qx, Qy = (int)qy };
            }
            HashSet<uint> afterSet = new HashSet<uint>(after);
            foreach (Spawn s in delta.Spawns)
            {
                if (afterSet.Contains(s.Id)) throw new ProtocolException(DecodeErrorKind.Invalid, "spawned id " + s.Id + " is already known");
                if (Schema.KindAt(s.Kind) == null) throw new ProtocolException(DecodeErrorKind.Invalid, "kind " + s.Kind);
            }

            // Commit.
            foreach (uint id in removed) if (!afterSet.Contains(id)) _byId.Remove(id);
            for (int i = 0; i < delta.Updates.Count; i++)
            {
                Planned p = planned[i];
                p.E.Qx = p.Qx;
                p.E.Qy = p.Qy;
                foreach (FieldChange f in delta.Updates[i].Fields) p.E.Fields[f.Index] = f.Value;
                changes.Updated.Add(p.E.Id);
            }
            foreach (Spawn s in delta.Spawns)
            {
                _byId[s.Id] = new MirrorEntity(s.Id, s.Kind, s.Qx, s.Qy, (FieldValue[])s.Fields.Clone());
                changes.Spawned.Add(s.Id);
            }
            _ids = MergeAscending(after, changes.Spawned);
            _lastTick = delta.Tick;
            return changes;
        }

        private static List<uint> MergeAscending(List<uint> a, List<uint> b)
        {
            if (b.Count == 0) return a;
            List<uint> out_ = new List<uint>(a.Count + b.Count);
            int i = 0;
            int j = 0;
            while (i < a.Count || j < b.Count)
            {
                if (j >= b.Count || (i < a.Count && a[i] < b[j])) out_.Add(a[i++]);
                else out_.Add(b[j++]);
            }
            return out_;
        }
    }
}
