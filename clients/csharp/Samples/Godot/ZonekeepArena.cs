// A Godot 4 (.NET) scene script for the arena demo: attach it to a Node2D, run the scene with
// `zonekeep serve --dev` running. Arrow keys move (the ui_* actions); the player is predicted with the
// arena's own rule (ArenaRules.cs beside this folder); everyone else is drawn through the Replica, a
// measured delay behind the zone. One world unit is `Scale` pixels.
//
// Everything runs on Godot's main thread: _Process polls the connection, which hands over what the
// socket's background thread received. This file is a sample: it is not compiled in this repository.
using System.Collections.Generic;
using System.Net.Http;
using System.Text.RegularExpressions;
using System.Threading.Tasks;
using Godot;
using Zonekeep;
using Zonekeep.Samples.Arena;
using ZonekeepSamples;

public partial class ZonekeepArena : Node2D
{
    [Export] public string Host = "http://127.0.0.1:7350";
    [Export] public string Zone = "arena-1";
    [Export] public string PlayerName = "godot";
    [Export] public float PixelsPerUnit = 8f;

    static readonly System.Net.Http.HttpClient Http = new System.Net.Http.HttpClient();
    ZoneConnection _conn;
    Replica _replica;
    Predictor<MoveState, MoveInput> _predictor;
    List<Pillar> _pillars = new List<Pillar>();
    ReplicaFrame _frame;
    int _playerKind = -1;
    double _nextInput;

    async Task<string> Ticket()
    {
        string body = await Http.GetStringAsync(Host + "/dev/ticket?zone=" + Zone + "&name=" + PlayerName);
        return Regex.Match(body, "\"ticket\"\\s*:\\s*\"([^\"]+)\"").Groups[1].Value;
    }

    public override void _Ready()
    {
        _conn = new ZoneConnection(new ZoneConnectionOptions
        {
            Url = Regex.Replace(Host, "^http", "ws") + "/zones/" + Zone,
            Ticket = Ticket,
        });
        _replica = new Replica(_conn.Clock);
        _conn.Welcomed += (w, info) => _playerKind = ArenaKinds.Bind(w.Schema).Player;
        // Before the predictor's handler, so the pillars are current when it replays inputs.
        _conn.DeltaApplied += (d, info) =>
        {
            if (info.Changes.Spawned.Count > 0 || info.Changes.Removed.Count > 0 || _pillars.Count == 0) _pillars = ArenaRules.ReadPillars(info.Mirror);
        };
        _conn.Closed += c => GD.Print("Zonekeep: " + c.Reason + (c.WillReconnect ? " (reconnecting)" : ""));
        _conn.ReloadRequired += r => GD.PrintErr(r.Message);
        _conn.MovedElsewhere += m => GD.PrintErr(m.Message);
        _replica.Attach(_conn);
        _predictor = new Predictor<MoveState, MoveInput>(new PredictorOptions<MoveState, MoveInput>
        {
            Step = (s, i) => ArenaRules.Step(s, i, ArenaRules.Dt, _pillars),
            Position = s => new Zonekeep.Point(s.X, s.Y),
            EaseMs = 120,
            SnapDistance = 4,
            StepMs = 1000.0 / ArenaRules.TickHz,
        });
        _predictor.Attach(_conn, (e, m) => new MoveState(m.X(e), m.Y(e)));
        _conn.Connect();
    }

    static byte ReadKeys()
    {
        byte dir = 0;
        if (Input.IsActionPressed("ui_up")) dir |= ArenaRules.DirUp;
        if (Input.IsActionPressed("ui_down")) dir |= ArenaRules.DirDown;
        if (Input.IsActionPressed("ui_left")) dir |= ArenaRules.DirLeft;
        if (Input.IsActionPressed("ui_right")) dir |= ArenaRules.DirRight;
        return dir;
    }

    public override void _Process(double delta)
    {
        _conn.Poll();
        double now = _conn.Now;
        byte dir = ReadKeys();
        if (dir != 0 && now >= _nextInput)
        {
            _predictor.Send(_conn, new MoveInput { Dir = dir }, m => m.Encode(), now);
            _nextInput = System.Math.Max(_nextInput + 1000.0 / ArenaRules.TickHz, now - 3000.0 / ArenaRules.TickHz);
        }
        _frame = _replica.Frame(now);
        QueueRedraw();
    }

    public override void _Draw()
    {
        if (_frame == null) return;
        for (int i = 0; i < _frame.Entities.Count; i++)
        {
            ReplicaEntity e = _frame.Entities[i];
            if (e.Id == _conn.ControlledId) continue;
            Color c = e.Kind == _playerKind ? Colors.SkyBlue : Colors.Gray;
            DrawCircle(new Vector2((float)e.X, (float)e.Y) * PixelsPerUnit, ArenaRules.PlayerRadius * PixelsPerUnit, c);
        }
        Zonekeep.Point me;
        if (_predictor.RenderPosition(_conn.Now, out me))
            DrawCircle(new Vector2((float)me.X, (float)me.Y) * PixelsPerUnit, ArenaRules.PlayerRadius * PixelsPerUnit, Colors.Gold);
    }

    public override void _ExitTree()
    {
        if (_conn != null) _conn.Close("scene closed");
    }
}
