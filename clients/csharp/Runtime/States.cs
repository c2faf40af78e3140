// The client's state ring (PROTOCOL.md §5.8): on a WebTransport session every patch is a State datagram
// written against a base, a state the client acknowledged, so any State may be lost, repeated or
// reordered. The client keeps the states produced by the last 32 States it applied, by tick, each a
// full copy of the known set (a Mirror); it applies a new State to a copy of its base and acknowledges
// the newest tick it applied.
//
// What a State changed is reported relative to the state shown before it, not to its base, in the form
// a Delta reports it, so a Replica and a Predictor consume States exactly as they consume Deltas. The
// C# SDK's connection speaks WebSocket only; the ring is part of the SDK for a transport that carries
// States (and is tested on its own).
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>What <see cref="StateRing.Apply"/> did with one State.</summary>
    public enum StateApplyStatus
    {
        /// <summary>Applied and made current.</summary>
        Applied,
        /// <summary>Its tick is not newer than the newest applied (a late or repeated datagram).</summary>
        Stale,
        /// <summary>The ring does not hold its base (dropped).</summary>
        NoBase,
    }

    /// <summary>The outcome of <see cref="StateRing.Apply"/>.</summary>
    public sealed class StateApplyResult
    {
        /// <summary>What happened.</summary>
        public StateApplyStatus Status;
        /// <summary>The State's head.</summary>
        public DeltaHead Head;
        /// <summary>Applied: the State as decoded against its base.</summary>
        public Delta State;
        /// <summary>Applied: the same change as a Delta from the state shown before to the new one.</summary>
        public Delta Delta;
        /// <summary>Applied: what changed relative to the previous current state.</summary>
        public MirrorChanges Changes;
        /// <summary>Applied: the new current state (owned by the ring: read it, do not apply to it).</summary>
        public Mirror Mirror;
    }

    /// <summary>The states of the last <see cref="Limits.StateRing"/> States a client applied (§5.8).</summary>
    public sealed class StateRing
    {
        /// <summary>The schema the states are decoded with.</summary>
        public readonly Schema Schema;
        /// <summary>How many states are kept (32 by the protocol).</summary>
        public readonly int Capacity;
        private readonly Dictionary<long, Mirror> _states = new Dictionary<long, Mirror>();
        // Ticks only grow, so the order of insertion is tick order: the front is the oldest.
        private readonly Queue<long> _order = new Queue<long>();
        private Mirror _cur;
        private long _newest;

        /// <summary>An empty ring: nothing applied, the current state empty.</summary>
        public StateRing(Schema schema, int capacity = Limits.StateRing)
        {
            Schema = schema;
            Capacity = Math.Max(1, capacity);
            _cur = new Mirror(schema);
        }

        /// <summary>The state shown: that of the newest State applied (empty before the first).</summary>
        public Mirror Current { get { return _cur; } }

        /// <summary>The tick to acknowledge (§4.5): the newest State applied, 0 = none yet.</summary>
        public long AckTick { get { return _newest; } }

        /// <summary>How many states are held.</summary>
        public int Count { get { return _states.Count; } }

        /// <summary>Whether the state of <paramref name="tick"/> is held (0, the empty state, always is).</summary>
        public bool Has(long tick) { return tick == 0 || _states.ContainsKey(tick); }

        /// <summary>The held ticks, ascending.</summary>
        public List<long> Ticks() { return new List<long>(_order); }

        /// <summary>Forgets every state (a new session): the next State must be a BASELINE.</summary>
        public void Reset()
        {
            _states.Clear();
            _order.Clear();
            _cur = new Mirror(Schema);
            _newest = 0;
        }

        /// <summary>
        /// Applies one State message (tag included). A tick not newer than the newest applied is stale; a base
        /// the ring does not hold is NoBase; both leave the ring as it was. Otherwise the State is applied to a
        /// copy of its base (the empty state for base 0), kept as the state of its tick (the oldest beyond
        /// <see cref="Capacity"/> dropped) and made current. Throws <see cref="ProtocolException"/> when the
        /// bytes are not a State or do not apply to their base; the ring is then unchanged.
        /// </summary>
        public StateApplyResult Apply(byte[] bytes)
        {
            DeltaHead head = DeltaCodec.DecodeHead(bytes);
            if (head.Tag != Tag.State || !head.Base.HasValue)
                throw new ProtocolException(DecodeErrorKind.UnknownTag, "expected State, got 0x" + head.Tag.ToString("x"));
            if (head.Tick <= _newest) return new StateApplyResult { Status = StateApplyStatus.Stale, Head = head };
            long baseTick = head.Base.Value;
            Mirror baseState;
            if (baseTick == 0) baseState = new Mirror(Schema);
            else if (!_states.TryGetValue(baseTick, out baseState)) return new StateApplyResult { Status = StateApplyStatus.NoBase, Head = head };
            Delta state = DeltaCodec.Decode(bytes, Schema, baseState.Known());
            // A fresh empty state needs no copy; a held one is copied so that it stays as it was.
            Mirror next = baseTick == 0 ? baseState : baseState.Clone();
            MirrorChanges own = next.Apply(state);
            Mirror prev = _cur;
            Delta delta;
            MirrorChanges changes;
            if (state.Baseline)
            {
                // As a BASELINE Delta: everything shown before goes, everything in it comes.
                delta = state.WithoutBase();
                changes = new MirrorChanges();
                changes.Removed.AddRange(prev.Ids);
                changes.Spawned.AddRange(own.Spawned);
            }
            else if (baseState == prev)
            {
                // Written against the state shown: the State is that Delta.
                delta = state.WithoutBase();
                changes = own;
            }
            else
            {
                // Written against an older state: what the screen needs is the change from the state shown.
                delta = DeltaBetween(prev, next, state.Tick, state.Ack, state.HasControl, state.Control, out changes);
            }
            _states[head.Tick] = next;
            _order.Enqueue(head.Tick);
            while (_states.Count > Capacity) _states.Remove(_order.Dequeue());
            _cur = next;
            _newest = head.Tick;
            return new StateApplyResult { Status = StateApplyStatus.Applied, Head = head, State = state, Delta = delta, Changes = changes, Mirror = next };
        }

        /// <summary>
        /// A Delta taking <paramref name="from"/> to <paramref name="to"/> (two known sets of one schema), with the
        /// tick, ack and control given, and what it changes as <see cref="Mirror.Apply"/> reports it. Despawns: ids
        /// <paramref name="to"/> lacks (or holds with another kind); updates: changed positions (canonical form)
        /// and fields; spawns: ids new in <paramref name="to"/>. Applying the Delta to a copy of
        /// <paramref name="from"/> yields <paramref name="to"/>.
        /// </summary>
        public static Delta DeltaBetween(Mirror from, Mirror to, long tick, uint ack, bool hasControl, uint? control, out MirrorChanges changes)
        {
            Delta delta = new Delta { Tick = tick, Ack = ack, HasControl = hasControl, Control = control };
            List<MirrorEntity> after = new List<MirrorEntity>();
            foreach (MirrorEntity e in from.Entities())
            {
                MirrorEntity next = to.Get(e.Id);
                if (next == null || next.Kind != e.Kind) delta.Despawns.Add(e.Id);
                else after.Add(e);
            }
            HashSet<uint> kept = new HashSet<uint>();
            for (int index = 0; index < after.Count; index++)
            {
                MirrorEntity e = after[index];
                kept.Add(e.Id);
                MirrorEntity n = to.Get(e.Id);
                Update u = new Update { Index = index, Id = e.Id, Kind = e.Kind };
                int count = Math.Max(e.Fields.Length, n.Fields.Length);
                for (int i = 0; i < count; i++)
                {
                    bool same = i < e.Fields.Length && i < n.Fields.Length && e.Fields[i].Equals(n.Fields[i]);
                    if (!same && i < n.Fields.Length)
                    {
                        u.Fields.Add(new FieldChange(i, n.Fields[i]));
                        u.Mask |= 1u << i;
                    }
                }
                u.Pos = DeltaCodec.CanonicalPosForm(n.Qx, n.Qy, e.Qx, e.Qy, u.Fields.Count > 0);
                if (!u.Pos.HasValue && u.Fields.Count == 0) continue;
                delta.Updates.Add(u);
            }
            foreach (MirrorEntity n in to.Entities())
            {
                if (!kept.Contains(n.Id)) delta.Spawns.Add(new Spawn { Id = n.Id, Kind = n.Kind, Qx = n.Qx, Qy = n.Qy, Fields = (FieldValue[])n.Fields.Clone() });
            }
            changes = new MirrorChanges();
            changes.Removed.AddRange(delta.Despawns);
            foreach (Update u in delta.Updates) changes.Updated.Add(u.Id);
            foreach (Spawn s in delta.Spawns) changes.Spawned.Add(s.Id);
            return delta;
        }
    }
}
