// End-to-end tests against the real host: `zonekeep serve --dev` (ZONEKEEP_BIN, default
// target/debug/zonekeep) on a free loopback port with a scratch data directory, as
// tests/browser/harness.mjs starts it. Two C# clients join the arena, one moves (predicted with the arena's
// own rule) and the other sees it; a client resumes after the host restarts on the same port and data; and
// in a fleet of two hosts on PostgreSQL (ZONEKEEP_TEST_POSTGRES) a client follows the Redirect to the
// zone's owner.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Net.Http;
using System.Text;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;
using Zonekeep.Samples.Arena;
using ZonekeepSamples;

namespace Zonekeep.Tests
{
    /// <summary>One running `zonekeep serve` process.</summary>
    public sealed class HostProcess : IDisposable
    {
        public const string AdminToken = "csharp-tests-admin-token-0123456789";
        static readonly HttpClient Http = new HttpClient { Timeout = TimeSpan.FromSeconds(20) };

        readonly Process _proc;
        readonly List<string> _lines = new List<string>();
        public readonly string Dir;
        public readonly int Port;
        public readonly bool OwnsDir;

        public string Base { get { return "http://127.0.0.1:" + Port; } }
        public string Ws { get { return "ws://127.0.0.1:" + Port; } }

        public static string Binary()
        {
            string bin = Environment.GetEnvironmentVariable("ZONEKEEP_BIN");
            if (string.IsNullOrEmpty(bin)) bin = Path.Combine(Fixtures.RepoRoot(), "target", "debug", "zonekeep");
            if (!File.Exists(bin)) throw new SkipException("zonekeep binary not found at " + bin + " (cargo build -p zonekeep, or set ZONEKEEP_BIN)");
            return bin;
        }

        /// <summary>Starts a dev host on <paramref name="port"/> (0: the host picks a free one) in <paramref name="dir"/> (null: a new scratch directory).</summary>
        public HostProcess(int port = 0, string dir = null, string args = "", Dictionary<string, string> env = null)
        {
            OwnsDir = dir == null;
            Dir = dir ?? Path.Combine(Path.GetTempPath(), "zonekeep-cs-" + Guid.NewGuid().ToString("N").Substring(0, 12));
            Directory.CreateDirectory(Dir);
            var psi = new ProcessStartInfo(Binary(), "serve --dev --listen 127.0.0.1:" + port + " " + args)
            {
                WorkingDirectory = Dir,
                UseShellExecute = false,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            psi.EnvironmentVariables["RUST_LOG"] = Environment.GetEnvironmentVariable("RUST_LOG") ?? "warn";
            psi.EnvironmentVariables["ZONEKEEP_ADMIN_TOKEN"] = AdminToken;
            if (env != null) foreach (var kv in env) psi.EnvironmentVariables[kv.Key] = kv.Value;
            var listening = new TaskCompletionSource<int>();
            _proc = new Process { StartInfo = psi, EnableRaisingEvents = true };
            DataReceivedEventHandler keep = (s, e) =>
            {
                if (e.Data == null) return;
                lock (_lines)
                {
                    _lines.Add(e.Data);
                    if (_lines.Count > 500) _lines.RemoveAt(0);
                }
                Match m = Regex.Match(e.Data, @"listening\b.*?(\d+\.\d+\.\d+\.\d+):(\d+)");
                if (m.Success) listening.TrySetResult(int.Parse(m.Groups[2].Value));
            };
            _proc.OutputDataReceived += keep;
            _proc.ErrorDataReceived += keep;
            _proc.Exited += (s, e) => listening.TrySetException(new Exception("zonekeep exited before listening:\n" + Log()));
            _proc.Start();
            _proc.BeginOutputReadLine();
            _proc.BeginErrorReadLine();
            if (!listening.Task.Wait(TimeSpan.FromSeconds(60)))
            {
                Kill();
                throw new Exception("zonekeep did not say where it listens within 60 s:\n" + Log());
            }
            Port = listening.Task.Result;
        }

        public string Log()
        {
            lock (_lines) return string.Join("\n", _lines);
        }

        public bool Alive { get { return !_proc.HasExited; } }

        /// <summary>SIGTERM: the host drains (its clients are kicked with SHUTTING_DOWN, the zones saved) and exits.</summary>
        public void Stop()
        {
            if (_proc.HasExited) return;
            using (var kill = Process.Start(new ProcessStartInfo("kill", "-TERM " + _proc.Id) { UseShellExecute = false })) kill.WaitForExit();
            if (!_proc.WaitForExit(20000)) Kill();
        }

        /// <summary>kill -9: no drain, no final save.</summary>
        public void Kill()
        {
            try
            {
                if (!_proc.HasExited) _proc.Kill();
                _proc.WaitForExit(10000);
            }
            catch (InvalidOperationException)
            {
                // Already gone.
            }
        }

        public void Dispose()
        {
            Stop();
            if (OwnsDir)
            {
                try
                {
                    Directory.Delete(Dir, true);
                }
                catch (IOException)
                {
                    // A file still held open; the scratch directory is in the system temp.
                }
            }
        }

        public static string Get(string url, string bearer = null)
        {
            var req = new HttpRequestMessage(HttpMethod.Get, url);
            if (bearer != null) req.Headers.TryAddWithoutValidation("Authorization", "Bearer " + bearer);
            var res = Http.SendAsync(req).Result;
            string body = res.Content.ReadAsStringAsync().Result;
            if (!res.IsSuccessStatusCode) throw new Exception(url + ": HTTP " + (int)res.StatusCode + " " + body);
            return body;
        }

        public static string Post(string url, string json, string bearer)
        {
            var req = new HttpRequestMessage(HttpMethod.Post, url) { Content = new StringContent(json, Encoding.UTF8, "application/json") };
            req.Headers.TryAddWithoutValidation("Authorization", "Bearer " + bearer);
            var res = Http.SendAsync(req).Result;
            string body = res.Content.ReadAsStringAsync().Result;
            if (!res.IsSuccessStatusCode) throw new Exception(url + ": HTTP " + (int)res.StatusCode + " " + body);
            return body;
        }

        /// <summary>A dev guest ticket for <paramref name="zone"/> from <paramref name="baseUrl"/>'s /dev/ticket.</summary>
        public static Task<string> Ticket(string baseUrl, string zone, string name)
        {
            return Task.Run(() =>
            {
                string body = Get(baseUrl + "/dev/ticket?zone=" + Uri.EscapeDataString(zone) + "&name=" + Uri.EscapeDataString(name));
                return Json.Str(Json.Obj(Json.Parse(body))["ticket"]);
            });
        }
    }

    public static class LoopbackTests
    {
        /// <summary>A client of the arena: its connection (on the game loop scheduler), replica and predictor.</summary>
        sealed class ArenaClient
        {
            public ZoneConnection Conn;
            public Replica Replica;
            public Predictor<MoveState, MoveInput> Predictor;
            public List<Pillar> Pillars = new List<Pillar>();
            public List<WelcomeInfo> Welcomes = new List<WelcomeInfo>();
            public List<CloseInfo> Closes = new List<CloseInfo>();
            public List<string> Redirects = new List<string>();

            public ArenaClient(string baseUrl, string wsBase, string zone, string name)
            {
                Conn = new ZoneConnection(new ZoneConnectionOptions
                {
                    Url = wsBase + "/zones/" + zone,
                    Ticket = () => HostProcess.Ticket(baseUrl, zone, name),
                    Reconnect = new ReconnectOptions { MaxAttempts = 40, MaxDelayMs = 1000 },
                });
                Replica = new Replica(Conn.Clock);
                Conn.Welcomed += (w, i) => Welcomes.Add(i);
                Conn.Closed += c => Closes.Add(c);
                Conn.Redirected += r => Redirects.Add(r.Url);
                // Before the predictor's handler, so the pillars are current when it replays inputs.
                Conn.DeltaApplied += (d, info) =>
                {
                    if (info.Changes.Spawned.Count > 0 || info.Changes.Removed.Count > 0 || Pillars.Count == 0) Pillars = ArenaRules.ReadPillars(info.Mirror);
                };
                Replica.Attach(Conn);
                Predictor = new Predictor<MoveState, MoveInput>(new PredictorOptions<MoveState, MoveInput>
                {
                    Step = (s, i) => ArenaRules.Step(s, i, ArenaRules.Dt, Pillars),
                    Position = s => new Point(s.X, s.Y),
                    EaseMs = 120,
                    SnapDistance = 4,
                    StepMs = 1000.0 / ArenaRules.TickHz,
                });
                Predictor.Attach(Conn, (e, m) => new MoveState(m.X(e), m.Y(e)));
            }

            public void Poll()
            {
                Conn.Poll();
                Replica.Frame(Conn.Now);
            }

            public MirrorEntity Me
            {
                get
                {
                    uint? id = Conn.ControlledId;
                    return id.HasValue && Conn.Mirror != null ? Conn.Mirror.Get(id.Value) : null;
                }
            }
        }

        /// <summary>Polls the clients (their game loops) until <paramref name="cond"/> holds; fails after <paramref name="ms"/>.</summary>
        static void Until(string what, Func<bool> cond, double ms, params ArenaClient[] clients)
        {
            var watch = Stopwatch.StartNew();
            for (;;)
            {
                foreach (var c in clients) c.Poll();
                if (cond()) return;
                if (watch.ElapsedMilliseconds > ms) throw new Exception("timed out after " + ms + " ms waiting for " + what);
                // One frame of a game loop: the sockets' background threads fill the queues meanwhile.
                Thread.Sleep(5);
            }
        }

        /// <summary>Sends <paramref name="n"/> inputs of <paramref name="dir"/> at the tick rate, polling in between.</summary>
        static void Hold(ArenaClient c, byte dir, int n, params ArenaClient[] others)
        {
            var watch = Stopwatch.StartNew();
            double next = 0;
            int sent = 0;
            while (sent < n)
            {
                c.Poll();
                foreach (var o in others) o.Poll();
                if (watch.Elapsed.TotalMilliseconds >= next)
                {
                    if (c.Predictor.Send(c.Conn, new MoveInput { Dir = dir }, m => m.Encode(), c.Conn.Now).HasValue) sent++;
                    next += 1000.0 / ArenaRules.TickHz;
                }
                Thread.Sleep(2);
                if (watch.ElapsedMilliseconds > 20000) throw new Exception("could not send " + n + " inputs");
            }
        }

        [Test]
        public static void TwoClientsJoinTheArenaOneMovesTheOtherSeesIt()
        {
            using (var host = new HostProcess())
            {
                var a = new ArenaClient(host.Base, host.Ws, "arena-cs", "cs-a");
                var b = new ArenaClient(host.Base, host.Ws, "arena-cs", "cs-b");
                a.Conn.Connect();
                b.Conn.Connect();
                Until("both clients in play", () => a.Me != null && b.Me != null && a.Predictor.HasState, 30000, a, b);
                Check.Equal(ConnectionState.Open, a.Conn.State, "a is open");
                Check.True(a.Conn.Welcome.Version >= 6, "negotiated version " + a.Conn.Welcome.Version);
                Check.True(a.Pillars.Count > 0, "the pillars arrived");
                uint aId = a.Conn.ControlledId.Value;
                Until("b sees a", () => b.Conn.Mirror.Get(aId) != null, 10000, a, b);
                float x0 = a.Conn.Mirror.X(a.Me);
                int corrections = a.Predictor.Corrections;
                Hold(a, ArenaRules.DirRight, 30, b);
                uint lastSeq = (uint)30;
                Until("the zone acknowledged every input", () => a.Conn.Ack >= lastSeq, 10000, a, b);
                float x1 = a.Conn.Mirror.X(a.Me);
                Console.WriteLine("  a moved from x " + x0 + " to " + x1 + " in 30 inputs; predictor corrections " + (a.Predictor.Corrections - corrections));
                Check.True(x1 > x0 + 2, "a moved right: " + x0 + " -> " + x1);
                Point drawn;
                Check.True(a.Predictor.RenderPosition(a.Conn.Now, out drawn), "a has a predicted position");
                Check.True(Math.Abs(drawn.X - x1) < 0.5, "the prediction is where the zone put a: " + drawn.X + " vs " + x1);
                Check.Equal(corrections, a.Predictor.Corrections, "the prediction agreed with the zone (no corrections)");
                // b sees a where a is: in its known set at once, and drawn there by its replica a delay later.
                Until("b's known set has a where the zone put it", () => Math.Abs(b.Conn.Mirror.X(b.Conn.Mirror.Get(aId)) - x1) < 1e-6, 10000, a, b);
                ReplicaEntity seen = default(ReplicaEntity);
                Until("b's replica draws a there", () => b.Replica.Frame(b.Conn.Now).TryGet(aId, out seen) && Math.Abs(seen.X - x1) < 1e-3, 10000, a, b);
                Check.True(b.Conn.Stats.BytesIn > 0 && a.Conn.Stats.MessagesOut >= 31, "counters count");
                a.Conn.Close();
                b.Conn.Close();
                Check.Equal(ConnectionState.Closed, a.Conn.State, "closed");
            }
        }

        [Test]
        public static void ResumesAfterTheHostRestartsOnTheSamePortAndData()
        {
            // The data directory outlives the first host: the second one starts on it.
            string dir = Path.Combine(Path.GetTempPath(), "zonekeep-cs-" + Guid.NewGuid().ToString("N").Substring(0, 12));
            int port;
            ArenaClient a;
            uint playerBefore;
            using (var first = new HostProcess(0, dir))
            {
                port = first.Port;
                a = new ArenaClient(first.Base, first.Ws, "arena-restart", "cs-r");
                a.Conn.Connect();
                Until("in play", () => a.Me != null, 30000, a);
                playerBefore = a.Conn.Welcome.PlayerId;
                Hold(a, ArenaRules.DirDown, 10);
                Until("acknowledged", () => a.Conn.Ack >= 10, 10000, a);
                // Stop the host (graceful: the client is kicked with SHUTTING_DOWN, the zone saved).
                first.Stop();
                Until("the client saw its connection close", () => a.Closes.Count > 0, 15000, a);
                Check.True(a.Closes[0].WillReconnect, "it reconnects: " + a.Closes[0].Reason);
            }
            // Start it again on the same port with the same data directory, as `zonekeep serve --dev` twice would.
            using (var second = new HostProcess(port, dir))
            {
                try
                {
                    Until("back in play", () => a.Welcomes.Count >= 2 && a.Conn.State == ConnectionState.Open && a.Me != null, 30000, a);
                    WelcomeInfo again = a.Welcomes[a.Welcomes.Count - 1];
                    Console.WriteLine("  after the restart: " + (again.Resumed ? "resumed" : "joined afresh") + " as player " + a.Conn.Welcome.PlayerId +
                        " (before: " + playerBefore + "); closes seen: " + string.Join(" | ", a.Closes.Select(c => c.Code + " " + c.Reason)));
                    Check.True(again.Resumed, "the client resumed its player with the reconnect token");
                    Check.Equal(playerBefore, a.Conn.Welcome.PlayerId, "the same player");
                    // It plays on: the restarted zone acknowledges its inputs, with the sequence carried over.
                    uint ack0 = a.Conn.Ack;
                    float y0 = a.Conn.Mirror.Y(a.Me);
                    Hold(a, ArenaRules.DirUp, 10);
                    Until("the restarted zone acknowledged the new inputs", () => a.Conn.Ack >= ack0 + 10, 10000, a);
                    Check.True(a.Conn.Mirror.Y(a.Me) < y0 - 1, "moved up after the restart");
                    Check.Equal(1, a.Conn.Stats.Resumes, "one resume counted");
                }
                finally
                {
                    a.Conn.Close();
                    try
                    {
                        Directory.Delete(dir, true);
                    }
                    catch (IOException)
                    {
                        // Left in the system temp.
                    }
                }
            }
        }

        static void Psql(string url, string sql)
        {
            var psi = new ProcessStartInfo("psql", "\"" + url + "\" -v ON_ERROR_STOP=1 -q -c \"" + sql + "\"")
            {
                UseShellExecute = false,
                RedirectStandardError = true,
                RedirectStandardOutput = true,
            };
            using (var p = Process.Start(psi))
            {
                string err = p.StandardError.ReadToEnd();
                p.WaitForExit(20000);
                if (p.ExitCode != 0) throw new Exception("psql: " + err);
            }
        }

        [Test]
        public static void FollowsARedirectToTheZonesOwnerInAFleetOfTwo()
        {
            string pg = Environment.GetEnvironmentVariable("ZONEKEEP_TEST_POSTGRES");
            if (string.IsNullOrEmpty(pg)) throw new SkipException("ZONEKEEP_TEST_POSTGRES not set (a fleet of two hosts shares a PostgreSQL store)");
            HostProcess.Binary();
            string schema = "csharp_" + Process.GetCurrentProcess().Id + "_" + DateTime.UtcNow.Ticks % 1000000000;
            Psql(pg, "CREATE SCHEMA " + schema);
            string store = pg + (pg.Contains("?") ? "&" : "?") + "options=-csearch_path%3D" + schema;
            var env = new Dictionary<string, string> { { "ZONEKEEP_TICKET_SECRET", "csharp-fleet-ticket-secret-0123456789abcdef" } };
            var hosts = new List<HostProcess>();
            ArenaClient c = null;
            try
            {
                for (int i = 1; i <= 2; i++)
                    hosts.Add(new HostProcess(0, null, "--store \"" + store + "\" --host-id cs-" + i + " --save-every 200ms --sim-threads 1", env));
                var entry = hosts[0];
                var owner = hosts[1];
                // Both hosts see each other alive in the fleet directory.
                var watch = Stopwatch.StartNew();
                for (;;)
                {
                    var seen = Json.Arr(Json.Obj(Json.Parse(HostProcess.Get(entry.Base + "/admin/hosts", HostProcess.AdminToken)))["hosts"]);
                    if (seen.Count(h => (bool)Json.Obj(h)["alive"]) == 2) break;
                    if (watch.ElapsedMilliseconds > 20000) throw new Exception("the fleet did not form: " + HostProcess.Get(entry.Base + "/admin/hosts", HostProcess.AdminToken));
                    Thread.Sleep(100);
                }
                // The zone runs on the second host; the client enters at the first.
                string created = HostProcess.Post(entry.Base + "/admin/zones", "{\"id\":\"arena-fleet\",\"kind\":\"arena\",\"host\":\"cs-2\"}", HostProcess.AdminToken);
                Check.Equal("cs-2", Json.Str(Json.Obj(Json.Parse(created))["host"]), "placed on the second host");
                c = new ArenaClient(entry.Base, entry.Ws, "arena-fleet", "cs-fleet");
                c.Conn.Connect();
                Until("in play at the owner", () => c.Me != null, 30000, c);
                Console.WriteLine("  entered at " + entry.Ws + ", redirected to " + string.Join(", ", c.Redirects));
                Check.Equal(1, c.Redirects.Count, "one Redirect followed");
                Check.True(c.Redirects[0].StartsWith(owner.Ws + "/zones/arena-fleet", StringComparison.Ordinal), "to the owner: " + c.Redirects[0]);
                Check.Equal(1, c.Conn.Stats.Redirects, "counted");
                Check.Equal("arena-fleet", c.Conn.Welcome.ZoneId, "the zone");
                Check.True(c.Conn.ListedEntries.Count >= 1 && c.Conn.ListedEntries[0].StartsWith(owner.Ws, StringComparison.Ordinal), "the owner is listed first: " + string.Join(", ", c.Conn.ListedEntries));
                Hold(c, ArenaRules.DirLeft, 5);
                Until("the owner acknowledged the inputs", () => c.Conn.Ack >= 5, 10000, c);
            }
            finally
            {
                if (c != null) c.Conn.Close();
                foreach (var h in hosts) h.Dispose();
                Psql(pg, "DROP SCHEMA IF EXISTS " + schema + " CASCADE");
            }
        }
    }
}
