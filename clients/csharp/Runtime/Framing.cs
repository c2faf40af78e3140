// The length prefix of a WebTransport control stream (PROTOCOL.md §1.1): a canonical LEB128 varint of
// the u32 width (not QUIC's variable-length integer), then that many bytes of one message. The C# SDK
// speaks WebSocket only; the framing is here because it is part of the codec the fixtures pin, and
// what a native WebTransport transport would read its control stream with.
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>Length-prefixed messages of a WebTransport control stream (§1.1).</summary>
    public static class Framing
    {
        /// <summary>One message with its length prefix.</summary>
        public static byte[] Frame(byte[] message)
        {
            Writer w = new Writer(message.Length + 5);
            w.Varint((ulong)(uint)message.Length).Raw(message, 0, message.Length);
            return w.ToArray();
        }
    }

    /// <summary>
    /// Splits the bytes of a control stream into messages, whatever the chunking. A length over
    /// <see cref="MaxMessage"/> is refused (<c>too_long</c>) before anything is buffered, so it never holds
    /// more than one message of at most that many bytes.
    /// </summary>
    public sealed class MessageFramer
    {
        /// <summary>The longest message accepted (the direction's §7 limit).</summary>
        public int MaxMessage { get; }

        private readonly byte[] _header = new byte[5];
        private int _headerLen;
        private byte[] _body;
        private int _filled;

        /// <summary>A framer refusing messages over <paramref name="maxMessage"/> bytes (default: 1 MiB).</summary>
        public MessageFramer(int maxMessage = Limits.ServerMessage) { MaxMessage = maxMessage; }

        /// <summary>Bytes of an incomplete message held (its header included).</summary>
        public int Buffered { get { return _headerLen + _filled; } }

        /// <summary>
        /// Takes the next chunk of the stream; returns the messages it completed, in order. Throws a
        /// <see cref="ProtocolException"/> for a malformed or oversized length (the stream is then unusable).
        /// </summary>
        public List<byte[]> Push(byte[] chunk, int offset, int count)
        {
            List<byte[]> out_ = new List<byte[]>();
            int off = offset;
            int end = offset + count;
            while (off < end)
            {
                if (_body == null)
                {
                    byte b = chunk[off++];
                    _header[_headerLen++] = b;
                    if ((b & 0x80) != 0)
                    {
                        if (_headerLen >= 5) throw new ProtocolException(DecodeErrorKind.Overflow, "frame length exceeds u32");
                        continue;
                    }
                    uint len = new Reader(_header, 0, _headerLen).VarintU32();
                    _headerLen = 0;
                    if (len > (uint)MaxMessage) throw new ProtocolException(DecodeErrorKind.TooLong, "framed message of " + len + " bytes > " + MaxMessage);
                    if (len == 0)
                    {
                        out_.Add(new byte[0]);
                        continue;
                    }
                    _body = new byte[len];
                    _filled = 0;
                    continue;
                }
                int take = Math.Min(_body.Length - _filled, end - off);
                Buffer.BlockCopy(chunk, off, _body, _filled, take);
                _filled += take;
                off += take;
                if (_filled == _body.Length)
                {
                    out_.Add(_body);
                    _body = null;
                    _filled = 0;
                }
            }
            return out_;
        }

        /// <summary>Takes a whole chunk.</summary>
        public List<byte[]> Push(byte[] chunk) { return Push(chunk, 0, chunk.Length); }
    }
}
