// A port of clients/js/test/replica.test.ts (the replica over a fake zone server on a manual clock, the
// smoothness under loss with the same seed and the same figures), plus the check that a frame allocates
// nothing.
using System;
using System.Collections.Generic;
using System.Linq;

namespace Zonekeep.Tests
{
    public static class ReplicaTests
    {
        static readonly double Step = 0.01f;

        static ZoneConnection Connect(ManualScheduler sched, FakeServer server)
        {
            return new ZoneConnection(new ZoneConnectionOptions
            {
                Url = "ws://t",
                Ticket = () => System.Threading.Tasks.Task.FromResult("t"),
                Socket = server.Factory,
                Scheduler = sched,
            });
        }

        static FieldValue[] Fields(long hp, string name) { return new[] { FieldValue.Int(hp), FieldValue.Str(name) }; }

        [Test]
        public static void InterpolatesBetweenSamplesWithExactSpawnDespawnAndFieldTicks()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched, () => 50) { PatchEvery = 2 };
            var conn = Connect(sched, server);
            var replica = new Replica(conn.Clock, new ReplicaOptions { MinDelayMs = 40, MaxDelayMs = 300 });
            replica.Attach(conn);
            long start = (long)Math.Floor((server.ServerMs() * server.TickHz) / 1000);
            long S = start + 60, H = start + 70, D = start + 90;
            server.Entities[500] = new FakeEntity { Kind = 0, Qx = (int)(6 * start), Qy = (int)(-3 * start), Fields = Fields(100, "mover") };
            server.Run(tick =>
            {
                FakeEntity e;
                if (server.Entities.TryGetValue(500, out e))
                {
                    e.Qx = (int)(6 * tick);
                    e.Qy = (int)(-3 * tick);
                    if (tick == H) e.Fields[0] = FieldValue.Int(50);
                }
                if (tick == S) server.Entities[600] = new FakeEntity { Kind = 0, Qx = 1, Qy = 2, Fields = Fields(10, "blink") };
                if (tick == D) server.Entities.Remove(600);
            });
            conn.Connect();
            var frames = new List<ReplicaFrame>();
            for (int t = 0; t < 5000; t += 16)
            {
                sched.Advance(16);
                frames.Add(replica.Frame(sched.Now()).Clone());
            }
            var late = frames.Where(f => f.RenderTick > start + 20).ToList();
            Check.True(late.Count > 200, "frames after warm-up: " + late.Count);
            foreach (var f in late)
            {
                ReplicaEntity e;
                Check.True(f.TryGet(500, out e), "entity 500 visible at " + f.RenderTick);
                // Linear motion: interpolation between patch samples is exact.
                Check.True(Math.Abs(e.X - 6 * f.RenderTick * Step) < 1e-6, "x at " + f.RenderTick + ": " + e.X);
                Check.True(Math.Abs(e.Y + 3 * f.RenderTick * Step) < 1e-6, "y at " + f.RenderTick + ": " + e.Y);
                Check.Equal(f.RenderTick >= H ? 50L : 100L, e.Fields[0].AsLong, "hp at " + f.RenderTick);
                Check.Equal(f.RenderTick >= S && f.RenderTick < D, f.Contains(600), "600 at " + f.RenderTick);
                Check.True(f.DelayMs >= 40 && f.DelayMs <= 300, "delay within bounds");
            }
            int enteredAt = frames.FindIndex(f => f.HasEntered(600));
            int leftAt = frames.FindIndex(f => f.HasLeft(600));
            Check.True(enteredAt > 0 && leftAt > enteredAt, "600 entered, then left");
            Check.True(frames[enteredAt].RenderTick >= S && frames[enteredAt - 1].RenderTick < S, "entered at its tick");
            Check.True(frames[leftAt].RenderTick >= D && frames[leftAt - 1].RenderTick < D, "left at its tick");
            Check.Equal(1, frames.Count(f => f.HasEntered(600)), "entered once");
            Check.Equal(1, frames.Count(f => f.HasLeft(600)), "left once");
            // Render time never runs backwards.
            for (int i = 1; i < frames.Count; i++)
                Check.True(frames[i].RenderTick >= frames[i - 1].RenderTick || double.IsNaN(frames[i - 1].RenderTick), "render time runs forward");
            // Inputs carry the replica's render tick.
            Check.Equal((uint?)1, conn.SendInput(new byte[] { 0 }), "first seq");
            sched.Advance(60);
            var input = server.Last.Received.OfType<InputMessage>().First();
            Check.Equal((long)Math.Floor(frames[frames.Count - 1].RenderTick), input.ViewTick, "view tick");
            conn.Close();
        }

        static double DelayAfter(double jitter, double maxDelayMs = 250)
        {
            var sched = new ManualScheduler(1000);
            int i = 0;
            // Every 4th message is held up by `jitter` ms (the ones behind it queue up, as on TCP).
            var server = new FakeServer(sched, () => 30 + (i++ % 4 == 0 ? jitter : 0));
            server.Run();
            var conn = Connect(sched, server);
            var replica = new Replica(conn.Clock, new ReplicaOptions { MinDelayMs = 50, MaxDelayMs = maxDelayMs });
            replica.Attach(conn);
            conn.Connect();
            for (int t = 0; t < 4000; t += 16)
            {
                sched.Advance(16);
                replica.Frame(sched.Now());
            }
            conn.Close();
            return replica.DelayMs;
        }

        [Test]
        public static void AdaptsTheDelayToMeasuredJitterWithinBounds()
        {
            double calm = DelayAfter(0);
            double jittery = DelayAfter(40);
            double wild = DelayAfter(400, 100);
            Check.True(calm >= 50 && calm < 60, "calm delay " + calm);
            Check.True(jittery > calm + 20, "jittery delay " + jittery + " vs calm " + calm);
            Check.Equal(100.0, wild, "clamped to max");
        }

        [Test]
        public static void SpreadsAMoveOneDeltaReportsForSeveralTicksOverAllOfThem()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched, () => 30);
            server.Entities[500] = new FakeEntity { Kind = 0, Fields = Fields(100, "runner") };
            server.Run(tick => server.Entities[500].Qx = (int)(6 * tick));
            long start = server.Tick;
            // Every 10th stretch of 4 ticks goes without a Delta.
            server.SkipPatch = tick => tick > start + 20 && tick % 10 < 4;
            var conn = Connect(sched, server);
            var replica = new Replica(conn.Clock, new ReplicaOptions { MinDelayMs = 200 });
            replica.Attach(conn);
            conn.Connect();
            int checkedFrames = 0;
            for (int t = 0; t < 4000; t += 16)
            {
                sched.Advance(16);
                var f = replica.Frame(sched.Now());
                ReplicaEntity e;
                if (!f.TryGet(500, out e) || f.RenderTick < start + 30) continue;
                Check.True(Math.Abs(e.X - 6 * f.RenderTick * Step) < 1e-6, "x at " + f.RenderTick + ": " + e.X);
                checkedFrames += 1;
            }
            conn.Close();
            Check.True(checkedFrames > 100, "frames checked: " + checkedFrames);
        }

        /// <summary>
        /// A zone whose entity 500 runs back and forth (6 quanta per tick, turning every 30 ticks), seen through a
        /// link with 150 ms ± 10 ms one-way latency where 2 % of messages are lost and retransmitted 300 ms later,
        /// holding back every message behind them (TCP head-of-line blocking). Same seed and shape as the
        /// TypeScript test, so the same figures.
        /// </summary>
        static Replica LossyRun(int seconds, Action<ReplicaFrame, double, Func<double, double>> onFrame)
        {
            var sched = new ManualScheduler(1000);
            var r = Rng.Mulberry32(7);
            var server = new FakeServer(sched, () => 150 + r() * 10 + (r() < 0.02 ? 300 : 0));
            Func<long, int> truthQ = tick =>
            {
                long phase = ((tick % 60) + 60) % 60;
                return (int)(6 * (phase < 30 ? phase : 60 - phase));
            };
            server.Entities[500] = new FakeEntity { Kind = 0, Fields = Fields(100, "runner") };
            server.Run(tick => server.Entities[500].Qx = truthQ(tick));
            var conn = Connect(sched, server);
            var replica = new Replica(conn.Clock);
            replica.Attach(conn);
            conn.Connect();
            // Truth between ticks is the straight line between them, as the zone's positions are per tick.
            Func<double, double> truth = tick =>
            {
                long t0 = (long)Math.Floor(tick);
                return (truthQ(t0) + (truthQ(t0 + 1) - truthQ(t0)) * (tick - t0)) * Step;
            };
            for (int t = 0; t < seconds * 1000; t += 16)
            {
                sched.Advance(16);
                onFrame(replica.Frame(sched.Now()), sched.Now(), truth);
            }
            conn.Close();
            return replica;
        }

        [Test]
        public static void UnderLossAdaptsToHeadOfLineStallsWithoutFreezesOrJumps()
        {
            const double WarmupMs = 10000;
            double twoTicks = 2 * 6 * Step;
            double? startedAt = null;
            bool hasLast = false;
            double lastX = 0, lastAt = 0;
            double? stillSince = null;
            double longestFreeze = 0, largestStep = 0, delayAfterWarmup = 0;
            var errors = new List<double>();
            Replica replica = LossyRun(40, (f, now, truth) =>
            {
                if (!startedAt.HasValue) startedAt = now;
                ReplicaEntity e;
                if (!f.TryGet(500, out e) || now - startedAt.Value < WarmupMs) return;
                delayAfterWarmup = Math.Max(delayAfterWarmup, f.DelayMs);
                errors.Add(Math.Abs(e.X - truth(f.RenderTick)));
                if (hasLast)
                {
                    double step = Math.Abs(e.X - lastX);
                    largestStep = Math.Max(largestStep, step);
                    if (step < 1e-9)
                    {
                        if (!stillSince.HasValue) stillSince = lastAt;
                        longestFreeze = Math.Max(longestFreeze, now - stillSince.Value);
                    }
                    else stillSince = null;
                }
                hasLast = true;
                lastX = e.X;
                lastAt = now;
            });
            errors.Sort();
            double p99 = errors.Count > 0 ? errors[(int)Math.Floor(0.99 * (errors.Count - 1))] : double.NaN;
            var inv = System.Globalization.CultureInfo.InvariantCulture;
            Console.WriteLine("  lossy link: delay " + replica.DelayMs.ToString("F0", inv) + " ms, longest freeze " + longestFreeze.ToString(inv) +
                " ms, largest frame step " + largestStep.ToString("F3", inv) + " (bound " + twoTicks.ToString("F3", inv) + "), p99 position error " +
                p99.ToString("F3", inv) + " units, " + replica.ExtrapolatedFrames + " frames extrapolated");
            Check.True(errors.Count > 1000, "the runner was drawn through the measured run");
            Check.True(delayAfterWarmup > 200, "the delay grew to cover the 300 ms stalls (" + delayAfterWarmup + " ms)");
            Check.True(delayAfterWarmup <= 500, "and stayed within the maximum");
            Check.True(longestFreeze <= 100, "froze for " + longestFreeze + " ms");
            Check.True(largestStep <= twoTicks, "jumped " + largestStep + " units in one frame");
        }

        [Test]
        public static void ExtrapolatesABoundedAmountPastLateDataAndBlendsTheCorrection()
        {
            var sched = new ManualScheduler(1000);
            // Calm for 5 s (the delay settles at its minimum), then one stall of 400 ms.
            double stallAt = double.PositiveInfinity;
            var server = new FakeServer(sched, () => sched.Now() >= stallAt && sched.Now() < stallAt + 40 ? 400 : 30);
            server.Entities[500] = new FakeEntity { Kind = 0, Fields = Fields(100, "runner") };
            long turnTick = long.MaxValue;
            // Runs right at 6 quanta per tick; turns back at turnTick, during the stall.
            server.Run(tick => server.Entities[500].Qx += tick < turnTick ? 6 : -6);
            var conn = Connect(sched, server);
            var replica = new Replica(conn.Clock, new ReplicaOptions { MaxExtrapolationMs = 100, BlendMs = 100 });
            replica.Attach(conn);
            conn.Connect();
            var xs = new List<double>();
            double maxAhead = 0;
            for (int t = 0; t < 8000; t += 16)
            {
                if (t == 5008)
                {
                    stallAt = sched.Now();
                    turnTick = server.Tick + 3;
                }
                sched.Advance(16);
                var f = replica.Frame(sched.Now());
                maxAhead = Math.Max(maxAhead, f.ExtrapolatedTicks);
                ReplicaEntity e;
                if (f.TryGet(500, out e) && t >= 4000) xs.Add(e.X);
            }
            conn.Close();
            Check.True(replica.ExtrapolatedFrames > 0, "the stall was bridged by extrapolating");
            Check.True(maxAhead > 0 && maxAhead <= 3 + 1e-9, "extrapolated at most 100 ms = 3 ticks (" + maxAhead + ")");
            double largest = 0;
            for (int i = 1; i < xs.Count; i++) largest = Math.Max(largest, Math.Abs(xs[i] - xs[i - 1]));
            // The guess ran on while the entity had turned back: the correction is spread, never jumped.
            Check.True(largest <= 2 * 6 * Step, "largest frame step " + largest);
            Check.True(replica.DelayMs > 50, "the stall raised the delay");
        }

        const double Hz = 30;
        const double MsPerTick = 1000 / Hz;
        const double TransitMs = 50;
        const double FrameMs = 16;

        /// <summary>
        /// One Delta per tick, each TransitMs in transit, and one frame every FrameMs, for 5 s; then a stall of the
        /// game (nothing runs for 500 ms, then the Deltas that came meanwhile are handled together) or of the
        /// network (frames go on while the Deltas are held back for 500 ms); then regular arrival again.
        /// </summary>
        static void StallRun(bool page, out double steady, out Func<double, double> after)
        {
            // A clock that only says the tick rate: the jitter margin is not what is tested here.
            var clock = new ServerClock();
            clock.Reset(Hz, 0, 0);
            var replica = new Replica(clock);
            var mirror = new Mirror(FakeServer.TestSchema);
            double now = 1000;
            long nextTick = 1;
            var delays = new List<KeyValuePair<double, double>>();
            Action<double, double?> deliver = (until, handledAt) =>
            {
                while (nextTick * MsPerTick + TransitMs <= until)
                {
                    double arrival = nextTick * MsPerTick + TransitMs;
                    replica.OnDelta(new Delta { Tick = nextTick }, mirror, handledAt ?? arrival);
                    nextTick += 1;
                }
            };
            Action<double, double?> frames = (ms, heldUntil) =>
            {
                for (double end = now + ms; now < end;)
                {
                    now += FrameMs;
                    if (!heldUntil.HasValue || now >= heldUntil.Value)
                        deliver(now, heldUntil.HasValue && now - FrameMs < heldUntil.Value ? now : (double?)null);
                    delays.Add(new KeyValuePair<double, double>(now, replica.Frame(now).DelayMs));
                }
            };
            frames(5000, null);
            steady = replica.DelayMs;
            double stallStart = now;
            if (page)
            {
                // Nothing of the game runs; then every Delta that came meanwhile is handled at once.
                now += 500;
                deliver(now, now);
                delays.Add(new KeyValuePair<double, double>(now, replica.Frame(now).DelayMs));
            }
            else frames(500, now + 500);
            frames(4000, null);
            after = ms =>
            {
                double at = stallStart + 500 + ms;
                foreach (var d in delays) if (d.Key >= at) return d.Value;
                return double.NaN;
            };
        }

        [Test]
        public static void AfterAGameStallComesBackNearItsSteadyDelayWithinTwoSeconds()
        {
            double steady;
            Func<double, double> after;
            StallRun(true, out steady, out after);
            Check.True(steady < 150, "steady delay " + steady + " ms");
            Check.True(after(2000) <= steady + 20, "2 s after a game stall the delay is " + after(2000) + " ms (steady " + steady + " ms)");
        }

        [Test]
        public static void StillRisesWhenTheNetworkHeldTheDeltasBack()
        {
            double steady;
            Func<double, double> after;
            StallRun(false, out steady, out after);
            Check.True(after(2000) >= steady + 200, "2 s after a network stall the delay is " + after(2000) + " ms (steady " + steady + " ms)");
        }

        /// <summary>
        /// The hot path allocates nothing: 20,000 frames of a world of 50 moving entities (interpolating,
        /// extrapolating past late data, entering and leaving), with a Delta every other frame and a held-back second now and then, measured with
        /// GC.GetAllocatedBytesForCurrentThread around the replica's own calls only.
        /// </summary>
        [Test]
        public static void FrameAndOnDeltaAllocateNothingInSteadyState()
        {
            var clock = new ServerClock();
            clock.Reset(30, 0, 0);
            var replica = new Replica(clock);
            var schema = FakeServer.TestSchema;
            replica.SetZone(schema, 1);
            var mirror = new Mirror(schema);
            // The Deltas are built and applied to the mirror outside the measured calls (decoding allocates
            // what it decodes; the replica must not add to it).
            Func<long, Delta> world = tick =>
            {
                var d = new Delta { Tick = tick, Baseline = tick == 1 };
                for (uint id = 1; id <= 50; id++)
                {
                    bool present = !(id % 10 == 0 && (tick / 90) % 2 == 1); // every 10th blinks out and back
                    int qx = (int)((id * 37 + tick * (id % 7)) % 5000);
                    MirrorEntity e = mirror.Get(id);
                    if (tick == 1 || (e == null && present))
                        d.Spawns.Add(new Spawn { Id = id, Kind = 0, Qx = qx, Qy = (int)id, Fields = Fields(100, "e" + id) });
                    else if (e != null && !present) d.Despawns.Add(id);
                }
                // Updates index the known set after the despawns.
                var after = mirror.Ids.Where(id => !d.Despawns.Contains(id)).ToList();
                if (tick > 1)
                {
                    for (int index = 0; index < after.Count; index++)
                    {
                        uint id = after[index];
                        int qx = (int)((id * 37 + tick * (id % 7)) % 5000);
                        MirrorEntity e = mirror.Get(id);
                        if (e.Qx != qx) d.Updates.Add(new Update { Index = index, Id = id, Kind = 0, Pos = PosForm.At(qx, e.Qy) });
                    }
                }
                return d;
            };
            double now = 0;
            long tickNo = 0;
            long allocated = 0;
            int measuredFrames = 0;
            for (int frame = 0; frame < 24000; frame++)
            {
                now += 16.667;
                Delta delta = null;
                // The zone ticks at 30 Hz; a Delta every other frame carries the tick it reached (several when one
                // was held back), and now and then the link holds every Delta back for a second.
                long zoneTick = (long)(now / (1000.0 / 30));
                if (frame % 2 == 0 && (frame / 60) % 20 != 19 && zoneTick > tickNo)
                {
                    tickNo = zoneTick;
                    delta = world(tickNo);
                    mirror.Apply(delta);
                }
                bool measure = frame >= 4000;
                long before = measure ? GC.GetAllocatedBytesForCurrentThread() : 0;
                if (delta != null) replica.OnDelta(delta, mirror, now);
                ReplicaFrame f = replica.Frame(now);
                if (measure)
                {
                    allocated += GC.GetAllocatedBytesForCurrentThread() - before;
                    measuredFrames++;
                }
                Check.True(f.Entities.Count > 0 || frame < 10, "entities drawn");
            }
            Console.WriteLine("  " + measuredFrames + " frames (and their Deltas) after warm-up allocated " + allocated + " bytes; " + replica.ExtrapolatedFrames + " frames extrapolated");
            Check.True(replica.ExtrapolatedFrames > 0, "the measured run covered extrapolation");
            Check.Equal(0L, allocated, "bytes allocated by Replica.OnDelta and Replica.Frame after warm-up");
        }
    }
}
