// The entities the client sees, drawn through an interpolation buffer.
//
// Every Delta adds timed samples (server tick → quantized position and field values) to each changed
// entity's track. A frame is drawn a delay behind the newest data: each entity's position is
// interpolated between the two samples around that render tick; field values, spawns and despawns take
// effect exactly at the tick they happened. The delay is measured (Playout): one patch interval plus the
// lateness of nearly every recent Delta (including head-of-line stalls) plus a jitter margin, clamped to
// [MinDelayMs, MaxDelayMs], and it changes at a bounded rate so motion never jumps when it adapts. When a
// Delta is later still, entities that were moving keep moving along their last velocity for at most
// MaxExtrapolationMs; when the data arrives, the difference to what was drawn is blended away over
// BlendMs instead of being jumped.
//
// Frame() is the hot path a game calls every frame: it allocates nothing. Tracks, their sample rings and
// the frame it returns are preallocated and reused (tracks go back to a pool when their entity leaves).
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>Tuning of a <see cref="Replica"/> (the delay's, see <see cref="PlayoutOptions"/>, plus the ones below).</summary>
    public sealed class ReplicaOptions : PlayoutOptions
    {
        /// <summary>Samples kept per entity (default 32); older ones are dropped and counted.</summary>
        public int MaxSamples = 32;
        /// <summary>How far past the newest data a moving entity is extrapolated, ms (default 150; 0 = never).</summary>
        public double MaxExtrapolationMs = 150;
        /// <summary>How long the correction after an extrapolation takes to vanish, ms (default 150).</summary>
        public double BlendMs = 150;
    }

    /// <summary>One entity as drawn in a frame.</summary>
    public struct ReplicaEntity
    {
        /// <summary>Entity id.</summary>
        public uint Id;
        /// <summary>Kind id.</summary>
        public int Kind;
        /// <summary>Interpolated x in world units.</summary>
        public double X;
        /// <summary>Interpolated y in world units.</summary>
        public double Y;
        /// <summary>Field values (wire form) as of the render tick. Read-only: owned by the replica, valid until the next <see cref="Replica.Frame"/>.</summary>
        public FieldValue[] Fields;
    }

    /// <summary>
    /// What to draw now. The replica reuses one instance: its contents are valid until the next
    /// <see cref="Replica.Frame"/> (use <see cref="Clone"/> to keep one).
    /// </summary>
    public sealed class ReplicaFrame
    {
        private readonly List<ReplicaEntity> _entities = new List<ReplicaEntity>();
        private readonly Dictionary<uint, int> _index = new Dictionary<uint, int>();
        private readonly List<uint> _entered = new List<uint>();
        private readonly List<uint> _left = new List<uint>();

        /// <summary>The (fractional) server tick drawn; NaN before the first Delta.</summary>
        public double RenderTick;
        /// <summary>Interpolation delay used, in ms (above the fastest recent delivery).</summary>
        public double DelayMs;
        /// <summary>How far past the newest data this frame is drawn, in ticks (0 = none).</summary>
        public double ExtrapolatedTicks;

        /// <summary>Visible entities.</summary>
        public IReadOnlyList<ReplicaEntity> Entities { get { return _entities; } }
        /// <summary>Ids visible now that were not in the previous frame.</summary>
        public IReadOnlyList<uint> Entered { get { return _entered; } }
        /// <summary>Ids visible in the previous frame that are not now.</summary>
        public IReadOnlyList<uint> Left { get { return _left; } }

        /// <summary>The entity <paramref name="id"/> if it is visible.</summary>
        public bool TryGet(uint id, out ReplicaEntity entity)
        {
            int i;
            if (_index.TryGetValue(id, out i))
            {
                entity = _entities[i];
                return true;
            }
            entity = default(ReplicaEntity);
            return false;
        }

        /// <summary>Whether entity <paramref name="id"/> is visible.</summary>
        public bool Contains(uint id) { return _index.ContainsKey(id); }

        /// <summary>Whether <paramref name="id"/> entered in this frame.</summary>
        public bool HasEntered(uint id) { return _entered.Contains(id); }

        /// <summary>Whether <paramref name="id"/> left in this frame.</summary>
        public bool HasLeft(uint id) { return _left.Contains(id); }

        internal void Reset()
        {
            _entities.Clear();
            _index.Clear();
            _entered.Clear();
            _left.Clear();
        }

        internal void Put(ReplicaEntity e)
        {
            int i;
            if (_index.TryGetValue(e.Id, out i)) _entities[i] = e;
            else
            {
                _index[e.Id] = _entities.Count;
                _entities.Add(e);
            }
        }

        internal List<ReplicaEntity> EntityList { get { return _entities; } }
        internal List<uint> EnteredList { get { return _entered; } }
        internal List<uint> LeftList { get { return _left; } }

        /// <summary>An independent copy (allocates; for tools and tests).</summary>
        public ReplicaFrame Clone()
        {
            ReplicaFrame c = new ReplicaFrame { RenderTick = RenderTick, DelayMs = DelayMs, ExtrapolatedTicks = ExtrapolatedTicks };
            foreach (ReplicaEntity e in _entities)
            {
                ReplicaEntity copy = e;
                copy.Fields = e.Fields == null ? null : (FieldValue[])e.Fields.Clone();
                c.Put(copy);
            }
            c._entered.AddRange(_entered);
            c._left.AddRange(_left);
            return c;
        }
    }

    /// <summary>The client's interpolated view of the zone.</summary>
    public sealed class Replica
    {
        private sealed class Sample
        {
            public double Tick;
            public int Qx;
            public int Qy;
            public FieldValue[] Fields = new FieldValue[0];

            public void Set(double tick, int qx, int qy, FieldValue[] fields)
            {
                Tick = tick;
                Qx = qx;
                Qy = qy;
                if (Fields.Length != fields.Length) Fields = new FieldValue[fields.Length];
                Array.Copy(fields, Fields, fields.Length);
            }
        }

        private sealed class Track
        {
            public uint Id;
            public int Kind;
            public double SpawnTick;
            public bool HasDespawn;
            public double DespawnTick;
            public Sample[] Ring;
            public int Head;
            public int Count;
            // The last frame drew this track past the newest data: that frame's tick and raw position (quanta).
            public bool Extrapolated;
            public double ExRenderTick;
            public double ExQx;
            public double ExQy;
            // Drawn minus true position after an extrapolation (quanta), decaying from OffsetAt.
            public double OffsetX;
            public double OffsetY;
            public double OffsetAt;

            public Track(int capacity)
            {
                Ring = new Sample[capacity];
                for (int i = 0; i < capacity; i++) Ring[i] = new Sample();
            }

            public Sample At(int i) { return Ring[(Head + i) % Ring.Length]; }
        }

        private readonly ServerClock _clock;
        private readonly Playout _playout;
        private readonly int _maxSamples;
        private readonly double _maxExtrapolationMs;
        private readonly double _blendMs;
        private Schema _schema;
        private double _patchEvery = 1;
        private readonly Dictionary<uint, Track> _live = new Dictionary<uint, Track>();
        private readonly List<Track> _retiring = new List<Track>();
        private readonly Stack<Track> _pool = new Stack<Track>();
        private bool _hasLastDeltaTick;
        private long _lastDeltaTick;
        private bool _hasLastFrameAt;
        private double _lastFrameAt;
        private double _lastRenderTick = double.NegativeInfinity;
        private HashSet<uint> _visible = new HashSet<uint>();
        private HashSet<uint> _nextVisible = new HashSet<uint>();
        private readonly ReplicaFrame _frame = new ReplicaFrame();
        private readonly List<uint> _scratchIds = new List<uint>();
        private readonly HashSet<uint> _scratchSet = new HashSet<uint>();
        // The next BASELINE is a new zone's after a transfer: its entities are drawn from the first frame on
        // (they were there before the client saw them), so the picture never goes blank.
        private bool _arriving;

        /// <summary>Samples dropped because a track was full.</summary>
        public int DroppedSamples;
        /// <summary>Frames drawn past the newest data (extrapolating).</summary>
        public int ExtrapolatedFrames;

        /// <summary>A replica timed by <paramref name="clock"/> (its tick rate and jitter) and by the Deltas' arrivals.</summary>
        public Replica(ServerClock clock, ReplicaOptions options = null)
        {
            ReplicaOptions o = options ?? new ReplicaOptions();
            _clock = clock;
            _playout = new Playout(o);
            _maxSamples = Math.Max(2, o.MaxSamples);
            _maxExtrapolationMs = Math.Max(0, o.MaxExtrapolationMs);
            _blendMs = Math.Max(1, o.BlendMs);
        }

        /// <summary>Starts a zone session (on Welcome): the schema and cadence the samples are read with.</summary>
        public void SetZone(Schema schema, uint patchEvery)
        {
            _schema = schema;
            _patchEvery = patchEvery;
        }

        /// <summary>The current interpolation delay in ms (above the fastest recent delivery).</summary>
        public double DelayMs { get { return _playout.DelayMs; } }

        /// <summary>The playout (for its counters).</summary>
        public Playout Playout { get { return _playout; } }

        /// <summary>The server tick of the last frame, floored (what an input's <c>view_tick</c> should carry).</summary>
        public long ViewTick
        {
            get
            {
                double t = _lastRenderTick;
                return double.IsNaN(t) || double.IsInfinity(t) ? 0 : (long)Math.Max(0, Math.Floor(t));
            }
        }

        private double PatchMs() { return (_patchEvery * 1000) / (_clock.Hz != 0 ? _clock.Hz : 1); }

        /// <summary>The delay the replica is adapting towards.</summary>
        public double TargetDelayMs() { return _playout.TargetDelayMs(PatchMs(), _clock.JitterMs); }

        /// <summary>
        /// Records a Delta that was just applied to <paramref name="mirror"/> (the mirror holds the state after
        /// it) and arrived at client time <paramref name="recvMs"/>.
        /// </summary>
        public void OnDelta(Delta delta, Mirror mirror, double recvMs)
        {
            long t = delta.Tick;
            if (_clock.Hz > 0) _playout.Observe(t, recvMs, 1000 / _clock.Hz);
            // Entities a Delta does not mention were unchanged as of the previous Delta. (A host that fell
            // behind a slow link sends one Delta for several patches, so the previous one may be older than
            // one patch interval: a move it reports happened somewhere after the previous Delta.)
            double confirmed = _hasLastDeltaTick ? _lastDeltaTick : t;
            bool arrived = _arriving && delta.Baseline;
            if (delta.Baseline) _arriving = false;
            if (delta.Baseline)
            {
                _scratchSet.Clear();
                foreach (Spawn s in delta.Spawns) _scratchSet.Add(s.Id);
                _scratchIds.Clear();
                foreach (KeyValuePair<uint, Track> kv in _live)
                {
                    MirrorEntity spawn = mirror.Get(kv.Key);
                    if (!_scratchSet.Contains(kv.Key) || spawn == null || spawn.Kind != kv.Value.Kind) _scratchIds.Add(kv.Key);
                }
                foreach (uint id in _scratchIds) Retire(id, t);
            }
            else
            {
                foreach (uint id in delta.Despawns) Retire(id, t);
            }
            foreach (Update u in delta.Updates)
            {
                MirrorEntity e = mirror.Get(u.Id);
                Track track;
                if (e != null && _live.TryGetValue(u.Id, out track)) Push(track, t, confirmed, e.Qx, e.Qy, e.Fields);
            }
            foreach (Spawn s in delta.Spawns)
            {
                MirrorEntity e = mirror.Get(s.Id);
                if (e == null) continue;
                Track track;
                if (_live.TryGetValue(s.Id, out track))
                {
                    // A BASELINE re-sent an entity we already draw: continue its track.
                    Push(track, t, confirmed, e.Qx, e.Qy, e.Fields);
                }
                else
                {
                    track = Take();
                    track.Id = s.Id;
                    track.Kind = s.Kind;
                    track.SpawnTick = arrived ? double.NegativeInfinity : t;
                    track.HasDespawn = false;
                    track.Ring[0].Set(t, e.Qx, e.Qy, e.Fields);
                    track.Head = 0;
                    track.Count = 1;
                    _live[s.Id] = track;
                }
            }
            if (!_hasLastDeltaTick || t > _lastDeltaTick)
            {
                _lastDeltaTick = t;
                _hasLastDeltaTick = true;
            }
            SettleExtrapolations();
        }

        private Track Take()
        {
            Track track = _pool.Count > 0 ? _pool.Pop() : new Track(_maxSamples);
            track.Extrapolated = false;
            track.OffsetX = 0;
            track.OffsetY = 0;
            track.OffsetAt = 0;
            return track;
        }

        /// <summary>
        /// New data replaces what was extrapolated: keep the picture where it was by turning the difference
        /// into an offset that fades over BlendMs (a jump would show the guess was wrong).
        /// </summary>
        private void SettleExtrapolations()
        {
            double at = _hasLastFrameAt ? _lastFrameAt : 0;
            foreach (KeyValuePair<uint, Track> kv in _live) Settle(kv.Value, at);
            foreach (Track track in _retiring) Settle(track, at);
        }

        private void Settle(Track track, double at)
        {
            if (!track.Extrapolated) return;
            // What that frame would have drawn with the data known now.
            double qx;
            double qy;
            bool ex = RawFor(track, track.ExRenderTick, out qx, out qy);
            double k = OffsetWeight(track, at);
            track.OffsetX = track.OffsetX * k + (track.ExQx - qx);
            track.OffsetY = track.OffsetY * k + (track.ExQy - qy);
            track.OffsetAt = at;
            if (ex)
            {
                track.ExQx = qx;
                track.ExQy = qy;
            }
            else track.Extrapolated = false;
        }

        /// <summary>
        /// The raw position (quanta, no blending offset) of a track for a frame at <paramref name="renderTick"/>:
        /// on or before the newest data, interpolated (or held); past it, a track the newest Delta moved goes on
        /// along its last velocity for at most MaxExtrapolationMs, and the rest are held. Returns whether that
        /// position is a guess past the newest data.
        /// </summary>
        private bool RawFor(Track track, double renderTick, out double qx, out double qy)
        {
            double newest = _hasLastDeltaTick ? _lastDeltaTick : renderTick;
            double maxAhead = (_maxExtrapolationMs * _clock.Hz) / 1000;
            double ahead = Math.Max(0, Math.Min(renderTick - newest, maxAhead));
            if (ahead > 0 && MovedInNewest(track))
            {
                RawAt(track, newest + ahead, true, out qx, out qy);
                return true;
            }
            // Held past the newest data is a guess too ("it stays where it was"): when the data comes, the
            // difference is blended like any other.
            RawAt(track, Math.Min(renderTick, newest), false, out qx, out qy);
            return renderTick > newest;
        }

        /// <summary>Whether the newest Delta moved (or changed) this track: only then may it be extrapolated.</summary>
        private bool MovedInNewest(Track track)
        {
            if (track.Count == 0 || !_hasLastDeltaTick) return false;
            return track.At(track.Count - 1).Tick >= _lastDeltaTick && !track.HasDespawn;
        }

        private double OffsetWeight(Track track, double nowMs) { return Math.Max(0, 1 - (nowMs - track.OffsetAt) / _blendMs); }

        private void Retire(uint id, long tick)
        {
            Track track;
            if (!_live.TryGetValue(id, out track)) return;
            _live.Remove(id);
            track.HasDespawn = true;
            track.DespawnTick = tick;
            _retiring.Add(track);
        }

        private void Push(Track track, long t, double confirmed, int qx, int qy, FieldValue[] fields)
        {
            if (track.Count > 0)
            {
                Sample last = track.At(track.Count - 1);
                if (last.Tick < confirmed && confirmed < t)
                {
                    // Hold the previous state until the patch before this one, so motion starts when it did.
                    Sample slot = AppendSlot(track);
                    if (slot != last) slot.Set(confirmed, last.Qx, last.Qy, last.Fields);
                }
            }
            Sample tail = track.Count > 0 ? track.At(track.Count - 1) : null;
            if (tail != null && tail.Tick >= t) tail.Set(t, qx, qy, fields);
            else AppendSlot(track).Set(t, qx, qy, fields);
        }

        /// <summary>The slot of a new newest sample (the oldest is dropped and counted when the ring is full).</summary>
        private Sample AppendSlot(Track track)
        {
            if (track.Count == track.Ring.Length)
            {
                track.Head = (track.Head + 1) % track.Ring.Length;
                track.Count -= 1;
                DroppedSamples += 1;
            }
            Sample slot = track.At(track.Count);
            track.Count += 1;
            return slot;
        }

        /// <summary>
        /// Feeds this replica from <paramref name="conn"/> (Welcome and Delta events) and makes it stamp inputs
        /// with this replica's render tick. Dispose the result to detach.
        /// </summary>
        public IDisposable Attach(ZoneConnection conn)
        {
            Action<Welcome, WelcomeInfo> onWelcome = (w, info) =>
            {
                if (!info.Resumed) Clear();
                // A transfer's BASELINE comes in the same Poll: the new world replaces the old at once.
                if (info.Transfer != null) _arriving = true;
                SetZone(w.Schema, w.PatchEvery);
            };
            Action<Delta, DeltaInfo> onDelta = (d, info) => OnDelta(d, info.Mirror, info.RecvMs);
            Func<long> viewTick = () => ViewTick;
            conn.Welcomed += onWelcome;
            conn.DeltaApplied += onDelta;
            conn.SetViewTickSource(viewTick);
            return new Detacher(() =>
            {
                conn.Welcomed -= onWelcome;
                conn.DeltaApplied -= onDelta;
                conn.SetViewTickSource(null);
            });
        }

        /// <summary>Forgets everything and takes the next BASELINE as a whole new world drawn from the next frame on.</summary>
        public void Arrive()
        {
            Clear();
            _arriving = true;
        }

        /// <summary>Forgets everything (a new zone, or a fresh join).</summary>
        public void Clear()
        {
            foreach (KeyValuePair<uint, Track> kv in _live) _pool.Push(kv.Value);
            _live.Clear();
            foreach (Track t in _retiring) _pool.Push(t);
            _retiring.Clear();
            _hasLastDeltaTick = false;
            _lastRenderTick = double.NegativeInfinity;
            _visible.Clear();
            // A fresh join may be on another host or zone whose ticks mean another time: measure again.
            _playout.Reset();
        }

        /// <summary>Computes the frame to draw at client time <paramref name="nowMs"/>. Allocates nothing.</summary>
        public ReplicaFrame Frame(double nowMs)
        {
            double hz = _clock.Hz;
            double point;
            bool hasPoint = _playout.Advance(nowMs, PatchMs(), _clock.JitterMs, _hasLastDeltaTick ? _lastDeltaTick : -1, hz > 0 ? 1000 / hz : 0, out point);
            _lastFrameAt = nowMs;
            _hasLastFrameAt = true;
            double renderTick = !hasPoint || !(hz > 0) ? double.NaN : ((nowMs - point) * hz) / 1000;
            if (double.IsNaN(renderTick)) renderTick = _hasLastDeltaTick ? _lastDeltaTick : double.NaN;
            // Never draw backwards in time: a shrinking offset estimate holds the picture instead.
            if (renderTick < _lastRenderTick) renderTick = _lastRenderTick;
            if (!double.IsNaN(renderTick) && !double.IsInfinity(renderTick)) _lastRenderTick = renderTick;

            // Past the newest data: entities that moved in it go on for a bounded time; the rest held still.
            double newest = _hasLastDeltaTick ? _lastDeltaTick : renderTick;
            double maxAhead = (_maxExtrapolationMs * hz) / 1000;
            bool finite = !double.IsNaN(renderTick) && !double.IsInfinity(renderTick);
            double ahead = finite ? Math.Max(0, Math.Min(renderTick - newest, maxAhead)) : 0;
            if (renderTick > newest) ExtrapolatedFrames += 1;

            ReplicaFrame frame = _frame;
            frame.Reset();
            double step = _schema != null ? _schema.PosStep : 1;
            foreach (KeyValuePair<uint, Track> kv in _live) Draw(frame, kv.Value, renderTick, step, nowMs);
            foreach (Track track in _retiring) Draw(frame, track, renderTick, step, nowMs);

            _nextVisible.Clear();
            // The concrete list: enumerating through the interface would allocate an enumerator per frame.
            foreach (ReplicaEntity e in frame.EntityList)
            {
                _nextVisible.Add(e.Id);
                if (!_visible.Contains(e.Id)) frame.EnteredList.Add(e.Id);
            }
            foreach (uint id in _visible) if (!_nextVisible.Contains(id)) frame.LeftList.Add(id);
            HashSet<uint> swap = _visible;
            _visible = _nextVisible;
            _nextVisible = swap;

            // Tracks whose despawn is drawn are done: back to the pool.
            int kept = 0;
            for (int i = 0; i < _retiring.Count; i++)
            {
                Track t = _retiring[i];
                if (t.HasDespawn && !(renderTick >= t.DespawnTick)) _retiring[kept++] = t;
                else _pool.Push(t);
            }
            if (kept < _retiring.Count) _retiring.RemoveRange(kept, _retiring.Count - kept);
            foreach (KeyValuePair<uint, Track> kv in _live) Prune(kv.Value, renderTick);

            frame.RenderTick = renderTick;
            frame.DelayMs = _playout.DelayMs;
            frame.ExtrapolatedTicks = ahead;
            return frame;
        }

        private void Draw(ReplicaFrame frame, Track track, double renderTick, double step, double nowMs)
        {
            if (!(renderTick >= track.SpawnTick)) return;
            if (track.HasDespawn && renderTick >= track.DespawnTick) return;
            double qx;
            double qy;
            bool ex = RawFor(track, renderTick, out qx, out qy);
            track.Extrapolated = ex;
            if (ex)
            {
                track.ExRenderTick = renderTick;
                track.ExQx = qx;
                track.ExQy = qy;
            }
            double k = OffsetWeight(track, nowMs);
            double x = qx + track.OffsetX * k;
            double y = qy + track.OffsetY * k;
            frame.Put(new ReplicaEntity { Id = track.Id, Kind = track.Kind, X = x * step, Y = y * step, Fields = FieldsAt(track, renderTick) });
        }

        /// <summary>
        /// The position (quanta) of a track at <paramref name="tick"/>: interpolated between samples; past the
        /// last one, held, or continued along the last segment when <paramref name="extrapolate"/>.
        /// </summary>
        private static void RawAt(Track track, double tick, bool extrapolate, out double qx, out double qy)
        {
            Sample a = null;
            Sample b = null;
            for (int i = 0; i < track.Count; i++)
            {
                Sample s = track.At(i);
                if (s.Tick <= tick) a = s;
                else
                {
                    b = s;
                    break;
                }
            }
            if (a == null)
            {
                if (track.Count == 0)
                {
                    qx = 0;
                    qy = 0;
                }
                else
                {
                    Sample first = track.At(0);
                    qx = first.Qx;
                    qy = first.Qy;
                }
                return;
            }
            if (b != null && b.Tick > a.Tick)
            {
                double alpha = (tick - a.Tick) / (b.Tick - a.Tick);
                qx = a.Qx + ((double)b.Qx - a.Qx) * alpha;
                qy = a.Qy + ((double)b.Qy - a.Qy) * alpha;
                return;
            }
            Sample prev = track.Count >= 2 ? track.At(track.Count - 2) : null;
            if (extrapolate && prev != null && a.Tick > prev.Tick && tick > a.Tick)
            {
                double vx = ((double)a.Qx - prev.Qx) / (a.Tick - prev.Tick);
                double vy = ((double)a.Qy - prev.Qy) / (a.Tick - prev.Tick);
                qx = a.Qx + vx * (tick - a.Tick);
                qy = a.Qy + vy * (tick - a.Tick);
                return;
            }
            qx = a.Qx;
            qy = a.Qy;
        }

        /// <summary>Field values as of <paramref name="tick"/> (they change exactly at the tick they happened).</summary>
        private static FieldValue[] FieldsAt(Track track, double tick)
        {
            if (track.Count == 0) return null;
            Sample a = track.At(0);
            for (int i = 0; i < track.Count; i++)
            {
                Sample s = track.At(i);
                if (s.Tick <= tick) a = s;
                else break;
            }
            return a.Fields;
        }

        /// <summary>
        /// Drops samples no frame will need again: all before the last one at or before <paramref name="renderTick"/>,
        /// but never the one before the newest (the last segment's velocity is what an extrapolation follows).
        /// </summary>
        private static void Prune(Track track, double renderTick)
        {
            int keepFrom = 0;
            for (int i = 0; i < track.Count; i++) if (track.At(i).Tick <= renderTick) keepFrom = i;
            keepFrom = Math.Min(keepFrom, track.Count - 2);
            if (keepFrom > 0)
            {
                track.Head = (track.Head + keepFrom) % track.Ring.Length;
                track.Count -= keepFrom;
            }
        }
    }

    /// <summary>Runs an action once when disposed (what Attach methods return).</summary>
    internal sealed class Detacher : IDisposable
    {
        private Action _action;

        internal Detacher(Action action) { _action = action; }

        public void Dispose()
        {
            Action a = _action;
            _action = null;
            if (a != null) a();
        }
    }
}
