// A console player of the arena demo: gets a guest ticket from a `zonekeep serve --dev` host, joins
// arena-1, walks a square (predicted with the arena's own movement rule), and prints what it sees.
//
//   mono ZonekeepConsole.exe [http://127.0.0.1:7350] [zone] [name] [seconds]
//
// The loop is what a game's frame loop does: Poll() (socket events, timers, every callback), send the
// input for this tick, draw the Replica's frame.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Net.Http;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;
using Zonekeep;
using Zonekeep.Samples.Arena;
using ZonekeepSamples;

public static class Program
{
    static readonly HttpClient Http = new HttpClient { Timeout = TimeSpan.FromSeconds(10) };

    /// <summary>A dev host's guest ticket: GET /dev/ticket?zone=…&amp;name=… answers {"ticket": "…", …}.</summary>
    static async Task<string> FetchTicket(string baseUrl, string zone, string name)
    {
        string body = await Http.GetStringAsync(baseUrl + "/dev/ticket?zone=" + Uri.EscapeDataString(zone) + "&name=" + Uri.EscapeDataString(name)).ConfigureAwait(false);
        // The ticket is base64url and dots: no escapes to undo.
        Match m = Regex.Match(body, "\"ticket\"\\s*:\\s*\"([^\"]+)\"");
        if (!m.Success) throw new Exception("no ticket in the answer: " + body);
        return m.Groups[1].Value;
    }

    public static int Main(string[] args)
    {
        string baseUrl = args.Length > 0 ? args[0].TrimEnd('/') : "http://127.0.0.1:7350";
        string zone = args.Length > 1 ? args[1] : "arena-1";
        string name = args.Length > 2 ? args[2] : "console-" + Environment.TickCount % 10000;
        double seconds = args.Length > 3 ? double.Parse(args[3], System.Globalization.CultureInfo.InvariantCulture) : 10;
        string wsUrl = Regex.Replace(baseUrl, "^http", "ws") + "/zones/" + zone;

        var conn = new ZoneConnection(new ZoneConnectionOptions
        {
            Url = wsUrl,
            Ticket = () => FetchTicket(baseUrl, zone, name),
        });
        var replica = new Replica(conn.Clock);
        var pillars = new List<Pillar>();
        int playerKind = -1;
        bool done = false;
        int exitCode = 0;

        conn.Welcomed += (w, info) =>
        {
            playerKind = ArenaKinds.Bind(w.Schema).Player;
            Console.WriteLine("welcome: player " + w.PlayerId + " in " + w.ZoneId + " (protocol " + w.Version + ", " + w.TickHz + " Hz, " + (info.Resumed ? "resumed" : "joined") + ")");
        };
        // Before the predictor's handler, so the pillars are current when it replays inputs.
        conn.DeltaApplied += (d, info) =>
        {
            if (info.Changes.Spawned.Count > 0 || info.Changes.Removed.Count > 0 || pillars.Count == 0) pillars = ArenaRules.ReadPillars(info.Mirror);
        };
        conn.ZoneEventReceived += (ev, tick) =>
        {
            IArenaEvent e;
            try { e = ArenaEvents.Decode(ev.Topic, ev.Payload); }
            catch (ProtocolException x) { Console.WriteLine("an arena event this sample cannot read: " + x.Message); return; }
            if (e is PickedEvent) Console.WriteLine("picked up +" + ((PickedEvent)e).Amount);
            else if (e is SavedEvent) Console.WriteLine("score saved: " + ((SavedEvent)e).Total);
            else if (e is RefusedEvent) Console.WriteLine("score not saved: " + ((RefusedEvent)e).Reason);
        };
        conn.Kicked += k => Console.WriteLine("kick: " + KickCode.Name(k.Code) + " " + k.Reason);
        conn.Closed += c =>
        {
            Console.WriteLine("closed: " + c.Reason + (c.WillReconnect ? " (reconnecting in " + (int)c.RetryInMs + " ms)" : ""));
            if (!c.WillReconnect)
            {
                done = true;
                if (c.Code != 1000) exitCode = 1;
            }
        };
        conn.ReloadRequired += r => Console.WriteLine(r.Message);
        conn.MovedElsewhere += m => Console.WriteLine(m.Message);
        replica.Attach(conn);

        var predictor = new Predictor<MoveState, MoveInput>(new PredictorOptions<MoveState, MoveInput>
        {
            Step = (s, i) => ArenaRules.Step(s, i, ArenaRules.Dt, pillars),
            Position = s => new Point(s.X, s.Y),
            EaseMs = 120,
            SnapDistance = 4,
            StepMs = 1000.0 / ArenaRules.TickHz,
        });
        predictor.Attach(conn, (e, m) => new MoveState(m.X(e), m.Y(e)));

        Console.WriteLine("joining " + wsUrl + " as " + name);
        conn.Connect();
        var clock = Stopwatch.StartNew();
        double nextInput = 0, nextPrint = 0;
        int sent = 0;
        byte[] square = { ArenaRules.DirRight, ArenaRules.DirDown, ArenaRules.DirLeft, ArenaRules.DirUp };
        while (!done && clock.Elapsed.TotalSeconds < seconds)
        {
            conn.Poll();
            double now = conn.Now;
            // One input per tick while "a key is held": a square, one side a second.
            if (conn.State == ConnectionState.Open && now >= nextInput)
            {
                byte dir = square[(int)(clock.Elapsed.TotalSeconds) % 4];
                if (predictor.Send(conn, new MoveInput { Dir = dir }, m => m.Encode(), now).HasValue) sent++;
                nextInput = Math.Max(nextInput + 1000.0 / ArenaRules.TickHz, now - 3000.0 / ArenaRules.TickHz);
            }
            ReplicaFrame frame = replica.Frame(now);
            if (now >= nextPrint && conn.State == ConnectionState.Open)
            {
                nextPrint = now + 1000;
                int players = 0, others = 0;
                foreach (ReplicaEntity e in frame.Entities)
                {
                    if (e.Kind == playerKind)
                    {
                        players++;
                        if (e.Id != conn.ControlledId) others++;
                    }
                }
                Point me;
                string where = predictor.RenderPosition(now, out me) ? "(" + me.X.ToString("F2") + ", " + me.Y.ToString("F2") + ")" : "(not yet)";
                string tick = double.IsNaN(frame.RenderTick) ? "-" : ((long)frame.RenderTick).ToString();
                Console.WriteLine("tick " + tick + ": me at " + where + ", " + frame.Entities.Count + " entities in view (" + players + " players, " + others +
                    " others), delay " + frame.DelayMs.ToString("F0") + " ms, rtt " + conn.Clock.RttMs.ToString("F0") + " ms, inputs sent " + sent +
                    ", acked " + conn.Ack + ", corrections " + predictor.Corrections);
            }
            // A game would wait for its next frame here (vsync); a console loop sleeps as long.
            Thread.Sleep(16);
        }
        var stats = conn.Stats;
        Console.WriteLine("leaving: " + stats.MessagesIn + " messages in (" + stats.BytesIn + " bytes), " + stats.MessagesOut + " out; " + predictor.Corrections + " prediction corrections");
        conn.Close();
        return exitCode;
    }
}
