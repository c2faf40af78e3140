// ZoneConnection: sending inputs, and keeping those no Delta acknowledged to send again after a resume (§4.2).
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    public sealed partial class ZoneConnection
    {
        /// <summary>Unacknowledged inputs kept to send again after a resume: under the host's default input burst of 30 (§4.6).</summary>
        private const int UnackedKept = 24;

        /// <summary>
        /// Sends an input stamped with the next seq and the view tick; returns the seq, or null when the session is
        /// not open (the input was not sent and must not be predicted). Throws an <see cref="EncodeException"/>
        /// for a payload over 4,096 bytes; no seq is used then.
        /// </summary>
        public uint? SendInput(byte[] payload)
        {
            if (_st != ConnectionState.Open) return null;
            if (_seq >= uint.MaxValue) throw new InvalidOperationException("input seq space exhausted");
            uint seq = _seq + 1;
            long viewTick = Math.Max(0, _viewTickSource != null ? _viewTickSource() : _lastDeltaTick);
            Send(new InputMessage { Seq = seq, ViewTick = viewTick, Payload = payload });
            KeepUnacked(new DatagramInput { Seq = seq, ViewTick = viewTick, Payload = payload });
            _seq = seq;
            return seq;
        }

        private void KeepUnacked(DatagramInput input)
        {
            _sentUnacked.Add(input);
            while (_sentUnacked.Count > UnackedKept) _sentUnacked.RemoveAt(0);
        }

        /// <summary>After a resume: the inputs no Delta acknowledged, oldest first; the list is emptied.</summary>
        private List<DatagramInput> UnackedToResend()
        {
            SortedDictionary<uint, DatagramInput> bySeq = new SortedDictionary<uint, DatagramInput>();
            foreach (DatagramInput i in _sentUnacked) if (i.Seq > _lastAck && !bySeq.ContainsKey(i.Seq)) bySeq[i.Seq] = i;
            _sentUnacked.Clear();
            List<DatagramInput> all = new List<DatagramInput>(bySeq.Values);
            return all.Count > UnackedKept ? all.GetRange(all.Count - UnackedKept, UnackedKept) : all;
        }
    }
}
