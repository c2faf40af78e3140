// A Unity scene script for the arena demo: attach it to an empty GameObject, give it a prefab for players
// and one for everything else, press Play with `zonekeep serve --dev` running. Arrow keys or WASD move;
// the player is predicted with the arena's own rule (ArenaRules.cs beside this folder); everyone else is
// drawn through the Replica, a measured delay behind the zone. World units map to Unity units on the XZ
// plane (the arena's y runs down the screen, so it becomes −z).
//
// Everything runs on Unity's main thread: Update() polls the connection, which hands over what the
// socket's background thread received. This file is a sample: it is not compiled in this repository.
using System.Collections.Generic;
using System.Net.Http;
using System.Text.RegularExpressions;
using System.Threading.Tasks;
using UnityEngine;
using Zonekeep;
using Zonekeep.Samples.Arena;
using ZonekeepSamples;

public sealed class ZonekeepArena : MonoBehaviour
{
    [Tooltip("The dev host's HTTP address")] public string host = "http://127.0.0.1:7350";
    public string zone = "arena-1";
    public string playerName = "unity";
    public GameObject playerPrefab;
    public GameObject otherPrefab;

    static readonly HttpClient Http = new HttpClient();
    ZoneConnection _conn;
    Replica _replica;
    Predictor<MoveState, MoveInput> _predictor;
    List<Pillar> _pillars = new List<Pillar>();
    readonly Dictionary<uint, GameObject> _views = new Dictionary<uint, GameObject>();
    GameObject _me;
    int _playerKind = -1;
    double _nextInput;

    async Task<string> Ticket()
    {
        string body = await Http.GetStringAsync(host + "/dev/ticket?zone=" + zone + "&name=" + playerName);
        return Regex.Match(body, "\"ticket\"\\s*:\\s*\"([^\"]+)\"").Groups[1].Value;
    }

    void Start()
    {
        _conn = new ZoneConnection(new ZoneConnectionOptions
        {
            Url = Regex.Replace(host, "^http", "ws") + "/zones/" + zone,
            Ticket = Ticket,
        });
        _replica = new Replica(_conn.Clock);
        _conn.Welcomed += (w, info) => _playerKind = ArenaKinds.Bind(w.Schema).Player;
        // Before the predictor's handler, so the pillars are current when it replays inputs.
        _conn.DeltaApplied += (d, info) =>
        {
            if (info.Changes.Spawned.Count > 0 || info.Changes.Removed.Count > 0 || _pillars.Count == 0) _pillars = ArenaRules.ReadPillars(info.Mirror);
        };
        _conn.Closed += c => Debug.Log("Zonekeep: " + c.Reason + (c.WillReconnect ? " (reconnecting)" : ""));
        _conn.ReloadRequired += r => Debug.LogError(r.Message);
        _conn.MovedElsewhere += m => Debug.LogWarning(m.Message);
        _replica.Attach(_conn);
        _predictor = new Predictor<MoveState, MoveInput>(new PredictorOptions<MoveState, MoveInput>
        {
            Step = (s, i) => ArenaRules.Step(s, i, ArenaRules.Dt, _pillars),
            Position = s => new Point(s.X, s.Y),
            EaseMs = 120,
            SnapDistance = 4,
            StepMs = 1000.0 / ArenaRules.TickHz,
        });
        _predictor.Attach(_conn, (e, m) => new MoveState(m.X(e), m.Y(e)));
        _me = Instantiate(playerPrefab);
        _me.SetActive(false);
        _conn.Connect();
    }

    static byte ReadKeys()
    {
        byte dir = 0;
        if (Input.GetKey(KeyCode.UpArrow) || Input.GetKey(KeyCode.W)) dir |= ArenaRules.DirUp;
        if (Input.GetKey(KeyCode.DownArrow) || Input.GetKey(KeyCode.S)) dir |= ArenaRules.DirDown;
        if (Input.GetKey(KeyCode.LeftArrow) || Input.GetKey(KeyCode.A)) dir |= ArenaRules.DirLeft;
        if (Input.GetKey(KeyCode.RightArrow) || Input.GetKey(KeyCode.D)) dir |= ArenaRules.DirRight;
        return dir;
    }

    static Vector3 World(double x, double y) { return new Vector3((float)x, 0, -(float)y); }

    void Update()
    {
        _conn.Poll();
        double now = _conn.Now;
        // One input per zone tick while a direction is held.
        byte dir = ReadKeys();
        if (dir != 0 && now >= _nextInput)
        {
            _predictor.Send(_conn, new MoveInput { Dir = dir }, m => m.Encode(), now);
            _nextInput = System.Math.Max(_nextInput + 1000.0 / ArenaRules.TickHz, now - 3000.0 / ArenaRules.TickHz);
        }
        ReplicaFrame frame = _replica.Frame(now);
        for (int i = 0; i < frame.Left.Count; i++)
        {
            GameObject go;
            if (_views.TryGetValue(frame.Left[i], out go))
            {
                Destroy(go);
                _views.Remove(frame.Left[i]);
            }
        }
        for (int i = 0; i < frame.Entities.Count; i++)
        {
            ReplicaEntity e = frame.Entities[i];
            if (e.Id == _conn.ControlledId) continue;
            GameObject go;
            if (!_views.TryGetValue(e.Id, out go))
            {
                go = Instantiate(e.Kind == _playerKind ? playerPrefab : otherPrefab);
                _views[e.Id] = go;
            }
            go.transform.position = World(e.X, e.Y);
        }
        Point me;
        _me.SetActive(_predictor.RenderPosition(now, out me));
        if (_me.activeSelf) _me.transform.position = World(me.X, me.Y);
    }

    void OnDestroy()
    {
        if (_conn != null) _conn.Close("scene closed");
    }
}
