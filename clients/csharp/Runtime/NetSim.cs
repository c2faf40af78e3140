// Client-side network simulation: latency, jitter and loss, as a WebSocket over TCP feels them.
//
// A WebSocket never loses or reorders a message: TCP retransmits. So loss shows up as a retransmission
// delay on the lost message and on every message behind it (head-of-line blocking). The model: each
// message is delivered delay ± jitter after it was sent; with probability loss its first transmission is
// lost and it arrives one retransmission timeout later (doubling per consecutive loss, as TCP backs off);
// delivery times never decrease (in-order stream).
//
// NetSim is pure and seeded: Schedule maps a send time to a delivery time. NetSimSocket applies one
// instance to outgoing and one to incoming messages of any ISocket, timed by the connection's scheduler,
// so a test (or a developer trying a bad network) sees exactly what a lossy link does to the game.
using System;

namespace Zonekeep
{
    /// <summary>Network simulation settings.</summary>
    public sealed class NetSimConfig
    {
        /// <summary>One-way latency added to every message, ms.</summary>
        public double DelayMs;
        /// <summary>Maximum deviation from DelayMs, uniformly distributed in [−jitter, +jitter], ms.</summary>
        public double JitterMs;
        /// <summary>Probability (0..=1) that a transmission is lost and must be retransmitted.</summary>
        public double Loss;
        /// <summary>The first retransmission timeout, ms; null = TCP's usual max(200 ms, 2 × delay).</summary>
        public double? RtoMs;
        /// <summary>Seed of the simulation's random numbers (runs are reproducible).</summary>
        public ulong Seed = 0x5eed;

        /// <summary>Whether the simulation changes nothing.</summary>
        public bool IsOff { get { return DelayMs <= 0 && JitterMs <= 0 && Loss <= 0; } }
    }

    /// <summary>What a <see cref="NetSim"/> did.</summary>
    public struct NetSimStats
    {
        /// <summary>Messages scheduled.</summary>
        public long Messages;
        /// <summary>Simulated retransmissions (lost transmissions).</summary>
        public long Retransmissions;
        /// <summary>Messages held back behind an earlier, later-arriving one (head-of-line blocking).</summary>
        public long HeadOfLineWaits;
    }

    /// <summary>One direction of a simulated link.</summary>
    public sealed class NetSim
    {
        // Retransmissions simulated per message at most; past that the message goes through.
        private const int MaxRetransmissions = 8;
        private readonly NetSimConfig _cfg;
        private ulong _s0, _s1, _s2, _s3;
        private double _lastDelivery = double.NegativeInfinity;
        private NetSimStats _stats;

        /// <summary>A link with the given settings.</summary>
        public NetSim(NetSimConfig cfg)
        {
            _cfg = cfg ?? new NetSimConfig();
            // xoshiro256++ seeded through SplitMix64, as rand_xoshiro's seed_from_u64.
            ulong sm = _cfg.Seed;
            _s0 = SplitMix(ref sm);
            _s1 = SplitMix(ref sm);
            _s2 = SplitMix(ref sm);
            _s3 = SplitMix(ref sm);
        }

        private static ulong SplitMix(ref ulong state)
        {
            unchecked
            {
                state += 0x9e3779b97f4a7c15UL;
                ulong z = state;
                z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
                z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
                return z ^ (z >> 31);
            }
        }

        private static ulong Rotl(ulong x, int k) { return (x << k) | (x >> (64 - k)); }

        private ulong NextU64()
        {
            unchecked
            {
                ulong result = Rotl(_s0 + _s3, 23) + _s0;
                ulong t = _s1 << 17;
                _s2 ^= _s0;
                _s3 ^= _s1;
                _s1 ^= _s2;
                _s0 ^= _s3;
                _s2 ^= t;
                _s3 = Rotl(_s3, 45);
                return result;
            }
        }

        /// <summary>Uniform in [0, 1).</summary>
        public double Unit() { return (NextU64() >> 11) / (double)(1UL << 53); }

        /// <summary>The settings.</summary>
        public NetSimConfig Config { get { return _cfg; } }

        /// <summary>What the simulation did so far.</summary>
        public NetSimStats Stats { get { return _stats; } }

        private double Rto { get { return _cfg.RtoMs ?? Math.Max(200, 2 * _cfg.DelayMs); } }

        /// <summary>The delivery time (ms) of a message sent at <paramref name="sentMs"/>. Calls must come in send order.</summary>
        public double Schedule(double sentMs)
        {
            _stats.Messages += 1;
            double transit = _cfg.DelayMs;
            if (_cfg.JitterMs > 0) transit += (Unit() * 2 - 1) * _cfg.JitterMs;
            transit = Math.Max(0, transit);
            if (_cfg.Loss > 0)
            {
                double rto = Rto;
                for (int tries = 0; tries < MaxRetransmissions && Unit() < _cfg.Loss; tries++)
                {
                    transit += rto;
                    rto *= 2;
                    _stats.Retransmissions += 1;
                }
            }
            double at = sentMs + transit;
            if (at < _lastDelivery)
            {
                at = _lastDelivery;
                _stats.HeadOfLineWaits += 1;
            }
            _lastDelivery = at;
            return at;
        }
    }

    /// <summary>
    /// An <see cref="ISocket"/> seen through a simulated link: every message (and the open and close) in either
    /// direction is delayed as <see cref="NetSim"/> schedules it, on the given scheduler's timers. Wrap the
    /// socket factory of a connection: <c>Socket = url =&gt; new NetSimSocket(WebSocketTransport.Connect(url), up, down, scheduler)</c>.
    /// </summary>
    public sealed class NetSimSocket : ISocket
    {
        private readonly ISocket _inner;
        private readonly NetSim _up;
        private readonly NetSim _down;
        private readonly IScheduler _sched;
        private bool _closed;

        /// <inheritdoc/>
        public Action OnOpen { get; set; }
        /// <inheritdoc/>
        public Action<byte[], bool> OnMessage { get; set; }
        /// <inheritdoc/>
        public Action<int, string> OnClose { get; set; }

        /// <summary>Wraps <paramref name="inner"/>: <paramref name="up"/> delays what the client sends, <paramref name="down"/> what it receives.</summary>
        public NetSimSocket(ISocket inner, NetSim up, NetSim down, IScheduler scheduler)
        {
            _inner = inner;
            _up = up;
            _down = down;
            _sched = scheduler;
            inner.OnOpen = () => Later(_down, () => { if (OnOpen != null) OnOpen(); });
            inner.OnMessage = (data, text) => Later(_down, () => { if (!_closed && OnMessage != null) OnMessage(data, text); });
            inner.OnClose = (code, reason) => Later(_down, () =>
            {
                _closed = true;
                if (OnClose != null) OnClose(code, reason);
            });
        }

        private void Later(NetSim sim, Action fn)
        {
            double now = _sched.Now();
            _sched.SetTimeout(fn, sim.Schedule(now) - now);
        }

        /// <inheritdoc/>
        public void Send(byte[] data) { Later(_up, () => _inner.Send(data)); }

        /// <inheritdoc/>
        public void Close(int code, string reason) { Later(_up, () => _inner.Close(code, reason)); }

        /// <inheritdoc/>
        public void Pump() { _inner.Pump(); }
    }
}
