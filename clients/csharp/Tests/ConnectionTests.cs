// The connection's behaviour over the fake zone server and fleet on a manual clock, ported from
// clients/js/test/connection.test.ts, redirect.test.ts, resume.test.ts, content.test.ts,
// character.test.ts and transfer.test.ts (the cases that concern WebSocket sessions).
using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Threading.Tasks;

namespace Zonekeep.Tests
{
    public static class ConnectionTests
    {
        sealed class Setup
        {
            public ManualScheduler Sched;
            public FakeServer Server;
            public ZoneConnection Conn;
            public List<CloseInfo> Closes = new List<CloseInfo>();
            public List<int> Kicks = new List<int>();
            public List<KeyValuePair<uint, bool>> Welcomes = new List<KeyValuePair<uint, bool>>();
            public int Tickets;

            public Setup(ReconnectOptions reconnect = null, double latency = 20, Func<string, ISocket> socket = null, string url = "ws://test/zones/test-zone", ManualScheduler sched = null)
            {
                Sched = sched ?? new ManualScheduler(1000);
                Server = new FakeServer(Sched, () => latency);
                ReconnectOptions r = reconnect ?? new ReconnectOptions();
                if (r.Random == null) r.Random = () => 0.5;
                Conn = new ZoneConnection(new ZoneConnectionOptions
                {
                    Url = url,
                    Ticket = () => Task.FromResult("ticket-" + (++Tickets)),
                    Socket = socket ?? Server.Factory,
                    Scheduler = Sched,
                    Reconnect = r,
                });
                Conn.Closed += c => Closes.Add(c);
                Conn.Kicked += k => Kicks.Add(k.Code);
                Conn.Welcomed += (w, i) => Welcomes.Add(new KeyValuePair<uint, bool>(w.PlayerId, i.Resumed));
            }

            public void Advance(double ms) { Sched.Advance(ms); }
        }

        static string W(IEnumerable<KeyValuePair<uint, bool>> ws) { return string.Join(" ", ws.Select(w => w.Key + (w.Value ? "r" : "f"))); }

        [Test]
        public static void SendsHelloAcceptsWelcomeAndTheBaselineThenPings()
        {
            var s = new Setup();
            var deltas = new List<long>();
            s.Conn.DeltaApplied += (d, i) => deltas.Add(d.Tick);
            Task<Welcome> welcome = s.Conn.Connect();
            s.Advance(100);
            Check.True(welcome.IsCompleted && !welcome.IsFaulted, "connect() completed with the Welcome");
            Welcome w = welcome.Result;
            Check.Equal(1u, w.PlayerId, "player id");
            Check.Equal(11u, w.Version, "the newest version both speak");
            Check.Equal("1.0.0", w.ContentVersion, "the host's content version");
            Check.Equal(30000u, w.IdleTimeoutMs, "idle timeout");
            Check.Equal(ConnectionState.Open, s.Conn.State, "open");
            Check.Equal("1f", W(s.Welcomes), "welcomes");
            var hello = (Hello)s.Server.Last.Received[0];
            Check.Equal("6,7,8,9,10,11", string.Join(",", hello.Versions), "versions offered");
            Check.Equal("ticket-1", hello.Ticket, "ticket");
            Check.Equal(0, hello.ReconnectToken.Length, "no token");
            Check.Equal(MessageType.Ping, s.Server.Last.Received[1].Type, "then a Ping");
            Check.Equal(1, deltas.Count, "the BASELINE");
            Check.Equal(1, s.Conn.Mirror.Count, "one entity");
            Check.Equal((uint?)101, s.Conn.ControlledId, "controlled");
            var stats = s.Conn.Stats;
            Check.Equal(3L, stats.MessagesIn, "Welcome, BASELINE Delta, Pong");
            Check.Equal(2L, stats.MessagesOut, "Hello, Ping");
            Check.True(stats.BytesIn > 20 && stats.BytesOut > 10, "bytes counted");
            Check.Equal((double)stats.BytesIn, stats.BytesInPerSec, "all in the last second");
            s.Advance(2000);
            // Only Pongs arrived in the last second: the window forgot the Welcome and the BASELINE.
            Check.True(s.Conn.Stats.BytesInPerSec > 0 && s.Conn.Stats.BytesInPerSec < stats.BytesIn, "the rate window slid");
            Check.True(s.Server.Last.Received.Count(m => m.Type == MessageType.Ping) >= 3, "pings every second");
        }

        [Test]
        public static void StampsInputsWithSeqFromOneAndTheViewTick()
        {
            var s = new Setup();
            Check.Equal((uint?)null, s.Conn.SendInput(new byte[] { 1 }), "not open yet");
            s.Conn.Connect();
            s.Advance(100);
            s.Server.Tick = 77;
            s.Server.Step(t => { });
            s.Advance(50);
            s.Conn.SetViewTickSource(() => 70);
            Check.Equal((uint?)1, s.Conn.SendInput(new byte[] { 1 }), "seq 1");
            Check.Equal((uint?)2, s.Conn.SendInput(new byte[] { 2 }), "seq 2");
            s.Advance(50);
            var inputs = s.Server.Last.Received.OfType<InputMessage>().Select(i => i.Seq + ":" + i.ViewTick + ":" + Hex.ToHex(i.Payload));
            Check.Equal("1:70:01 2:70:02", string.Join(" ", inputs), "inputs");
        }

        [Test]
        public static void RefusesAVersionItDidNotOfferAndDoesNotReconnect()
        {
            var s = new Setup();
            s.Server.VersionPick = 12;
            Task<Welcome> p = s.Conn.Connect();
            s.Advance(100);
            Check.True(p.IsFaulted, "connect() failed");
            Check.Equal(ConnectionState.Closed, s.Conn.State, "closed");
            Check.Equal(1, s.Closes.Count, "one close");
            Check.Equal(false, s.Closes[0].WillReconnect, "no reconnect");
            Check.True(s.Closes[0].Reason.Contains("version 12"), s.Closes[0].Reason);
            Check.True(s.Closes[0].Error is ProtocolException, "a protocol error");
        }

        [Test]
        public static void StopsOnVersionMismatch()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched, () => 20);
            var conn = new ZoneConnection(new ZoneConnectionOptions
            {
                Url = "ws://x",
                Ticket = () => Task.FromResult("t"),
                Socket = server.Factory,
                Scheduler = sched,
                Versions = new uint[] { 12 },
            });
            var kicks = new List<int>();
            var closes = new List<CloseInfo>();
            conn.Kicked += k => kicks.Add(k.Code);
            conn.Closed += c => closes.Add(c);
            Task<Welcome> p = conn.Connect();
            sched.Advance(200);
            Check.True(p.IsFaulted, "connect() failed");
            Check.Equal("10", string.Join(",", kicks), "VERSION_MISMATCH");
            Check.Equal(1, closes.Count, "one close");
            Check.Equal(false, closes[0].WillReconnect, "no reconnect");
        }

        [Test]
        public static void TheDefaultPolicyDecidesEveryKickCode()
        {
            // [fetched ticket, reused ticket]: the key refusals differ by whether the ticket was used before.
            var table = new Dictionary<int, string>
            {
                { KickCode.BadTicket, "Stop Renew" }, { KickCode.TicketExpired, "Renew Renew" }, { KickCode.TicketNotYetValid, "Renew Renew" },
                { KickCode.TicketUnknownKey, "Stop Renew" }, { KickCode.TicketRetiredKey, "Stop Renew" }, { KickCode.TicketBadAlgorithm, "Stop Stop" },
                { KickCode.TicketWrongZone, "Stop Stop" }, { KickCode.TicketReplayed, "Renew Renew" }, { KickCode.ZoneFull, "Retry Retry" },
                { KickCode.VersionMismatch, "Stop Stop" }, { KickCode.Kicked, "Stop Stop" }, { KickCode.ShuttingDown, "Retry Retry" },
                { KickCode.RateLimited, "Stop Stop" }, { KickCode.ProtocolError, "Stop Stop" }, { KickCode.MessageTooLarge, "Stop Stop" },
                { KickCode.HandshakeTimeout, "Retry Retry" }, { KickCode.IdleTimeout, "Retry Retry" }, { KickCode.SlowConsumer, "Retry Retry" },
                { KickCode.JoinRefused, "Stop Stop" }, { KickCode.ReconnectRefused, "Fresh Fresh" }, { KickCode.ZoneStopped, "Stop Stop" },
                { KickCode.TooManyConnections, "Retry Retry" }, { KickCode.InternalError, "Retry Retry" }, { KickCode.ZoneMoved, "Retry Retry" },
                { KickCode.HostFenced, "Retry Retry" }, { KickCode.TooManyRedirects, "Retry Retry" }, { KickCode.ContentOutdated, "Reload Reload" },
                { KickCode.WorldHalted, "Retry Retry" }, { KickCode.CharacterMoved, "Stop Stop" }, { KickCode.CharacterElsewhere, "Retry Retry" },
                { KickCode.Banned, "Stop Stop" },
            };
            for (int code = 1; code <= 31; code++)
            {
                Check.True(table.ContainsKey(code), "a row for " + KickCode.Name(code));
                string got = ReconnectPolicy.Default(code, new ReconnectContext { TicketReused = false }) + " " + ReconnectPolicy.Default(code, new ReconnectContext { TicketReused = true });
                Check.Equal(table[code], got, KickCode.Name(code));
            }
            // No Kick (the socket dropped) and codes this SDK does not know: retry.
            Check.Equal(ReconnectDecision.Retry, ReconnectPolicy.Default(null, new ReconnectContext()), "no kick");
            Check.Equal(ReconnectDecision.Retry, ReconnectPolicy.Default(300, new ReconnectContext()), "unknown code");
            Check.Equal("UNKNOWN(300)", KickCode.Name(300), "unknown name");
            Check.Equal("ZONE_MOVED,HOST_FENCED", string.Join(",", Enumerable.Range(0, 31).Where(KickCode.ResumesElsewhere).Select(KickCode.Name)), "resumes elsewhere");
        }

        [Test]
        public static void ResumesWithTheReconnectTokenInsideTheGraceWindow()
        {
            var s = new Setup(new ReconnectOptions { GraceMs = 5000 });
            s.Conn.Connect();
            s.Advance(100);
            Check.Equal((uint?)1, s.Conn.SendInput(new byte[] { 1 }), "seq 1");
            s.Advance(100);
            byte[] firstToken = s.Conn.Welcome.ReconnectToken;
            s.Server.Last.Socket.Drop();
            s.Advance(50);
            Check.Equal(1, s.Closes.Count, "a close");
            Check.Equal(true, s.Closes[0].WillReconnect, "reconnects");
            Check.Equal(ConnectionState.Reconnecting, s.Conn.State, "reconnecting");
            Check.Equal((uint?)null, s.Conn.SendInput(new byte[] { 2 }), "inputs are not sent while reconnecting");
            s.Advance(1000);
            Check.Equal(ConnectionState.Open, s.Conn.State, "open again");
            var hello = (Hello)s.Server.Last.Received[0];
            Check.Equal(Hex.ToHex(firstToken), Hex.ToHex(hello.ReconnectToken), "the token");
            Check.Equal("ticket-1", hello.Ticket, "the same ticket is presented with the token");
            Check.Equal(1, s.Tickets, "no fresh ticket was needed");
            Check.Equal("1f 1r", W(s.Welcomes), "welcomes");
            Check.Equal((uint?)2, s.Conn.SendInput(new byte[] { 3 }), "seq continues for a resumed player");
        }

        [Test]
        public static void AsksForAFreshTicketAfterTheGraceWindow()
        {
            var s = new Setup(new ReconnectOptions { GraceMs = 2000, MaxAttempts = 20 });
            s.Conn.Connect();
            s.Advance(100);
            s.Server.Up = false;
            s.Server.Last.Socket.Drop();
            s.Advance(3000);
            Check.True(s.Closes.Count >= 3, "retried while down (" + s.Closes.Count + " closes)");
            Check.True(s.Closes.All(c => c.WillReconnect), "every close reconnects");
            s.Server.Up = true;
            s.Advance(10000);
            Check.Equal(ConnectionState.Open, s.Conn.State, "open");
            var hello = (Hello)s.Server.Last.Received[0];
            Check.Equal(0, hello.ReconnectToken.Length, "no token after the grace window");
            Check.Equal("ticket-" + s.Tickets, hello.Ticket, "a new ticket");
            Check.True(s.Tickets >= 2, "tickets fetched");
            Check.Equal("2f", W(s.Welcomes.Skip(s.Welcomes.Count - 1)), "a new player");
            // Backoff grows: the gaps between attempts are not all equal.
            Check.True(s.Closes[2].RetryInMs > s.Closes[0].RetryInMs, "backoff grows");
        }

        [Test]
        public static void FallsBackToAFreshTicketWhenTheTokenIsRefused()
        {
            var s = new Setup(new ReconnectOptions { GraceMs = 60000 });
            s.Conn.Connect();
            s.Advance(100);
            s.Server.RefuseTokens = true;
            s.Server.Last.Socket.Drop();
            s.Advance(5000);
            Check.Equal("20", string.Join(",", s.Kicks), "RECONNECT_REFUSED");
            Check.Equal(ConnectionState.Open, s.Conn.State, "open");
            var tokens = s.Server.Sessions.Select(x => x.Received.OfType<Hello>().First().ReconnectToken.Length);
            Check.Equal("0,16,0", string.Join(",", tokens), "token lengths of the Hellos");
            Check.Equal(2, s.Tickets, "tickets");
            Check.Equal(2, s.Closes.Count, "closes");
        }

        [Test]
        public static void GivesUpAfterTheBoundedNumberOfAttempts()
        {
            var s = new Setup(new ReconnectOptions { MaxAttempts = 3 });
            s.Conn.Connect();
            s.Advance(100);
            s.Server.Up = false;
            s.Server.Last.Socket.Drop();
            s.Advance(60000);
            Check.Equal(ConnectionState.Closed, s.Conn.State, "closed");
            Check.Equal("True,True,True,False", string.Join(",", s.Closes.Select(c => c.WillReconnect)), "closes");
            // Only the zone's loop is left: the connection left no timer behind.
            int before = s.Sched.Pending;
            Check.Equal(0, before, "no timer left behind");
        }

        [Test]
        public static void CloseEndsTheSessionWithoutReconnecting()
        {
            var s = new Setup();
            s.Conn.Connect();
            s.Advance(100);
            s.Conn.Close();
            s.Advance(5000);
            Check.Equal(ConnectionState.Closed, s.Conn.State, "closed");
            Check.Equal(1, s.Closes.Count, "one close");
            Check.Equal(false, s.Closes[0].WillReconnect, "no reconnect");
        }

        [Test]
        public static void ACorruptedKnownSetFailsTheHostsCheckAndAResyncRepairsIt()
        {
            var s = new Setup();
            s.Conn.Connect();
            s.Advance(100);
            Mirror mirror = s.Conn.Mirror;
            s.Server.SendKnownSetCheck(s.Server.Last);
            s.Advance(50);
            Check.Equal(0, s.Conn.Stats.Resyncs, "a matching check changes nothing");
            // Corrupt the client's known set: an entity the host never sent.
            var ghost = new Delta { Tick = mirror.Tick };
            ghost.Spawns.Add(new Spawn { Id = 999, Kind = 0, Fields = new[] { FieldValue.Int(1), FieldValue.Str("ghost") } });
            mirror.Apply(ghost);
            int baselines = 0;
            s.Conn.DeltaApplied += (d, i) => { if (d.Baseline) baselines++; };
            s.Server.SendKnownSetCheck(s.Server.Last);
            s.Advance(100);
            Check.True(s.Server.Last.Received.Any(m => m.Type == MessageType.Resync), "the client asked for a BASELINE");
            Check.Equal(1, baselines, "the BASELINE came");
            Check.True(s.Conn.Mirror.Get(999) == null, "the BASELINE replaced the corrupted set");
            s.Server.SendKnownSetCheck(s.Server.Last);
            s.Advance(50);
            Check.Equal(1, s.Conn.Stats.Resyncs, "repaired: the next check passes");
            Check.Equal(ConnectionState.Open, s.Conn.State, "no reconnect was needed");
        }

        [Test]
        public static void ACloseCodeStandsForItsKickWhenTheKickWasLost()
        {
            var s = new Setup();
            s.Conn.Connect();
            s.Advance(100);
            s.Server.Last.Socket.Drop(4012); // SHUTTING_DOWN: come back
            s.Advance(50);
            Check.Equal(true, s.Closes[0].WillReconnect, "4012 reconnects");
            s.Advance(2000);
            Check.Equal(ConnectionState.Open, s.Conn.State, "back");
            s.Server.Last.Socket.Drop(4011); // KICKED: stay away
            s.Advance(50);
            Check.Equal(false, s.Closes[1].WillReconnect, "4011 stops");
            Check.Equal(ConnectionState.Closed, s.Conn.State, "closed");
        }

        [Test]
        public static void ReportsRefusedInputsAndAnAttachedPredictorDropsThem()
        {
            var s = new Setup();
            var predictor = new Predictor<Point, int>(new PredictorOptions<Point, int>
            {
                Step = (p, dx) => new Point(p.X + dx, p.Y),
                Position = p => p,
            });
            predictor.Attach(s.Conn, (e, m) => new Point(e.Qx, e.Qy));
            s.Conn.Connect();
            s.Advance(100);
            Func<int, byte[]> encode = dx => new[] { (byte)dx };
            predictor.Send(s.Conn, 1, encode);
            predictor.Send(s.Conn, 5, encode);
            predictor.Send(s.Conn, 1, encode);
            Check.Equal("1,2,3", string.Join(",", predictor.PendingSeqs()), "pending");
            var refused = new List<uint>();
            s.Conn.InputRefused += r => refused.Add(r.Seq);
            s.Server.Send(s.Server.Last, new InputRefused { Seq = 2, Code = 7 });
            s.Advance(50);
            Check.Equal("2", string.Join(",", refused), "refused");
            Check.Equal("1,3", string.Join(",", predictor.PendingSeqs()), "the predictor dropped it");
            Check.Equal(1, s.Conn.Stats.InputsRefused, "counted");
        }

        [Test]
        public static void SendsAgainWithTheirNumbersTheInputsNoDeltaAcknowledged()
        {
            var s = new Setup();
            s.Server.Tick = 10;
            s.Conn.Connect();
            s.Advance(100);
            for (int i = 0; i < 3; i++) s.Conn.SendInput(new byte[] { 1, 0 });
            s.Advance(100);
            s.Server.Tick += 1;
            s.Server.SendDelta(s.Server.Last, false);
            s.Advance(100);
            Check.Equal(3u, s.Conn.Ack, "acknowledged");
            // Two more leave, and the socket goes before they arrive (a zone handed over in a drain keeps only
            // the inputs it consumed).
            Check.Equal((uint?)4, s.Conn.SendInput(new byte[] { 1, 0 }), "seq 4");
            Check.Equal((uint?)5, s.Conn.SendInput(new byte[] { 1, 0 }), "seq 5");
            ServerSession first = s.Server.Last;
            first.Socket.Drop();
            s.Advance(1000);
            Check.Equal(ConnectionState.Open, s.Conn.State, "open");
            Check.True(s.Server.Last != first, "a new socket");
            Check.Equal("4,5", string.Join(",", s.Server.Last.Received.OfType<InputMessage>().Select(i => i.Seq)), "the unacknowledged inputs, in order, and only those");
            Check.Equal((uint?)6, s.Conn.SendInput(new byte[] { 1, 0 }), "the sequence carries on");
            s.Conn.Close();
        }

        [Test]
        public static void TextFrameIsAProtocolErrorThatStops()
        {
            var s = new Setup();
            s.Conn.Connect();
            s.Advance(100);
            Check.Equal(ConnectionState.Open, s.Conn.State, "open");
            s.Server.Last.Socket.OnMessage(Encoding.UTF8.GetBytes("hi"), true);
            Check.Equal(ConnectionState.Closed, s.Conn.State, "undecodable: the next attempt would meet the same");
            Check.True(s.Closes[0].Error is ProtocolException, "a protocol error: " + s.Closes[0].Error);
        }

        [Test]
        public static void HandshakeTimesOutAndRetries()
        {
            var s = new Setup();
            // A host that accepts the socket and never answers the Hello.
            s.Server.Silent = true;
            s.Conn.Connect();
            s.Advance(10500);
            Check.Equal(1, s.Closes.Count, "the handshake timed out");
            Check.True(s.Closes[0].Error is TimeoutException, "a timeout: " + s.Closes[0].Error);
            Check.Equal(true, s.Closes[0].WillReconnect, "and is retried");
        }

        [Test]
        public static void WaitsForATicketThatCompletesLater()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched, () => 20);
            var pending = new TaskCompletionSource<string>();
            var conn = new ZoneConnection(new ZoneConnectionOptions { Url = "ws://t", Ticket = () => pending.Task, Socket = server.Factory, Scheduler = sched });
            conn.Connect();
            sched.Advance(500);
            Check.Equal(0, server.Sessions.Count, "no socket before the ticket");
            Check.Equal(ConnectionState.Connecting, conn.State, "connecting");
            pending.SetResult("late-ticket");
            sched.Advance(200);
            Check.Equal(ConnectionState.Open, conn.State, "open once the ticket came");
            Check.Equal("late-ticket", ((Hello)server.Last.Received[0]).Ticket, "that ticket");
        }

        // ---- fleets

        const string Entry = "ws://entry/zones/test-zone";

        sealed class FleetSetup
        {
            public ManualScheduler Sched = new ManualScheduler(1000);
            public FakeFleet Fleet;
            public ZoneConnection Conn;
            public List<CloseInfo> Closes = new List<CloseInfo>();
            public List<string> Redirected = new List<string>();
            public List<int> Kicks = new List<int>();
            public List<KeyValuePair<uint, bool>> Welcomes = new List<KeyValuePair<uint, bool>>();
            public int Tickets;

            public FleetSetup(ReconnectOptions reconnect, params string[] names)
            {
                Fleet = new FakeFleet(Sched, new[] { "entry" }.Concat(names).ToArray());
                ReconnectOptions r = reconnect ?? new ReconnectOptions();
                r.Random = () => 0.5;
                Conn = new ZoneConnection(new ZoneConnectionOptions
                {
                    Url = Entry,
                    Ticket = () => Task.FromResult("ticket-" + (++Tickets)),
                    Socket = Fleet.Factory,
                    Scheduler = Sched,
                    Reconnect = r,
                });
                Conn.Closed += c => Closes.Add(c);
                Conn.Redirected += x => Redirected.Add(x.Url);
                Conn.Kicked += k => Kicks.Add(k.Code);
                Conn.Welcomed += (w, i) => Welcomes.Add(new KeyValuePair<uint, bool>(w.PlayerId, i.Resumed));
            }

            public List<string> Hellos(FakeServer host)
            {
                return host.Sessions.Select(x => x.Received.OfType<Hello>().FirstOrDefault()).Where(h => h != null).Select(h => Hex.ToHex(MessageCodec.EncodeClient(h))).ToList();
            }
        }

        [Test]
        public static void FollowsTwoRedirectsToTheOwnerWhichGetsTheSameHello()
        {
            var f = new FleetSetup(null, "b", "owner");
            f.Fleet.Host("entry").RedirectTo = (h, s) => "ws://b/zones/test-zone?hops=1";
            f.Fleet.Host("b").RedirectTo = (h, s) => "ws://owner/zones/test-zone?hops=2";
            Task<Welcome> welcome = f.Conn.Connect();
            f.Sched.Advance(300);
            Check.Equal(1u, welcome.Result.PlayerId, "player");
            Check.Equal(ConnectionState.Open, f.Conn.State, "open");
            Check.Equal(Entry + " ws://b/zones/test-zone?hops=1 ws://owner/zones/test-zone?hops=2", string.Join(" ", f.Fleet.Opened), "opened");
            var sent = f.Hellos(f.Fleet.Host("entry")).Concat(f.Hellos(f.Fleet.Host("b"))).Concat(f.Hellos(f.Fleet.Host("owner"))).ToList();
            Check.Equal(3, sent.Count, "three Hellos");
            Check.True(sent.All(h => h == sent[0]), "byte for byte the same Hello at every hop");
            Check.Equal("ws://b/zones/test-zone?hops=1 ws://owner/zones/test-zone?hops=2", string.Join(" ", f.Redirected), "redirect events");
            Check.Equal(0, f.Closes.Count, "a redirect is not a close");
            var st = f.Conn.Stats;
            Check.Equal("2 1 0", st.Redirects + " " + st.FreshJoins + " " + st.Resumes, "redirects, fresh joins, resumes");
        }

        [Test]
        public static void DoesNotFollowAFourthRedirect()
        {
            var f = new FleetSetup(new ReconnectOptions { MaxAttempts = 0 });
            var entry = f.Fleet.Host("entry");
            entry.RedirectTo = (h, s) => "ws://entry/zones/test-zone?hops=" + entry.Sessions.Count;
            Task<Welcome> p = f.Conn.Connect();
            f.Sched.Advance(500);
            Check.True(p.IsFaulted, "connect() failed");
            Check.Equal(4, f.Fleet.Opened.Count, "the entry and three hops");
            Check.Equal(1, f.Closes.Count, "one close");
            var err = f.Closes[0].Error as RedirectException;
            Check.True(err != null && err.Kind == RedirectErrorKind.TooMany, "too many redirects: " + f.Closes[0].Error);
            Check.Equal(3, f.Conn.Stats.Redirects, "three followed");
        }

        [Test]
        public static void RefusesARedirectToAnotherSchemeAndStops()
        {
            var f = new FleetSetup(null);
            f.Fleet.Host("entry").RedirectTo = (h, s) => "https://elsewhere/zones/test-zone";
            Task<Welcome> p = f.Conn.Connect();
            f.Sched.Advance(500);
            Check.True(p.IsFaulted, "connect() failed");
            Check.Equal(Entry, string.Join(" ", f.Fleet.Opened), "nothing opened at the refused URL");
            var err = f.Closes[0].Error as RedirectException;
            Check.True(err != null && err.Kind == RedirectErrorKind.Scheme && err.Url == "https://elsewhere/zones/test-zone", "scheme: " + f.Closes[0].Error);
            Check.Equal(false, f.Closes[0].WillReconnect, "stops");
            Check.Equal(ConnectionState.Closed, f.Conn.State, "closed");
            foreach (string ok in new[] { "ws://b:7350/zones/z?hops=1", "wss://b.example/zones/z", "WSS://B.example/zones/z" })
                Check.Equal(ok, MessageCodec.WebSocketTarget(ok), ok);
            foreach (string bad in new[] { "http://b/zones/z", "https://b/zones/z", "/zones/z", "b:7350/zones/z", "ws:/b/zones/z", "ws://", "ws:///zones/z", "javascript://b", "" })
                Check.Equal((string)null, MessageCodec.WebSocketTarget(bad), bad);
        }

        [Test]
        public static void ResumesAtOnceThroughTheEntryUrlWithTheTokenAfterZoneMoved()
        {
            // A minute of backoff: only an attempt made at once is back within the time advanced below.
            var f = new FleetSetup(new ReconnectOptions { BaseDelayMs = 60000 }, "one", "two");
            string owner = "one";
            f.Fleet.Host("entry").RedirectTo = (h, s) => "ws://" + owner + "/zones/test-zone?hops=1";
            // The new owner took the zone with its players and their tokens.
            f.Fleet.Host("two").Tokens = f.Fleet.Host("one").Tokens;
            f.Conn.Connect();
            f.Sched.Advance(300);
            byte[] token = f.Conn.Welcome.ReconnectToken;
            Check.Equal((uint?)1, f.Conn.SendInput(new byte[] { 1 }), "seq 1");
            owner = "two";
            f.Fleet.Host("one").Kick(f.Fleet.Host("one").Last, KickCode.ZoneMoved, "zone moved");
            f.Sched.Advance(500);
            Check.Equal("24", string.Join(",", f.Kicks), "ZONE_MOVED");
            Check.Equal(0, f.Closes.Count, "a move that lands at once is no disconnect to the game");
            Check.Equal(ConnectionState.Open, f.Conn.State, "open");
            Check.Equal(Entry + " ws://one/zones/test-zone?hops=1 " + Entry + " ws://two/zones/test-zone?hops=1", string.Join(" ", f.Fleet.Opened), "through the entry URL again");
            var resume = f.Fleet.Host("two").Last.Received.OfType<Hello>().First();
            Check.Equal(Hex.ToHex(token), Hex.ToHex(resume.ReconnectToken), "the token");
            Check.Equal("ticket-1", resume.Ticket, "the same ticket resumes");
            Check.Equal(f.Hellos(f.Fleet.Host("entry"))[1], f.Hellos(f.Fleet.Host("two"))[0], "the same Hello at the entry and the owner");
            Check.Equal("1f 1r", W(f.Welcomes), "resumed");
            Check.Equal((uint?)2, f.Conn.SendInput(new byte[] { 2 }), "the same player goes on");
        }

        // ---- final kicks

        [Test]
        public static void CharacterMovedStopsWithoutReconnectingEvenUnderAPolicyThatRetries()
        {
            var s = new Setup(new ReconnectOptions { Policy = (c, x) => ReconnectDecision.Retry });
            var order = new List<string>();
            s.Conn.MovedElsewhere += m => order.Add("moved:" + m.Message);
            s.Conn.Closed += c => order.Add("close:" + c.MovedElsewhere);
            s.Conn.Connect();
            s.Advance(100);
            s.Server.Kick(s.Server.Last, KickCode.CharacterMoved, "your character joined zone dungeon-2");
            s.Advance(5000);
            Check.Equal(ConnectionState.Closed, s.Conn.State, "stopped");
            Check.Equal(1, s.Server.Sessions.Count, "no reconnect");
            Check.Equal("moved:" + ZoneConnection.MovedElsewhereMessage + " (your character joined zone dungeon-2)|close:True", string.Join("|", order), "the signal, then the close");
        }

        [Test]
        public static void ContentOutdatedAtTheFirstJoinRejectsConnectAndSaysReload()
        {
            var s = new Setup();
            s.Server.MinContentVersion = "1.4";
            var reloads = new List<string>();
            s.Conn.ReloadRequired += r => reloads.Add(r.Message);
            Task<Welcome> p = s.Conn.Connect();
            s.Advance(500);
            Check.True(p.IsFaulted && p.Exception.GetBaseException() is ContentOutdatedException, "connect() rejects with ContentOutdatedException");
            Check.Equal(1, reloads.Count, "reload told once");
            Check.True(s.Closes[0].Reload && !s.Closes[0].WillReconnect, "the close says reload");
            Check.Equal(1, s.Server.Sessions.Count, "no retry: outdated content stays outdated");
            Check.Equal(-1, ContentVersions.Compare("1.4", "1.10"), "1.4 < 1.10");
            Check.Equal(0, ContentVersions.Compare("1.4", "1.4.0"), "1.4 = 1.4.0");
            Check.Equal(1, ContentVersions.Compare("2", "1.99.99"), "2 > 1.99.99");
            Check.Equal((int?)null, ContentVersions.Compare("", "1"), "empty is no version");
            Check.Equal((int?)null, ContentVersions.Compare("1.x", "1"), "not a dotted number");
        }

        // ---- transfers

        static string Credential()
        {
            Func<string, string> b64 = j => Convert.ToBase64String(Encoding.UTF8.GetBytes(j)).TrimEnd('=').Replace('+', '-').Replace('/', '_');
            long exp = (long)(DateTime.UtcNow - new DateTime(1970, 1, 1)).TotalSeconds + 600;
            return b64("{\"alg\":\"HS256\"}") + "." + b64("{\"sub\":\"alice\",\"zone\":\"lobby\",\"exp\":" + exp + ",\"jti\":\"x1\",\"xfer\":{\"id\":\"t-1\",\"from\":\"test-zone\",\"player\":1}}") + ".sig";
        }

        [Test]
        public static void TransferDrawsTheOldWorldUntilTheNewBaselineThenSwapsInOneStep()
        {
            var f = new FleetSetup(null, "b");
            var source = f.Fleet.Host("entry");
            var target = f.Fleet.Host("b");
            target.ZoneId = "lobby";
            target.NextPlayer = 50;
            source.Entities[7] = new FakeEntity { Kind = 0, Fields = new[] { FieldValue.Int(100), FieldValue.Str("rock") } };
            target.Entities[9] = new FakeEntity { Kind = 0, Qx = 40, Qy = 40, Fields = new[] { FieldValue.Int(100), FieldValue.Str("tree") } };
            source.Run();
            target.Run();
            var replica = new Replica(f.Conn.Clock);
            replica.Attach(f.Conn);
            var transfers = new List<string>();
            f.Conn.TransferStarted += t => transfers.Add(t.From + ">" + t.To + "@" + t.Url);
            var states = new HashSet<ConnectionState>();
            var frames = new List<string>();
            Action draw = null;
            draw = () =>
            {
                states.Add(f.Conn.State);
                if (f.Conn.Welcome != null) frames.Add(string.Join(",", replica.Frame(f.Sched.Now()).Entities.Select(e => e.Id).OrderBy(x => x)));
                f.Sched.SetTimeout(draw, 16);
            };
            draw();
            int framesAtWelcome = -1, baselineFrames = -1;
            f.Conn.Welcomed += (w, i) => { if (i.Transfer != null) framesAtWelcome = frames.Count; };
            f.Conn.DeltaApplied += (d, i) => { if (d.Baseline && framesAtWelcome >= 0 && baselineFrames < 0) baselineFrames = frames.Count; };
            f.Conn.Connect();
            f.Sched.Advance(600);
            Check.Equal(11u, f.Conn.Welcome.Version, "version");
            ServerSession old = source.Last;
            int before = frames.Count;
            Check.Equal("7,101", frames[before - 1], "the source's world is drawn");
            string cred = Credential();
            source.Transfer(old, "lobby", cred, "ws://b/zones/lobby");
            f.Sched.Advance(600);
            Check.Equal("test-zone>lobby@ws://b/zones/lobby", string.Join(" ", transfers), "transfer told");
            Check.Equal(0, f.Closes.Count, "a transfer is no disconnect");
            Check.True(!states.Contains(ConnectionState.Reconnecting) && states.Contains(ConnectionState.Transferring), "transferring, never reconnecting");
            Check.Equal(ConnectionState.Open, f.Conn.State, "open");
            Check.Equal("lobby", f.Conn.Welcome.ZoneId, "in the lobby");
            Check.Equal(framesAtWelcome, baselineFrames, "no frame between the new Welcome and its BASELINE");
            var hello = target.Last.Received.OfType<Hello>().First();
            Check.Equal(cred, hello.Ticket, "the credential");
            Check.Equal(0, hello.ReconnectToken.Length, "no token");
            Check.True(hello.ResumeFrom == null, "no resume_from");
            Check.Equal(Entry + " ws://b/zones/lobby", string.Join(" ", f.Fleet.Opened), "straight to the Transfer's URL");
            var after = frames.Skip(before).ToList();
            int firstNew = after.FindIndex(x => x.Split(',').Contains("9"));
            Check.True(firstNew > 0, "the old world was drawn while the new connection was made");
            for (int i = 0; i < after.Count; i++) Check.Equal(i < firstNew ? "7,101" : "9,150", after[i], "frame " + i);
            Check.True(old.Socket.ClientClosed, "the source connection was closed after the swap");
            Check.Equal(1, f.Conn.Stats.Transfers, "counted");
        }

        // ---- the state ring and NetSim

        [Test]
        public static void StateRingAppliesStatesAgainstTheirBaseAndReportsTheChangeFromTheStateShown()
        {
            Schema schema = FakeServer.TestSchema;
            Func<uint, int, Spawn> sp = (id, qx) => new Spawn { Id = id, Kind = 0, Qx = qx, Qy = 0, Fields = new[] { FieldValue.Int(1), FieldValue.Str("s") } };
            var ring = new StateRing(schema);
            var b = new Delta { Tick = 10, Baseline = true, Base = 0 };
            b.Spawns.Add(sp(1, 0));
            b.Spawns.Add(sp(2, 0));
            var r1 = ring.Apply(DeltaCodec.Encode(b, schema, new List<KnownEntry>()));
            Check.Equal(StateApplyStatus.Applied, r1.Status, "baseline applied");
            Check.Equal(10L, ring.AckTick, "ack");
            Check.Equal(StateApplyStatus.Stale, ring.Apply(DeltaCodec.Encode(b, schema, new List<KnownEntry>())).Status, "a repeat is stale");
            // Two States against the BASELINE: the second's change is reported from the first (the state shown).
            var known = new List<KnownEntry> { new KnownEntry(1, 0), new KnownEntry(2, 0) };
            var s11 = new Delta { Tick = 11, Base = 10 };
            s11.Updates.Add(new Update { Index = 0, Id = 1, Kind = 0, Pos = PosForm.Step(PosFormKind.Tiny, 1, 0) });
            ring.Apply(DeltaCodec.Encode(s11, schema, known));
            var s12 = new Delta { Tick = 12, Base = 10 };
            s12.Updates.Add(new Update { Index = 0, Id = 1, Kind = 0, Pos = PosForm.Step(PosFormKind.Tiny, 2, 0) });
            s12.Despawns.Add(2);
            var r12 = ring.Apply(DeltaCodec.Encode(s12, schema, known));
            Check.Equal(StateApplyStatus.Applied, r12.Status, "applied against an older base");
            Check.Equal("2", string.Join(",", r12.Changes.Removed), "removed since the state shown");
            Check.Equal("1", string.Join(",", r12.Changes.Updated), "updated since the state shown");
            Check.Equal(2, ring.Current.Get(1).Qx, "at the position the State gives");
            PosForm p = r12.Delta.Updates[0].Pos.Value;
            Check.Equal(1, p.Dx, "the reported move is from the state shown (1 → 2)");
            var s13 = new Delta { Tick = 13, Base = 5 };
            Check.Equal(StateApplyStatus.NoBase, ring.Apply(DeltaCodec.Encode(s13, schema, known)).Status, "a base never held");
        }

        [Test]
        public static void NetSimDelaysInOrderAndRetransmitsLostMessagesDeterministically()
        {
            Func<NetSim> make = () => new NetSim(new NetSimConfig { DelayMs = 100, JitterMs = 20, Loss = 0.1, RtoMs = 300, Seed = 42 });
            var a = make();
            var b = make();
            double last = 0;
            for (int i = 0; i < 1000; i++)
            {
                double at = a.Schedule(i * 10);
                Check.Equal(at, b.Schedule(i * 10), "the same seed gives the same run");
                Check.True(at >= last && at >= i * 10 + 80, "in order, never early");
                last = at;
            }
            Check.True(a.Stats.Retransmissions > 50 && a.Stats.Retransmissions < 150, "about 10 % lost: " + a.Stats.Retransmissions);
            Check.True(a.Stats.HeadOfLineWaits > 0, "held back behind a retransmission");
        }
    }
}
