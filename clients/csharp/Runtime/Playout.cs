// The playout point of a Replica: how far behind the newest data frames are drawn.
//
// Every Delta's arrival gives a = arrival − tick × msPerTick (client time minus the tick's place on the
// server's timeline: a constant clock offset plus that Delta's transit time). A frame drawn at client
// time now shows server time now − P; the sample after that moment has arrived when P ≥ a + patch
// interval. So the target P is a high quantile of the recent a values plus one patch interval plus a
// margin of the RFC 3550 jitter — measured, not assumed: on a WebSocket a lost packet holds every later
// message back until TCP retransmits it (head-of-line blocking), and those stalls, not the average
// jitter, are what the delay must cover.
//
// The delay (P above the fastest recent delivery) is clamped, and P moves at a bounded rate: drawn time
// runs at most GrowRate slower while the delay grows and ShrinkRate faster while it shrinks, so adapting
// never jumps or freezes the picture.
//
// A stall of the game is not network lateness: while the main thread is blocked (a long frame, a
// garbage collection, a scene load) neither frames nor Poll run, and the Deltas that arrived meanwhile
// are handled together when it ends, stamped as if the network had held them back. When nothing of the
// game ran for PageStallMs (no frame, no Delta), the Deltas handled in the PageBurstMs after it are not
// measured, and no frame in that burst counts a Delta as overdue.
//
// Everything is kept in preallocated arrays: advancing the playout allocates nothing.
using System;

namespace Zonekeep
{
    /// <summary>Tuning of a <see cref="Playout"/> (and of a <see cref="Replica"/>'s delay).</summary>
    public class PlayoutOptions
    {
        /// <summary>Smallest delay above the fastest recent delivery, ms (default 50).</summary>
        public double MinDelayMs = 50;
        /// <summary>Largest such delay, ms (default 500).</summary>
        public double MaxDelayMs = 500;
        /// <summary>Margin in multiples of the measured interarrival jitter (default 1).</summary>
        public double JitterFactor = 1;
        /// <summary>Quantile of recent arrival lateness the delay covers (default 0.99).</summary>
        public double Quantile = 0.99;
        /// <summary>How long an arrival counts, ms (default 10000).</summary>
        public double WindowMs = 10000;
        /// <summary>Arrivals kept at most (default 1024).</summary>
        public int MaxArrivals = 1024;
        /// <summary>Delay growth, ms of delay per ms of time (default 0.25: drawn time slows to 75%).</summary>
        public double GrowRate = 0.25;
        /// <summary>Delay shrink, ms of delay per ms of time (default 0.05: drawn time speeds up to 105%).</summary>
        public double ShrinkRate = 0.05;
        /// <summary>Delay growth while the next Delta is overdue beyond the current delay, ms per ms (default 0.5).</summary>
        public double StarveRate = 0.5;
        /// <summary>A gap with neither a frame nor a Delta longer than this, ms, is a stall of the game, not of the network (default 250).</summary>
        public double PageStallMs = 250;
        /// <summary>How long after such a stall Deltas are taken as handled late by the game, ms (default 50).</summary>
        public double PageBurstMs = 50;
    }

    /// <summary>Adaptive playout delay from measured Delta arrivals.</summary>
    public sealed class Playout
    {
        private readonly double _minDelayMs;
        private readonly double _maxDelayMs;
        private readonly double _jitterFactor;
        private readonly double _quantile;
        private readonly double _windowMs;
        private readonly int _maxArrivals;
        private readonly double _growRate;
        private readonly double _shrinkRate;
        private readonly double _starveRate;
        private readonly double _pageStallMs;
        private readonly double _pageBurstMs;

        // Arrivals in a ring (oldest at _head), and their lateness values kept sorted alongside.
        private readonly double[] _at;
        private readonly double[] _a;
        private readonly double[] _sorted;
        private int _head;
        private int _count;

        private bool _hasAlive;
        private double _aliveAt;
        private double _pageBurstUntil = double.NegativeInfinity;
        private bool _hasPoint;
        private double _point;
        private bool _hasLastAt;
        private double _lastAt;

        /// <summary>Deltas not measured because the game, not the network, held them back.</summary>
        public int PageHeldArrivals;

        /// <summary>A playout with no arrivals yet.</summary>
        public Playout(PlayoutOptions options = null)
        {
            PlayoutOptions o = options ?? new PlayoutOptions();
            _minDelayMs = Math.Max(0, o.MinDelayMs);
            _maxDelayMs = Math.Max(_minDelayMs, o.MaxDelayMs);
            _jitterFactor = o.JitterFactor;
            _quantile = Math.Min(1, Math.Max(0, o.Quantile));
            _windowMs = Math.Max(1, o.WindowMs);
            _maxArrivals = Math.Max(2, o.MaxArrivals);
            _growRate = Math.Max(0, o.GrowRate);
            _shrinkRate = Math.Max(0, o.ShrinkRate);
            _starveRate = Math.Max(_growRate, o.StarveRate);
            _pageStallMs = Math.Max(1, o.PageStallMs);
            _pageBurstMs = Math.Max(0, o.PageBurstMs);
            _at = new double[_maxArrivals];
            _a = new double[_maxArrivals];
            _sorted = new double[_maxArrivals];
        }

        /// <summary>Something of the game runs at <paramref name="nowMs"/>: after a gap longer than PageStallMs, a burst begins.</summary>
        private bool Alive(double nowMs)
        {
            if (_hasAlive && nowMs - _aliveAt > _pageStallMs) _pageBurstUntil = nowMs + _pageBurstMs;
            if (!_hasAlive || nowMs > _aliveAt)
            {
                _aliveAt = nowMs;
                _hasAlive = true;
            }
            return nowMs <= _pageBurstUntil;
        }

        /// <summary>Records the arrival at client time <paramref name="recvMs"/> of the Delta for <paramref name="tick"/>.</summary>
        public void Observe(long tick, double recvMs, double msPerTick)
        {
            if (!(msPerTick > 0) || double.IsNaN(recvMs) || double.IsInfinity(recvMs)) return;
            if (Alive(recvMs))
            {
                PageHeldArrivals += 1;
                return;
            }
            if (_count == _maxArrivals) DropOldest();
            double a = recvMs - tick * msPerTick;
            int slot = (_head + _count) % _maxArrivals;
            _at[slot] = recvMs;
            _a[slot] = a;
            _count += 1;
            InsertSorted(a);
        }

        /// <summary>Forgets every arrival and the playout point (a new zone or host: a new timeline).</summary>
        public void Reset()
        {
            _head = 0;
            _count = 0;
            _hasPoint = false;
            _hasLastAt = false;
            _hasAlive = false;
            _pageBurstUntil = double.NegativeInfinity;
        }

        private void DropOldest()
        {
            RemoveSorted(_a[_head]);
            _head = (_head + 1) % _maxArrivals;
            _count -= 1;
        }

        private void InsertSorted(double v)
        {
            // _count already includes v; the sorted part holds _count − 1 values.
            int n = _count - 1;
            int i = n;
            while (i > 0 && _sorted[i - 1] > v)
            {
                _sorted[i] = _sorted[i - 1];
                i--;
            }
            _sorted[i] = v;
        }

        private void RemoveSorted(double v)
        {
            int n = _count;
            int lo = 0;
            int hi = n - 1;
            int at = -1;
            while (lo <= hi)
            {
                int mid = (lo + hi) >> 1;
                if (_sorted[mid] < v) lo = mid + 1;
                else if (_sorted[mid] > v) hi = mid - 1;
                else
                {
                    at = mid;
                    break;
                }
            }
            if (at < 0) return;
            for (int i = at; i < n - 1; i++) _sorted[i] = _sorted[i + 1];
        }

        private void Expire(double nowMs)
        {
            // Keep at least two arrivals, so a long quiet spell does not forget the timeline.
            while (_count > 2 && nowMs - _at[_head] > _windowMs) DropOldest();
        }

        /// <summary>
        /// The playout point wanted now, given the patch interval and jitter; false before any arrival.
        /// <paramref name="overdue"/> is a lower bound of the lateness of a Delta that has not arrived yet.
        /// </summary>
        public bool TargetPoint(double patchMs, double jitterMs, double overdue, out double point)
        {
            point = 0;
            if (_count == 0) return false;
            double lo = _sorted[0];
            double hi = Math.Max(_sorted[Math.Min(_count - 1, (int)Math.Floor(_quantile * (_count - 1)))], overdue);
            double want = hi + patchMs + _jitterFactor * jitterMs;
            point = Math.Min(lo + _maxDelayMs, Math.Max(lo + _minDelayMs, want));
            return true;
        }

        /// <summary>
        /// Moves the playout point towards its target for a frame at <paramref name="nowMs"/> and returns it
        /// (client ms minus server-timeline ms: the frame shows server time <c>nowMs − point</c>), or false before
        /// any arrival. <paramref name="newestTick"/> is the newest Delta's tick (negative = none): while the next
        /// one is overdue, its lateness so far already counts, so drawn time slows before it runs out of data.
        /// </summary>
        public bool Advance(double nowMs, double patchMs, double jitterMs, long newestTick, double msPerTick, out double point)
        {
            Expire(nowMs);
            // Right after a game stall the Deltas it held may not be handled yet: not overdue by the network.
            bool burst = Alive(nowMs);
            double overdue = newestTick >= 0 && msPerTick > 0 && !burst
                ? nowMs - (newestTick + patchMs / msPerTick) * msPerTick
                : double.NegativeInfinity;
            double target;
            if (!TargetPoint(patchMs, jitterMs, overdue, out target))
            {
                point = _point;
                return _hasPoint;
            }
            double measured;
            bool starving = TargetPoint(patchMs, jitterMs, double.NegativeInfinity, out measured) && target > measured;
            if (!_hasPoint || !_hasLastAt)
            {
                // First frame: nothing is on screen yet, so start where we want to be.
                _point = target;
                _hasPoint = true;
            }
            else
            {
                double dt = Math.Min(100, Math.Max(0, nowMs - _lastAt));
                double step = target - _point;
                double grow = starving ? _starveRate : _growRate;
                _point += step > 0 ? Math.Min(step, grow * dt) : Math.Max(step, -_shrinkRate * dt);
            }
            _lastAt = nowMs;
            _hasLastAt = true;
            point = _point;
            return true;
        }

        /// <summary>The current delay above the fastest recent delivery, ms (the minimum before any arrival).</summary>
        public double DelayMs
        {
            get
            {
                if (_count == 0 || !_hasPoint) return _minDelayMs;
                return _point - _sorted[0];
            }
        }

        /// <summary>The delay the playout is moving towards, ms.</summary>
        public double TargetDelayMs(double patchMs, double jitterMs)
        {
            double target;
            if (_count == 0 || !TargetPoint(patchMs, jitterMs, double.NegativeInfinity, out target)) return _minDelayMs;
            return target - _sorted[0];
        }
    }
}
