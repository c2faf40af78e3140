// Server tick estimation. The client keeps an offset between its own clock and the server's tick
// timeline (serverMs = tick × 1000 / tick_hz), learned from two sources:
//
// - Pong round trips: a Pong for a Ping sent at s and received at r says the server was at tick around
//   s + rtt/2. Of the recent samples the one with the smallest RTT is trusted (its midpoint is the least
//   uncertain), which filters out queueing delay.
// - Delta arrivals: a Delta for tick t cannot arrive before the server reached t, so t·msPerTick − arrival
//   is a lower bound of the offset; it seeds the estimate before the first Pong and corrects it if the
//   round-trip estimate falls below the bound. The spread of arrival times against tick times gives the
//   interarrival jitter (RFC 3550 style) that sizes the interpolation delay.
//
// Times are client milliseconds from an injectable clock; nothing here reads a clock itself.
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>Tuning of a <see cref="ServerClock"/>.</summary>
    public sealed class ClockOptions
    {
        /// <summary>Pong samples kept for the min-RTT filter (default 16, about 16 s at one Ping per second).</summary>
        public int Window = 16;
        /// <summary>Delta arrivals kept for the lower bound (default 64).</summary>
        public int DeltaWindow = 64;
        /// <summary>Offset corrections larger than this (ms) are applied at once; smaller ones are eased (default 100).</summary>
        public double SnapMs = 100;
    }

    /// <summary>Estimates the server's current tick, RTT and jitter.</summary>
    public sealed class ServerClock
    {
        private struct PongSample
        {
            public double Rtt;
            public double Offset;
        }

        private double _tickHz;
        private double _msPerTick;
        private readonly int _window;
        private readonly int _deltaWindow;
        private readonly double _snapMs;
        private readonly List<PongSample> _pongs = new List<PongSample>();
        private readonly List<double> _deltaBounds = new List<double>();
        private double? _offset;
        private bool _hasLastDelta;
        private long _lastDeltaTick;
        private double _lastDeltaAt;
        private double? _srtt;
        private double _rttvar;
        private double _arrivalJitter;
        private double? _arrivalLag;

        /// <summary>Pong samples received since the last reset.</summary>
        public int PongCount;

        /// <summary>A clock with no estimate yet.</summary>
        public ServerClock(ClockOptions options = null)
        {
            ClockOptions o = options ?? new ClockOptions();
            _window = Math.Max(1, o.Window);
            _deltaWindow = Math.Max(1, o.DeltaWindow);
            _snapMs = o.SnapMs;
        }

        /// <summary>
        /// Starts over for a zone running at <paramref name="tickHz"/> (called on Welcome). The Welcome's tick
        /// seeds the estimate as a lower bound, like a Delta arrival. RTT and jitter are kept: the path is the same.
        /// </summary>
        public void Reset(double tickHz, long tick, double nowMs)
        {
            _tickHz = tickHz;
            _msPerTick = 1000 / tickHz;
            _pongs.Clear();
            _deltaBounds.Clear();
            _offset = null;
            _hasLastDelta = false;
            _arrivalLag = null;
            PongCount = 0;
            AddBound(tick * _msPerTick - nowMs);
        }

        /// <summary>Ticks per second of the zone (0 before the first <see cref="Reset"/>).</summary>
        public double Hz { get { return _tickHz; } }

        /// <summary>True once a Pong has been measured.</summary>
        public bool Synced { get { return PongCount > 0; } }

        /// <summary>Smoothed round-trip time in ms (0 before the first Pong).</summary>
        public double RttMs { get { return _srtt ?? 0; } }

        /// <summary>Mean deviation of the RTT in ms.</summary>
        public double RttVarMs { get { return _rttvar; } }

        /// <summary>Interarrival jitter of Deltas in ms (how irregularly patches arrive).</summary>
        public double JitterMs { get { return _arrivalJitter; } }

        /// <summary>Current estimate of <c>serverMs − clientMs</c> (null before any sample).</summary>
        public double? OffsetMs { get { return _offset; } }

        /// <summary>Records the answer to a Ping sent at <paramref name="sentMs"/> and received at <paramref name="recvMs"/>.</summary>
        public void OnPong(double sentMs, double recvMs, long tick)
        {
            if (_tickHz == 0 || !(recvMs >= sentMs)) return;
            double rtt = recvMs - sentMs;
            // The Pong's tick is an integer: the server was somewhere inside it, so take its middle.
            double offset = (tick + 0.5) * _msPerTick - (sentMs + rtt / 2);
            _pongs.Add(new PongSample { Rtt = rtt, Offset = offset });
            if (_pongs.Count > _window) _pongs.RemoveAt(0);
            PongCount += 1;
            if (!_srtt.HasValue)
            {
                _srtt = rtt;
                _rttvar = rtt / 2;
            }
            else
            {
                // RFC 6298 smoothing.
                _rttvar += (Math.Abs(_srtt.Value - rtt) - _rttvar) / 4;
                _srtt = _srtt.Value + (rtt - _srtt.Value) / 8;
            }
            Update();
        }

        /// <summary>Records the arrival of the Delta for <paramref name="tick"/> at <paramref name="recvMs"/>.</summary>
        public void OnDelta(long tick, double recvMs)
        {
            if (_tickHz == 0) return;
            if (_hasLastDelta && tick > _lastDeltaTick)
            {
                double d = recvMs - _lastDeltaAt - (tick - _lastDeltaTick) * _msPerTick;
                _arrivalJitter += (Math.Abs(d) - _arrivalJitter) / 16;
            }
            if (!_hasLastDelta || tick >= _lastDeltaTick)
            {
                _hasLastDelta = true;
                _lastDeltaTick = tick;
                _lastDeltaAt = recvMs;
            }
            AddBound(tick * _msPerTick - recvMs);
            if (_offset.HasValue)
            {
                // How old a Delta is when it arrives, by our own estimate of server time (one-way latency plus
                // estimation error): data for "now" is always this far behind, so interpolation must be too.
                double lag = Math.Max(0, recvMs + _offset.Value - tick * _msPerTick);
                _arrivalLag = !_arrivalLag.HasValue ? lag : _arrivalLag.Value + (lag - _arrivalLag.Value) / 8;
            }
        }

        /// <summary>Smoothed age of Deltas on arrival in ms (server time of arrival minus the Delta's tick time).</summary>
        public double DeltaLagMs { get { return _arrivalLag ?? (_srtt ?? 0) / 2; } }

        private void AddBound(double bound)
        {
            _deltaBounds.Add(bound);
            if (_deltaBounds.Count > _deltaWindow) _deltaBounds.RemoveAt(0);
            Update();
        }

        private void Update()
        {
            double? bound = null;
            for (int i = 0; i < _deltaBounds.Count; i++)
            {
                if (!bound.HasValue || _deltaBounds[i] > bound.Value) bound = _deltaBounds[i];
            }
            double? target = null;
            bool haveBest = false;
            PongSample best = default(PongSample);
            for (int i = 0; i < _pongs.Count; i++)
            {
                if (!haveBest || _pongs[i].Rtt < best.Rtt)
                {
                    best = _pongs[i];
                    haveBest = true;
                }
            }
            if (haveBest) target = best.Offset;
            else if (bound.HasValue) target = bound.Value + (_srtt ?? 0) / 2;
            if (target.HasValue && bound.HasValue && target.Value < bound.Value) target = bound;
            if (!target.HasValue) return;
            if (!_offset.HasValue || Math.Abs(target.Value - _offset.Value) > _snapMs) _offset = target;
            else _offset = _offset.Value + (target.Value - _offset.Value) / 4;
        }

        /// <summary>Estimated server tick (fractional) at client time <paramref name="nowMs"/>; NaN before any sample.</summary>
        public double ServerTick(double nowMs)
        {
            if (!_offset.HasValue || _tickHz == 0) return double.NaN;
            return ((nowMs + _offset.Value) * _tickHz) / 1000;
        }

        /// <summary>Milliseconds of server time for <paramref name="ticks"/> ticks.</summary>
        public double TicksToMs(double ticks) { return ticks * _msPerTick; }
    }
}
