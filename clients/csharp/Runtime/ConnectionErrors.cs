// Why a ZoneConnection did not follow a Redirect or a Transfer, or ended: the errors its events and its
// Connect task carry.
using System;

namespace Zonekeep
{
    /// <summary>Why a Redirect was not followed.</summary>
    public enum RedirectErrorKind
    {
        /// <summary>A Redirect after the three an attempt may follow.</summary>
        TooMany,
        /// <summary>A URL that is not ws:// or wss://.</summary>
        Scheme,
    }

    /// <summary>
    /// A Redirect the connection would not follow (§5.3.1): TooMany (the attempt failed; the next starts at the
    /// entry URL again) or Scheme (the connection stops). The <see cref="CloseInfo.Error"/> of the attempt.
    /// </summary>
    public sealed class RedirectException : Exception
    {
        /// <summary>Why the Redirect was refused.</summary>
        public RedirectErrorKind Kind { get; }
        /// <summary>The URL it named.</summary>
        public string Url { get; }

        /// <summary>An error for a refused Redirect to <paramref name="url"/>.</summary>
        public RedirectException(RedirectErrorKind kind, string url)
            : base(kind == RedirectErrorKind.TooMany ? "too many redirects: another after " + Limits.Redirects : "redirected to a URL that is not ws:// or wss://: " + url)
        {
            Kind = kind;
            Url = url;
        }
    }

    /// <summary>What went wrong with a Transfer.</summary>
    public enum TransferErrorKind
    {
        /// <summary>Its URL is not ws:// or wss:// (the Transfer is ignored).</summary>
        Url,
        /// <summary>An attempt at the new zone failed.</summary>
        Attempt,
        /// <summary>The credential was already used and no Welcome of the new zone gave a token.</summary>
        Replayed,
        /// <summary>The credential's lifetime ran out.</summary>
        Expired,
    }

    /// <summary>A Transfer the connection could not follow (yet). Without <see cref="WillRetry"/> the connection closes next.</summary>
    public sealed class TransferException : Exception
    {
        /// <summary>What went wrong.</summary>
        public TransferErrorKind Kind { get; }
        /// <summary>The Kick of the failed attempt, if the host sent one.</summary>
        public Kick Kick { get; }
        /// <summary>Whether the move goes on.</summary>
        public bool WillRetry { get; }

        /// <summary>An error of <paramref name="kind"/>.</summary>
        public TransferException(TransferErrorKind kind, string message, Kick kick, bool willRetry) : base(message)
        {
            Kind = kind;
            Kick = kick;
            WillRetry = willRetry;
        }
    }

    /// <summary>The host refused this client's content version (CONTENT_OUTDATED, §4.1.2).</summary>
    public sealed class ContentOutdatedException : Exception
    {
        /// <summary>The Kick, or null when only its close code (4027) arrived.</summary>
        public Kick Kick { get; }

        /// <summary>An error for <paramref name="kick"/>.</summary>
        public ContentOutdatedException(Kick kick) : base(ZoneConnection.ReloadText(kick)) { Kick = kick; }
    }

    /// <summary>The player's character was taken into another zone (CHARACTER_MOVED, §5.3).</summary>
    public sealed class CharacterMovedException : Exception
    {
        /// <summary>The Kick, or null when only its close code (4029) arrived.</summary>
        public Kick Kick { get; }

        /// <summary>An error for <paramref name="kick"/>.</summary>
        public CharacterMovedException(Kick kick) : base(ZoneConnection.MovedElsewhereText(kick)) { Kick = kick; }
    }

    /// <summary>The connection ended before its first Welcome.</summary>
    public sealed class ConnectionClosedException : Exception
    {
        /// <summary>How it ended.</summary>
        public CloseInfo Info { get; }

        /// <summary>An error for <paramref name="info"/>.</summary>
        public ConnectionClosedException(CloseInfo info) : base("connection closed before Welcome: " + info.Reason) { Info = info; }
    }
}
