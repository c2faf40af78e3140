// Client-side prediction for the player's own entity.
//
// The game supplies Step(state, input) → state, the same rule the zone runs. Each input sent is recorded
// with its seq and applied at once, so the player sees its own move without waiting a round trip. On each
// Delta the predictor restarts from the server's state of the controlled entity, drops every input the
// server has acknowledged (processed or refused: seq ≤ ack), and replays the rest. When the replayed
// prediction differs from what was shown, the difference is either applied at once (Snap) or shown as an
// offset that decays to zero over EaseMs (Ease).
//
// With StepMs (how long one input moves the player, e.g. one tick), the drawn position moves from where
// it was to the newest prediction over that time instead of stepping there at once: inputs go at the tick
// rate, screens refresh faster, and a 30 Hz staircase on a 60 Hz screen looks like judder.
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>How a correction is shown.</summary>
    public enum Smoothing
    {
        /// <summary>Applied at once.</summary>
        Snap,
        /// <summary>Shown as an offset decaying linearly to zero over <see cref="PredictorOptions{S,I}.EaseMs"/>.</summary>
        Ease,
    }

    /// <summary>A 2D point in world units.</summary>
    public struct Point
    {
        /// <summary>x</summary>
        public double X;
        /// <summary>y</summary>
        public double Y;

        /// <summary>The point (<paramref name="x"/>, <paramref name="y"/>).</summary>
        public Point(double x, double y)
        {
            X = x;
            Y = y;
        }

        /// <inheritdoc/>
        public override string ToString() { return "(" + X + ", " + Y + ")"; }
    }

    /// <summary>What the game provides to a <see cref="Predictor{S,I}"/>.</summary>
    public sealed class PredictorOptions<S, I>
    {
        /// <summary>The movement rule shared with the server. Must not mutate its state argument.</summary>
        public Func<S, I, S> Step;
        /// <summary>Where a state is drawn (used for smoothing and for <see cref="Predictor{S,I}.RenderPosition"/>).</summary>
        public Func<S, Point> Position;
        /// <summary>Snap or Ease (default Ease).</summary>
        public Smoothing Smoothing = Smoothing.Ease;
        /// <summary>How long an eased correction takes to vanish, in ms (default 100).</summary>
        public double EaseMs = 100;
        /// <summary>Corrections longer than this distance are snapped even when easing (a teleport; default ∞).</summary>
        public double SnapDistance = double.PositiveInfinity;
        /// <summary>Unacknowledged inputs kept (default 256); older ones are dropped and counted.</summary>
        public int MaxPending = 256;
        /// <summary>How long one input's step takes on screen, ms (e.g. 1000 / tick rate); 0 = drawn as is.</summary>
        public double StepMs;
    }

    /// <summary>Predicts the controlled entity's state ahead of the server.</summary>
    public sealed class Predictor<S, I>
    {
        private struct Pending
        {
            public uint Seq;
            public I Input;
        }

        private readonly Func<S, I, S> _step;
        private readonly Func<S, Point> _position;
        private readonly Smoothing _smoothing;
        private readonly double _easeMs;
        private readonly double _snapDistance;
        private readonly int _maxPending;
        private readonly double _stepMs;
        private readonly List<Pending> _pending = new List<Pending>();
        private bool _hasPredicted;
        private S _predicted;
        // The server state of the last reconciliation: what a refused input is replayed without.
        private bool _hasBase;
        private S _base;
        private Point _offset;
        private double _offsetAt;
        private uint _lastSeq;
        // The drawn step in progress: from where (without the easing offset), since when, over how long.
        private bool _gliding;
        private Point _glideFrom;
        private double _glideAt;
        private double _glideMs;

        /// <summary>Reconciliations whose replayed state differed from the shown prediction.</summary>
        public int Corrections;
        /// <summary>Size of the last correction in world units.</summary>
        public double LastError;
        /// <summary>Inputs dropped because more than MaxPending were unacknowledged.</summary>
        public int Overflowed;

        /// <summary>A predictor with no state until the first server state arrives.</summary>
        public Predictor(PredictorOptions<S, I> options)
        {
            if (options == null || options.Step == null || options.Position == null) throw new ArgumentException("Step and Position are required");
            _step = options.Step;
            _position = options.Position;
            _smoothing = options.Smoothing;
            _easeMs = Math.Max(1, options.EaseMs);
            _snapDistance = options.SnapDistance;
            _maxPending = Math.Max(1, options.MaxPending);
            _stepMs = options.StepMs > 0 ? options.StepMs : 0;
        }

        /// <summary>Whether there is a prediction (false before the first server state).</summary>
        public bool HasState { get { return _hasPredicted; } }

        /// <summary>The predicted state (default before the first server state).</summary>
        public S State { get { return _predicted; } }

        /// <summary>Seqs of inputs not yet acknowledged, oldest first.</summary>
        public List<uint> PendingSeqs()
        {
            List<uint> out_ = new List<uint>(_pending.Count);
            foreach (Pending p in _pending) out_.Add(p.Seq);
            return out_;
        }

        /// <summary>
        /// Records an input that was sent with <paramref name="seq"/> and applies it to the prediction. With
        /// <paramref name="nowMs"/> (and StepMs set) the drawn position glides from where it is to the new prediction.
        /// </summary>
        public void Record(uint seq, I input, double? nowMs = null)
        {
            if (seq <= _lastSeq) return; // a replayed or stale seq would corrupt the replay order
            _lastSeq = seq;
            _pending.Add(new Pending { Seq = seq, Input = input });
            if (_pending.Count > _maxPending)
            {
                _pending.RemoveAt(0);
                Overflowed += 1;
            }
            if (!_hasPredicted) return;
            bool glide = nowMs.HasValue && _stepMs > 0;
            Point from = glide ? RawPosition(nowMs.Value) : default(Point);
            // An input that comes before the last one's step was drawn (a late frame, then a catch-up) takes
            // the rest of that step too: the drawn pace stays one step per StepMs, never a lurch. The drawn
            // position then trails by what was left, at most one step.
            double left = glide ? Math.Min(GlideLeft(nowMs.Value), _stepMs) : 0;
            _predicted = _step(_predicted, input);
            if (glide)
            {
                _gliding = true;
                _glideFrom = from;
                _glideAt = nowMs.Value;
                _glideMs = _stepMs + left;
            }
            else _gliding = false;
        }

        private double GlideLeft(double nowMs)
        {
            if (!_gliding) return 0;
            return Math.Max(0, _glideAt + _glideMs - nowMs);
        }

        /// <summary>Where the prediction is drawn at <paramref name="nowMs"/> without the easing offset.</summary>
        private Point RawPosition(double nowMs)
        {
            Point to = _position(_predicted);
            if (!_gliding || _stepMs <= 0) return to;
            double alpha = Math.Min(1, Math.Max(0, (nowMs - _glideAt) / _glideMs));
            return new Point(_glideFrom.X + (to.X - _glideFrom.X) * alpha, _glideFrom.Y + (to.Y - _glideFrom.Y) * alpha);
        }

        /// <summary>Forgets an input the client never managed to send.</summary>
        public void Drop(uint seq) { _pending.RemoveAll(p => p.Seq == seq); }

        /// <summary>
        /// The host refused input <paramref name="seq"/> (§5.6): it leaves the pending inputs and the prediction
        /// is replayed without it from the last server state. Returns whether it was pending.
        /// </summary>
        public bool Refuse(uint seq)
        {
            int removed = _pending.RemoveAll(p => p.Seq == seq);
            if (removed == 0) return false;
            if (_hasBase)
            {
                S next = _base;
                foreach (Pending p in _pending) next = _step(next, p.Input);
                _predicted = next;
                _hasPredicted = true;
            }
            return true;
        }

        /// <summary>
        /// Reconciles with the server: <paramref name="server"/> is the controlled entity's state at the Delta's
        /// tick (<paramref name="hasServer"/> false if this player controls nothing), <paramref name="ack"/> the last
        /// seq the zone processed. <paramref name="nowMs"/> starts an ease.
        /// </summary>
        public void Reconcile(uint ack, bool hasServer, S server, double nowMs)
        {
            int keep = 0;
            for (int i = 0; i < _pending.Count; i++) if (_pending[i].Seq > ack) _pending[keep++] = _pending[i];
            _pending.RemoveRange(keep, _pending.Count - keep);
            if (!hasServer)
            {
                _hasPredicted = false;
                _predicted = default(S);
                _hasBase = false;
                _base = default(S);
                _offset = default(Point);
                _gliding = false;
                return;
            }
            _base = server;
            _hasBase = true;
            S next = server;
            foreach (Pending p in _pending) next = _step(next, p.Input);
            bool hadBefore = _hasPredicted;
            S before = _predicted;
            _predicted = next;
            _hasPredicted = true;
            if (!hadBefore) return;
            Point a = _position(before);
            Point b = _position(next);
            double ex = a.X - b.X;
            double ey = a.Y - b.Y;
            double err = Math.Sqrt(ex * ex + ey * ey);
            if (err == 0) return;
            // A glide in progress moves with the prediction, so only the offset below shows the correction.
            if (_gliding) _glideFrom = new Point(_glideFrom.X - ex, _glideFrom.Y - ey);
            Corrections += 1;
            LastError = err;
            if (_smoothing == Smoothing.Snap || err > _snapDistance)
            {
                _offset = default(Point);
                return;
            }
            // Keep what is on screen where it is: the remaining offset plus this correction, decaying from now.
            Point cur = OffsetNow(nowMs);
            _offset = new Point(cur.X + ex, cur.Y + ey);
            _offsetAt = nowMs;
        }

        private Point OffsetNow(double nowMs)
        {
            double k = Math.Max(0, 1 - (nowMs - _offsetAt) / _easeMs);
            return new Point(_offset.X * k, _offset.Y * k);
        }

        /// <summary>Where to draw the controlled entity at <paramref name="nowMs"/>: the prediction (gliding) plus any easing offset; false before the first server state.</summary>
        public bool RenderPosition(double nowMs, out Point position)
        {
            if (!_hasPredicted)
            {
                position = default(Point);
                return false;
            }
            Point p = RawPosition(nowMs);
            Point o = OffsetNow(nowMs);
            position = new Point(p.X + o.X, p.Y + o.Y);
            return true;
        }

        /// <summary>
        /// Sends <paramref name="input"/> (encoded by <paramref name="encode"/>) on <paramref name="conn"/> and records
        /// it; returns its seq, or null when the connection is not open (nothing is predicted then).
        /// </summary>
        public uint? Send(ZoneConnection conn, I input, Func<I, byte[]> encode, double? nowMs = null)
        {
            uint? seq = conn.SendInput(encode(input));
            if (seq.HasValue) Record(seq.Value, input, nowMs);
            return seq;
        }

        /// <summary>
        /// Reconciles on every Delta of <paramref name="conn"/> from the controlled entity (converted by
        /// <paramref name="toState"/>), drops every input the host refuses, and resets on every Welcome (a
        /// reconnect). Dispose the result to detach.
        /// </summary>
        public IDisposable Attach(ZoneConnection conn, Func<MirrorEntity, Mirror, S> toState)
        {
            Action<Welcome, WelcomeInfo> onWelcome = (w, i) => Reset();
            Action<InputRefused> onRefused = r => Refuse(r.Seq);
            Action<Delta, DeltaInfo> onDelta = (d, info) =>
            {
                uint? id = conn.ControlledId;
                MirrorEntity e = id.HasValue ? info.Mirror.Get(id.Value) : null;
                Reconcile(d.Ack, e != null, e != null ? toState(e, info.Mirror) : default(S), info.RecvMs);
            };
            conn.Welcomed += onWelcome;
            conn.InputRefused += onRefused;
            conn.DeltaApplied += onDelta;
            return new Detacher(() =>
            {
                conn.Welcomed -= onWelcome;
                conn.InputRefused -= onRefused;
                conn.DeltaApplied -= onDelta;
            });
        }

        /// <summary>Clears everything (a reconnect or a new player): the next server state starts over.</summary>
        public void Reset()
        {
            _pending.Clear();
            _hasPredicted = false;
            _predicted = default(S);
            _hasBase = false;
            _base = default(S);
            _offset = default(Point);
            _gliding = false;
            _lastSeq = 0;
        }
    }
}
