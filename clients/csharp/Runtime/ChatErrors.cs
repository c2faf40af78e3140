// Why a chat call failed (protocol version 11): the host refused it (ChatRefusedException, a ChatReply with a
// non-zero code), or it failed on the client's side (ChatException); and the ban a Kick tells (BanInfo).
using System;
using System.Globalization;
using System.Text.RegularExpressions;

namespace Zonekeep
{
    /// <summary>
    /// A chat message the host refused (a ChatReply with a non-zero code): what a <see cref="ChatClient"/> task
    /// fails with. <see cref="Code"/> is a <see cref="ChatReplyCode"/>, <see cref="Name"/> its name (<c>MUTED</c>,
    /// <c>RATE_LIMITED</c>, …, or <c>UNKNOWN(n)</c>), <see cref="UntilMs"/> when the sender may speak again (UNIX ms;
    /// only with MUTED and RATE_LIMITED, 0 otherwise), <see cref="Text"/> the host's words.
    /// </summary>
    public sealed class ChatRefusedException : Exception
    {
        /// <summary>The ChatReply code.</summary>
        public int Code { get; }
        /// <summary>The code's name.</summary>
        public string Name { get; }
        /// <summary>When the sender may speak again, UNIX ms; 0 unless MUTED or RATE_LIMITED.</summary>
        public long UntilMs { get; }
        /// <summary>The host's reason, as it wrote it (may be empty).</summary>
        public string Text { get; }
        /// <summary>The ref of the refused message.</summary>
        public uint Ref { get; }

        /// <summary>The refusal a ChatReply tells.</summary>
        public ChatRefusedException(ChatReply reply) : base(ChatReplyCode.Name(reply.Code) + ": " + (reply.Text.Length > 0 ? reply.Text : DefaultText(reply.Code)))
        {
            Code = reply.Code;
            Name = ChatReplyCode.Name(reply.Code);
            UntilMs = reply.UntilMs;
            Text = reply.Text;
            Ref = reply.Ref;
        }

        /// <summary>
        /// True when the same message may go through later unchanged: RATE_LIMITED (after <see cref="UntilMs"/>) and
        /// UNAVAILABLE; not MUTED, NOT_ALLOWED, INVALID or NOT_FOUND.
        /// </summary>
        public bool Retryable { get { return Code == ChatReplyCode.RateLimited || Code == ChatReplyCode.Unavailable; } }

        private static string DefaultText(int code)
        {
            switch (code)
            {
                case ChatReplyCode.RateLimited: return "too many messages too fast";
                case ChatReplyCode.Muted: return "muted by a moderator";
                case ChatReplyCode.NotAllowed: return "this channel is not open to this session";
                case ChatReplyCode.Invalid: return "the message is empty, too long, or has control characters";
                case ChatReplyCode.Unavailable: return "chat is unavailable right now; try again";
                case ChatReplyCode.NotFound: return "the channel no longer keeps those lines";
                default: return "the host refused the message";
            }
        }
    }

    /// <summary>Why a chat call failed on the client's side.</summary>
    public enum ChatErrorKind
    {
        /// <summary>The session speaks a version older than chat (the host is older).</summary>
        Unsupported,
        /// <summary>No session is open (connecting, reconnecting, moving to another zone).</summary>
        NotOpen,
        /// <summary>An empty or over-long channel, body or request.</summary>
        Invalid,
        /// <summary>No answer within <see cref="ChatOptions.TimeoutMs"/>.</summary>
        Timeout,
        /// <summary>The session ended before a report or history request was answered.</summary>
        Disconnected,
        /// <summary>The connection closed for good.</summary>
        Closed,
    }

    /// <summary>A chat call that failed without a refusal from the host.</summary>
    public sealed class ChatException : Exception
    {
        /// <summary>What went wrong.</summary>
        public ChatErrorKind Kind { get; }

        /// <summary>An error of <paramref name="kind"/>.</summary>
        public ChatException(ChatErrorKind kind, string message) : base(message) { Kind = kind; }
    }

    /// <summary>A ban a Kick tells (<c>banned from &lt;scope&gt; until &lt;until_ms&gt;: &lt;reason&gt;</c>).</summary>
    public sealed class BanInfo
    {
        private static readonly Regex Form = new Regex(@"^banned from (\S+) until (\d+): ?([\s\S]*)$", RegexOptions.CultureInvariant);

        /// <summary><c>fleet</c>, <c>zone:&lt;id&gt;</c> or <c>group:&lt;name&gt;</c>.</summary>
        public string Scope = string.Empty;
        /// <summary>When the ban ends, UNIX ms.</summary>
        public long UntilMs;
        /// <summary>The moderator's (or back end's) reason; may be empty.</summary>
        public string Reason = string.Empty;

        /// <summary>
        /// The ban a Kick tells, or null when it tells none: a Kick BANNED (version 11), or the JOIN_REFUSED a
        /// session of an older version is sent instead, whose reason has the same form. A Kick BANNED whose reason
        /// does not have the form gives an empty scope and 0 with the whole reason.
        /// </summary>
        public static BanInfo Of(Kick kick)
        {
            if (kick == null || (kick.Code != KickCode.Banned && kick.Code != KickCode.JoinRefused)) return null;
            Match m = Form.Match(kick.Reason ?? string.Empty);
            long until;
            if (!m.Success || !long.TryParse(m.Groups[2].Value, NumberStyles.None, CultureInfo.InvariantCulture, out until))
                return kick.Code == KickCode.Banned ? new BanInfo { Reason = kick.Reason ?? string.Empty } : null;
            return new BanInfo { Scope = m.Groups[1].Value, UntilMs = until, Reason = m.Groups[3].Value };
        }
    }
}
