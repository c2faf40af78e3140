// Time and timers behind an interface, so that a connection can be driven by a manual clock in tests (no
// sleeps) and by the game loop in a game: GameLoopScheduler's timers fire inside ZoneConnection.Poll(), on
// the thread that polls, never on a background thread.
using System;
using System.Collections.Generic;
using System.Diagnostics;

namespace Zonekeep
{
    /// <summary>A clock plus one-shot timers.</summary>
    public interface IScheduler
    {
        /// <summary>Monotonic milliseconds.</summary>
        double Now();
        /// <summary>Runs <paramref name="fn"/> after <paramref name="ms"/> milliseconds; returns a handle.</summary>
        long SetTimeout(Action fn, double ms);
        /// <summary>Cancels a timer (unknown or fired handles are ignored).</summary>
        void ClearTimeout(long handle);
    }

    /// <summary>A scheduler whose due timers are run by whoever polls it (<see cref="ZoneConnection.Poll"/>).</summary>
    public interface IPolledScheduler : IScheduler
    {
        /// <summary>Runs every timer due by now, in time order.</summary>
        void RunDue();
    }

    /// <summary>Timers kept in time order (ties in the order they were set).</summary>
    public abstract class TimerQueue
    {
        private struct Entry
        {
            public double At;
            public long Id;
            public Action Fn;
        }

        private readonly List<Entry> _timers = new List<Entry>();
        private long _nextId = 1;

        /// <summary>Monotonic milliseconds.</summary>
        public abstract double Now();

        /// <summary>Schedules <paramref name="fn"/> at <c>Now() + ms</c>.</summary>
        public long SetTimeout(Action fn, double ms)
        {
            long id = _nextId++;
            Entry e = new Entry { At = Now() + Math.Max(0, ms), Id = id, Fn = fn };
            // Insert after every entry due at or before it: ties keep the order they were set in.
            int i = _timers.Count;
            while (i > 0 && _timers[i - 1].At > e.At) i--;
            _timers.Insert(i, e);
            return id;
        }

        /// <summary>Cancels a timer.</summary>
        public void ClearTimeout(long handle)
        {
            for (int i = 0; i < _timers.Count; i++)
            {
                if (_timers[i].Id == handle)
                {
                    _timers.RemoveAt(i);
                    return;
                }
            }
        }

        /// <summary>Number of timers not yet fired.</summary>
        public int Pending { get { return _timers.Count; } }

        /// <summary>Takes the earliest timer due at or before <paramref name="end"/>, if any.</summary>
        protected bool TakeDue(double end, out double at, out Action fn)
        {
            if (_timers.Count > 0 && _timers[0].At <= end)
            {
                Entry e = _timers[0];
                _timers.RemoveAt(0);
                at = e.At;
                fn = e.Fn;
                return true;
            }
            at = 0;
            fn = null;
            return false;
        }
    }

    /// <summary>
    /// A manual scheduler: time only moves when <see cref="Advance"/> is called, and due timers fire in time
    /// order (ties in the order they were set). Used by the SDK's tests and useful for games'.
    /// </summary>
    public sealed class ManualScheduler : TimerQueue, IScheduler
    {
        private double _t;

        /// <summary>A scheduler whose clock starts at <paramref name="startMs"/>.</summary>
        public ManualScheduler(double startMs = 0) { _t = startMs; }

        /// <summary>Current manual time.</summary>
        public override double Now() { return _t; }

        /// <summary>Moves time forward by <paramref name="ms"/>, firing every timer that falls due (including ones set meanwhile).</summary>
        public void Advance(double ms)
        {
            double end = _t + ms;
            double at;
            Action fn;
            while (TakeDue(end, out at, out fn))
            {
                _t = Math.Max(_t, at);
                fn();
            }
            _t = end;
        }
    }

    /// <summary>
    /// The game's scheduler: a monotonic <see cref="Stopwatch"/> clock, and timers that fire when
    /// <see cref="RunDue"/> is called (ZoneConnection.Poll calls it). Use it from one thread, the game's.
    /// </summary>
    public sealed class GameLoopScheduler : TimerQueue, IPolledScheduler
    {
        private readonly Stopwatch _watch = Stopwatch.StartNew();

        /// <summary>Milliseconds since the scheduler was made.</summary>
        public override double Now() { return _watch.Elapsed.TotalMilliseconds; }

        /// <summary>Runs every timer due by now (and those that fall due while they run), in time order.</summary>
        public void RunDue()
        {
            double at;
            Action fn;
            // Bounded: a timer that keeps setting itself due at once cannot hold the game's frame forever.
            for (int n = 0; n < 10000 && TakeDue(Now(), out at, out fn); n++) fn();
        }
    }
}
