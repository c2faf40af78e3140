// How a ZoneConnection is set up: the entry URL, where tickets come from, sockets, timers and tuning.
using System;
using System.Threading.Tasks;

namespace Zonekeep
{
    /// <summary>Options of a <see cref="ZoneConnection"/>.</summary>
    public sealed class ZoneConnectionOptions
    {
        /// <summary>
        /// WebSocket URL of the zone, e.g. <c>ws://127.0.0.1:7350/zones/arena-1</c>: the entry URL. Every reconnect
        /// starts here again, never at a URL a Redirect named.
        /// </summary>
        public string Url;
        /// <summary>
        /// Gets a fresh ticket from the game's backend: called for the first join, after the grace window, and
        /// when the host refuses a resume for a reason a new ticket fixes. It may complete later (an HTTP call);
        /// the connection waits for it without blocking the game's thread.
        /// </summary>
        public Func<Task<string>> Ticket;
        /// <summary>Opens sockets (default: <see cref="WebSocketTransport.Connect"/>).</summary>
        public Func<string, ISocket> Socket;
        /// <summary>Time and timers (default: a <see cref="GameLoopScheduler"/>, run by <see cref="ZoneConnection.Poll"/>).</summary>
        public IScheduler Scheduler;
        /// <summary>Protocol versions offered (default: <see cref="ProtocolVersions.Supported"/>).</summary>
        public uint[] Versions;
        /// <summary>The game content version this client was built for, sent in Hello (default empty = none).</summary>
        public string ContentVersion = string.Empty;
        /// <summary>Ping period in ms (default 1000).</summary>
        public double PingIntervalMs = 1000;
        /// <summary>Give up on a handshake after this many ms without Welcome, Redirects included (default 10000).</summary>
        public double HandshakeTimeoutMs = 10000;
        /// <summary>Reconnect tuning.</summary>
        public ReconnectOptions Reconnect = new ReconnectOptions();
        /// <summary>Server clock tuning.</summary>
        public ClockOptions Clock;
        /// <summary>Chat tuning (<see cref="ZoneConnection.Chat"/>, protocol version 11; default: <see cref="ChatOptions"/>'s).</summary>
        public ChatOptions Chat;
    }
}
