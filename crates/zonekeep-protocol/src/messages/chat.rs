//! Chat (PROTOCOL.md §4.7–§4.9 and §5.11–§5.12, protocol version 11): the client messages Chat,
//! ChatReport and ChatHistory and the server messages ChatLines and ChatReply, with their
//! encoders and total decoders. [`ClientMessage`](super::ClientMessage) and
//! [`ServerMessage`](super::ServerMessage) carry them and dispatch here by tag.
//!
//! A session that negotiated a version before [`CHAT_PROTOCOL`] never receives these messages,
//! and a Chat, ChatReport or ChatHistory in such a session is a protocol error; the bytes
//! themselves do not say which version sent them, so that rule is the host's, not the decoder's.
//!
//! Every field uses the §2 primitives. Lengths and counts are checked against their limits
//! ([`crate::limits`]) before anything is read or allocated, and the first failure in wire order
//! is the one reported.

use crate::error::{DecodeError, EncodeError};
use crate::limits::{
    MAX_CHAT_BODY, MAX_CHAT_CHANNEL, MAX_CHAT_LINES, MAX_CHAT_REPLY_TEXT, MAX_CHAT_REPORT_LINES,
    MAX_CHAT_REPORT_REASON, MAX_CHAT_SENDER,
};
use crate::wire::{put_str_named, put_varint, Reader};

/// The version that added chat (§4.7–§4.9, §5.11–§5.12) and [`KickCode::BANNED`](super::KickCode::BANNED):
/// a host sends ChatLines, ChatReply and BANNED only to a session that negotiated this version or
/// a later one, and treats a Chat, ChatReport or ChatHistory from an older session as a protocol
/// error.
pub const CHAT_PROTOCOL: u32 = 11;

/// Welcome's feature bit 0 (version 11): the host keeps chat, so the session hears its channels'
/// history and lines and may speak. A version 11 Welcome without it comes from a host without a
/// store, which refuses every chat message.
pub const FEATURE_CHAT: u32 = 1;

/// The `history` bit of a ChatLines' flags (§5.11): the lines come from the store, sent on attach
/// or in answer to a ChatHistory, oldest first. Every other bit must be 0.
const CHAT_LINES_HISTORY: u8 = 0x01;

/// A line the client says on a channel (§4.7, tag `0x06`, version 11). The host answers with a
/// [`ChatReply`] carrying `reference` only when it refuses the line; an accepted line comes back
/// to every listener of the channel, the sender's own sessions included, in a [`ChatLines`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chat {
    /// The client's number for this line (the wire's `ref`), echoed in a ChatReply.
    pub reference: u32,
    /// The channel, 1..=300 bytes: `zone:<zone id>`, `group:<group name>` or `dm:<principal>`
    /// (the other principal of a direct message).
    pub channel: String,
    /// The line, 1..=1024 bytes of UTF-8 (a host may accept fewer, `chat_max_line`).
    pub body: String,
}

/// A report of lines of a channel to the moderators (§4.8, tag `0x07`, version 11). The host
/// answers with a [`ChatReply`]: [`ChatReplyCode::OK`] with the report's id as its text once the
/// report is filed, [`ChatReplyCode::NOT_FOUND`] when the channel does not keep a named line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatReport {
    /// The client's number for this report (the wire's `ref`), echoed in the ChatReply.
    pub reference: u32,
    /// The channel the lines were said on (≤ 300 bytes).
    pub channel: String,
    /// The `seq` of each reported line: 1..=20 of them.
    pub seqs: Vec<u64>,
    /// Why, in the reporter's words (≤ 500 bytes; may be empty).
    pub reason: String,
}

/// A request for older lines of a channel (§4.9, tag `0x08`, version 11). The host answers with a
/// [`ChatLines`] flagged `history` whose `reference` is this one's, or with a [`ChatReply`] when
/// it refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatHistory {
    /// The client's number for this request (the wire's `ref`), echoed in the answer.
    pub reference: u32,
    /// The channel (≤ 300 bytes).
    pub channel: String,
    /// Only lines whose `seq` is below this one; 0 = the newest lines.
    pub before: u64,
    /// How many lines at most: 1..=200.
    pub limit: u32,
}

/// One line of a channel, as the store keeps it (§5.11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatLine {
    /// The line's number in its channel: from 1, strictly increasing in commit order.
    pub seq: u64,
    /// Who said it: a principal (≤ 256 bytes), or the sender a back end named.
    pub sender: String,
    /// When a host accepted it, in Unix milliseconds.
    pub sent_at_ms: u64,
    /// The line (≤ 1024 bytes).
    pub body: String,
}

/// Lines of one channel (§5.11, tag `0x8C`, version 11): live lines as they are said, or, flagged
/// `history`, lines from the store sent on attach or in answer to a [`ChatHistory`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatLines {
    /// The channel as this session names it (≤ 300 bytes): a direct message is named after the
    /// other principal, `dm:<other principal>`.
    pub channel: String,
    /// Flag bit 0: the lines come from the store (on attach or for a ChatHistory), oldest first.
    pub history: bool,
    /// The ChatHistory's `ref` this answers (the wire's `ref`); 0 otherwise.
    pub reference: u32,
    /// 0..=200 lines, ascending by `seq`.
    pub lines: Vec<ChatLine>,
}

/// The host's answer to a Chat, ChatReport or ChatHistory it refused, or to a ChatReport it filed
/// (§5.12, tag `0x8D`, version 11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatReply {
    /// The `ref` of the message answered (the wire's `ref`).
    pub reference: u32,
    /// What happened.
    pub code: ChatReplyCode,
    /// When the sender may speak again (Unix milliseconds) for [`ChatReplyCode::MUTED`] and
    /// [`ChatReplyCode::RATE_LIMITED`]; 0 otherwise.
    pub until_ms: u64,
    /// The report's id for [`ChatReplyCode::OK`], otherwise a human-readable detail (≤ 1024 bytes).
    pub text: String,
}

/// A ChatReply code (§5.12). Unknown codes are valid: a newer host may add some.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChatReplyCode(pub u16);

macro_rules! chat_reply_codes {
    ($($name:ident = $v:expr, $doc:expr;)*) => {
        impl ChatReplyCode {
            $(#[doc = $doc] pub const $name: ChatReplyCode = ChatReplyCode($v);)*

            /// The code's name in PROTOCOL.md §5.12, or `None` for a code this version does not
            /// define.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($v => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

chat_reply_codes! {
    OK = 0, "The report was filed; the text is the report's id.";
    RATE_LIMITED = 1, "The sender says lines faster than the host allows; `until_ms` says when it may speak again.";
    MUTED = 2, "The sender is muted on this channel; `until_ms` says until when.";
    NOT_ALLOWED = 3, "The channel is not open to this session (or the host keeps no chat).";
    INVALID = 4, "Empty after trimming, too long for this host, control characters, or a malformed channel.";
    UNAVAILABLE = 5, "The store did not answer or the host's chat queue is full; retry.";
    NOT_FOUND = 6, "A report names lines the channel does not keep.";
}

impl std::fmt::Display for ChatReplyCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "chat reply code {}", self.0),
        }
    }
}

impl Chat {
    /// Writes the fields after the tag; refuses an empty channel or body and values over the limits.
    pub(super) fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.channel.is_empty() {
            return Err(EncodeError::Invalid("Chat channel is empty"));
        }
        if self.body.is_empty() {
            return Err(EncodeError::Invalid("Chat body is empty"));
        }
        put_varint(out, u64::from(self.reference));
        put_str_named(out, "chat channel", &self.channel, MAX_CHAT_CHANNEL)?;
        put_str_named(out, "chat body", &self.body, MAX_CHAT_BODY)
    }

    /// Reads the fields after the tag.
    pub(super) fn read(r: &mut Reader<'_>) -> Result<Chat, DecodeError> {
        let reference = r.varint_u32()?;
        let channel = r.str_named("chat channel", MAX_CHAT_CHANNEL)?;
        if channel.is_empty() {
            return Err(DecodeError::Invalid("Chat channel is empty"));
        }
        let body = r.str_named("chat body", MAX_CHAT_BODY)?;
        if body.is_empty() {
            return Err(DecodeError::Invalid("Chat body is empty"));
        }
        Ok(Chat {
            reference,
            channel: channel.to_owned(),
            body: body.to_owned(),
        })
    }
}

impl ChatReport {
    /// Writes the fields after the tag; refuses no line, more than 20, and values over the limits.
    pub(super) fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.seqs.len() > MAX_CHAT_REPORT_LINES {
            return Err(EncodeError::TooLong {
                what: "reported lines",
                len: self.seqs.len() as u64,
                max: MAX_CHAT_REPORT_LINES as u64,
            });
        }
        if self.seqs.is_empty() {
            return Err(EncodeError::Invalid("ChatReport names no line"));
        }
        put_varint(out, u64::from(self.reference));
        put_str_named(out, "chat channel", &self.channel, MAX_CHAT_CHANNEL)?;
        put_varint(out, self.seqs.len() as u64);
        for seq in &self.seqs {
            put_varint(out, *seq);
        }
        put_str_named(out, "report reason", &self.reason, MAX_CHAT_REPORT_REASON)
    }

    /// Reads the fields after the tag.
    pub(super) fn read(r: &mut Reader<'_>) -> Result<ChatReport, DecodeError> {
        let reference = r.varint_u32()?;
        let channel = r.str_named("chat channel", MAX_CHAT_CHANNEL)?.to_owned();
        let n = r.count("reported lines", MAX_CHAT_REPORT_LINES)?;
        if n == 0 {
            return Err(DecodeError::Invalid("ChatReport names no line"));
        }
        let mut seqs = Vec::with_capacity(n);
        for _ in 0..n {
            seqs.push(r.varint_u64()?);
        }
        let reason = r
            .str_named("report reason", MAX_CHAT_REPORT_REASON)?
            .to_owned();
        Ok(ChatReport {
            reference,
            channel,
            seqs,
            reason,
        })
    }
}

impl ChatHistory {
    /// Writes the fields after the tag; refuses a limit of 0 or over 200.
    pub(super) fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.limit as usize > MAX_CHAT_LINES {
            return Err(EncodeError::TooLong {
                what: "history limit",
                len: u64::from(self.limit),
                max: MAX_CHAT_LINES as u64,
            });
        }
        if self.limit == 0 {
            return Err(EncodeError::Invalid("ChatHistory limit 0"));
        }
        put_varint(out, u64::from(self.reference));
        put_str_named(out, "chat channel", &self.channel, MAX_CHAT_CHANNEL)?;
        put_varint(out, self.before);
        put_varint(out, u64::from(self.limit));
        Ok(())
    }

    /// Reads the fields after the tag.
    pub(super) fn read(r: &mut Reader<'_>) -> Result<ChatHistory, DecodeError> {
        let reference = r.varint_u32()?;
        let channel = r.str_named("chat channel", MAX_CHAT_CHANNEL)?.to_owned();
        let before = r.varint_u64()?;
        let limit = r.count("history limit", MAX_CHAT_LINES)?;
        if limit == 0 {
            return Err(DecodeError::Invalid("ChatHistory limit 0"));
        }
        Ok(ChatHistory {
            reference,
            channel,
            before,
            // At most MAX_CHAT_LINES, checked above.
            limit: limit as u32,
        })
    }
}

impl ChatLines {
    /// Writes the fields after the tag; refuses more than 200 lines and values over the limits.
    pub(super) fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.lines.len() > MAX_CHAT_LINES {
            return Err(EncodeError::TooLong {
                what: "chat lines",
                len: self.lines.len() as u64,
                max: MAX_CHAT_LINES as u64,
            });
        }
        put_str_named(out, "chat channel", &self.channel, MAX_CHAT_CHANNEL)?;
        out.push(if self.history { CHAT_LINES_HISTORY } else { 0 });
        put_varint(out, u64::from(self.reference));
        put_varint(out, self.lines.len() as u64);
        for l in &self.lines {
            put_varint(out, l.seq);
            put_str_named(out, "chat sender", &l.sender, MAX_CHAT_SENDER)?;
            put_varint(out, l.sent_at_ms);
            put_str_named(out, "chat body", &l.body, MAX_CHAT_BODY)?;
        }
        Ok(())
    }

    /// Reads the fields after the tag.
    pub(super) fn read(r: &mut Reader<'_>) -> Result<ChatLines, DecodeError> {
        let channel = r.str_named("chat channel", MAX_CHAT_CHANNEL)?.to_owned();
        let flags = r.u8()?;
        if flags & !CHAT_LINES_HISTORY != 0 {
            return Err(DecodeError::Invalid(
                "ChatLines flags with reserved bits set",
            ));
        }
        let reference = r.varint_u32()?;
        let n = r.count("chat lines", MAX_CHAT_LINES)?;
        // Each line takes at least 4 bytes: no more room is reserved than the input could fill.
        let mut lines = Vec::with_capacity(n.min(r.remaining() / 4));
        for _ in 0..n {
            let seq = r.varint_u64()?;
            let sender = r.str_named("chat sender", MAX_CHAT_SENDER)?.to_owned();
            let sent_at_ms = r.varint_u64()?;
            let body = r.str_named("chat body", MAX_CHAT_BODY)?.to_owned();
            lines.push(ChatLine {
                seq,
                sender,
                sent_at_ms,
                body,
            });
        }
        Ok(ChatLines {
            channel,
            history: flags & CHAT_LINES_HISTORY != 0,
            reference,
            lines,
        })
    }
}

impl ChatReply {
    /// Writes the fields after the tag; refuses a text over 1024 bytes.
    pub(super) fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_varint(out, u64::from(self.reference));
        put_varint(out, u64::from(self.code.0));
        put_varint(out, self.until_ms);
        put_str_named(out, "chat reply text", &self.text, MAX_CHAT_REPLY_TEXT)
    }

    /// Reads the fields after the tag.
    pub(super) fn read(r: &mut Reader<'_>) -> Result<ChatReply, DecodeError> {
        Ok(ChatReply {
            reference: r.varint_u32()?,
            code: ChatReplyCode(r.varint_u16()?),
            until_ms: r.varint_u64()?,
            text: r
                .str_named("chat reply text", MAX_CHAT_REPLY_TEXT)?
                .to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::messages::{ClientMessage, Kick, KickCode, ServerMessage};

    fn crt(m: &ClientMessage) -> Vec<u8> {
        let b = m.to_bytes().unwrap();
        assert_eq!(&ClientMessage::decode(&b).unwrap(), m);
        b
    }

    fn srt(m: &ServerMessage) -> Vec<u8> {
        let b = m.to_bytes(None).unwrap();
        assert_eq!(&ServerMessage::decode(&b, None).unwrap(), m);
        b
    }

    fn chat(channel: &str, body: &str) -> ClientMessage {
        ClientMessage::Chat(Chat {
            reference: 300,
            channel: channel.into(),
            body: body.into(),
        })
    }

    #[test]
    fn chat_bytes_and_empty_fields() {
        assert_eq!(
            crt(&chat("dm:b", "hi")),
            [0x06, 0xac, 0x02, 4, b'd', b'm', b':', b'b', 2, b'h', b'i']
        );
        assert_eq!(
            chat("", "hi").to_bytes(),
            Err(EncodeError::Invalid("Chat channel is empty"))
        );
        assert_eq!(
            chat("zone:a", "").to_bytes(),
            Err(EncodeError::Invalid("Chat body is empty"))
        );
        // Refused in wire order: the empty channel before the missing body.
        assert_eq!(
            ClientMessage::decode(&[0x06, 1, 0]),
            Err(DecodeError::Invalid("Chat channel is empty"))
        );
        assert_eq!(
            ClientMessage::decode(&[0x06, 1, 1, b'z', 0]),
            Err(DecodeError::Invalid("Chat body is empty"))
        );
        // At the limits, and one byte over.
        crt(&chat(&"c".repeat(300), &"é".repeat(512)));
        assert!(matches!(
            chat(&"c".repeat(301), "x").to_bytes(),
            Err(EncodeError::TooLong {
                what: "chat channel",
                ..
            })
        ));
        assert!(matches!(
            chat("c", &"x".repeat(1025)).to_bytes(),
            Err(EncodeError::TooLong {
                what: "chat body",
                ..
            })
        ));
        // A declared length over the limit is refused before it is read.
        assert_eq!(
            ClientMessage::decode(&[0x06, 1, 0xad, 0x02]),
            Err(DecodeError::TooLong {
                what: "chat channel",
                len: 301,
                max: 300
            })
        );
        assert_eq!(
            ClientMessage::decode(&[0x06, 1, 1, b'z', 0x81, 0x08]),
            Err(DecodeError::TooLong {
                what: "chat body",
                len: 1025,
                max: 1024
            })
        );
        assert_eq!(
            ClientMessage::decode(&[0x06, 1, 1, b'z', 1, 0xff]),
            Err(DecodeError::InvalidUtf8)
        );
    }

    #[test]
    fn chat_report_counts() {
        let report = |seqs: Vec<u64>| {
            ClientMessage::ChatReport(ChatReport {
                reference: 7,
                channel: "zone:a".into(),
                seqs,
                reason: String::new(),
            })
        };
        let b = crt(&report(vec![1, 300, u64::MAX]));
        assert_eq!(&b[..9], [0x07, 7, 6, b'z', b'o', b'n', b'e', b':', b'a']);
        assert_eq!(b[9], 3);
        assert_eq!(b.last(), Some(&0));
        crt(&report((1..=20).collect()));
        assert_eq!(
            report(vec![]).to_bytes(),
            Err(EncodeError::Invalid("ChatReport names no line"))
        );
        assert!(matches!(
            report((1..=21).collect()).to_bytes(),
            Err(EncodeError::TooLong {
                what: "reported lines",
                len: 21,
                max: 20
            })
        ));
        let head = [0x07, 7, 1, b'z'];
        assert_eq!(
            ClientMessage::decode(&[&head[..], &[0, 0]].concat()),
            Err(DecodeError::Invalid("ChatReport names no line"))
        );
        assert!(matches!(
            ClientMessage::decode(&[&head[..], &[21]].concat()),
            Err(DecodeError::TooLong {
                what: "reported lines",
                ..
            })
        ));
        // The reason: at most 500 bytes, and present even when empty.
        let mut long = report(vec![1]);
        if let ClientMessage::ChatReport(r) = &mut long {
            r.reason = "r".repeat(500);
        }
        crt(&long);
        if let ClientMessage::ChatReport(r) = &mut long {
            r.reason.push('r');
        }
        assert!(long.to_bytes().is_err());
        assert_eq!(
            ClientMessage::decode(&[&head[..], &[1, 5]].concat()),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn chat_history_limits() {
        let history = |before, limit| {
            ClientMessage::ChatHistory(ChatHistory {
                reference: 1,
                channel: "group:g".into(),
                before,
                limit,
            })
        };
        let b = crt(&history(1000, 50));
        assert_eq!(&b[b.len() - 3..], [0xe8, 0x07, 50]);
        crt(&history(0, 1));
        crt(&history(u64::MAX, 200));
        assert_eq!(
            history(0, 0).to_bytes(),
            Err(EncodeError::Invalid("ChatHistory limit 0"))
        );
        assert!(matches!(
            history(0, 201).to_bytes(),
            Err(EncodeError::TooLong { len: 201, .. })
        ));
        let head = [0x08, 1, 1, b'z', 0];
        assert_eq!(
            ClientMessage::decode(&[&head[..], &[0]].concat()),
            Err(DecodeError::Invalid("ChatHistory limit 0"))
        );
        assert!(matches!(
            ClientMessage::decode(&[&head[..], &[0xc9, 0x01]].concat()),
            Err(DecodeError::TooLong {
                what: "history limit",
                ..
            })
        ));
        assert_eq!(
            ClientMessage::decode(&[&head[..], &[5, 0]].concat()),
            Err(DecodeError::TrailingBytes(1))
        );
    }

    fn line(seq: u64, sender: &str, body: &str) -> ChatLine {
        ChatLine {
            seq,
            sender: sender.into(),
            sent_at_ms: 1_700_000_000_000 + seq,
            body: body.into(),
        }
    }

    #[test]
    fn chat_lines_flags_and_counts() {
        let lines = |history, reference, lines| {
            ServerMessage::ChatLines(ChatLines {
                channel: "zone:a".into(),
                history,
                reference,
                lines,
            })
        };
        let b = srt(&lines(false, 0, vec![line(1, "ann", "gg")]));
        assert_eq!(
            &b[..10],
            [0x8c, 6, b'z', b'o', b'n', b'e', b':', b'a', 0, 0]
        );
        let b = srt(&lines(true, 9, vec![]));
        assert_eq!(b, [0x8c, 6, b'z', b'o', b'n', b'e', b':', b'a', 1, 9, 0]);
        srt(&lines(
            true,
            0,
            (1..=200).map(|s| line(s, "p", "x")).collect(),
        ));
        assert!(matches!(
            lines(false, 0, (1..=201).map(|s| line(s, "p", "x")).collect()).to_bytes(None),
            Err(EncodeError::TooLong {
                what: "chat lines",
                ..
            })
        ));
        assert!(lines(false, 0, vec![line(1, &"s".repeat(257), "x")])
            .to_bytes(None)
            .is_err());
        for flags in [2u8, 3, 0x80] {
            assert_eq!(
                ServerMessage::decode(&[0x8c, 1, b'z', flags, 0, 0], None),
                Err(DecodeError::Invalid(
                    "ChatLines flags with reserved bits set"
                ))
            );
        }
        assert!(matches!(
            ServerMessage::decode(&[0x8c, 1, b'z', 0, 0, 0xc9, 0x01], None),
            Err(DecodeError::TooLong {
                what: "chat lines",
                len: 201,
                max: 200
            })
        ));
        // A count far beyond the bytes present reserves no more than they could fill.
        assert_eq!(
            ServerMessage::decode(&[0x8c, 1, b'z', 0, 0, 200], None),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn chat_reply_codes() {
        let b = srt(&ServerMessage::ChatReply(ChatReply {
            reference: 300,
            code: ChatReplyCode::MUTED,
            until_ms: 1000,
            text: "m".into(),
        }));
        assert_eq!(b, [0x8d, 0xac, 0x02, 2, 0xe8, 0x07, 1, b'm']);
        // Unknown codes are kept as they are.
        srt(&ServerMessage::ChatReply(ChatReply {
            reference: 0,
            code: ChatReplyCode(u16::MAX),
            until_ms: 0,
            text: String::new(),
        }));
        assert_eq!(
            ServerMessage::decode(&[0x8d, 0, 0x80, 0x80, 0x04, 0, 0], None),
            Err(DecodeError::Overflow)
        );
        let names: Vec<_> = (0..=7).map(|c| ChatReplyCode(c).name()).collect();
        assert_eq!(
            names,
            [
                Some("OK"),
                Some("RATE_LIMITED"),
                Some("MUTED"),
                Some("NOT_ALLOWED"),
                Some("INVALID"),
                Some("UNAVAILABLE"),
                Some("NOT_FOUND"),
                None
            ]
        );
        assert_eq!(ChatReplyCode::NOT_FOUND.to_string(), "NOT_FOUND");
        assert_eq!(ChatReplyCode(99).to_string(), "chat reply code 99");
        assert!(ServerMessage::ChatReply(ChatReply {
            reference: 0,
            code: ChatReplyCode::OK,
            until_ms: 0,
            text: "t".repeat(1025),
        })
        .to_bytes(None)
        .is_err());
    }

    #[test]
    fn banned_reaches_older_sessions_as_join_refused() {
        assert_eq!(CHAT_PROTOCOL, 11);
        assert_eq!(KickCode::BANNED.name(), Some("BANNED"));
        for version in [2, 8, 9, 10] {
            assert_eq!(
                KickCode::BANNED.for_version(version),
                KickCode::JOIN_REFUSED
            );
        }
        for version in [CHAT_PROTOCOL, CHAT_PROTOCOL + 1, u32::MAX] {
            assert_eq!(KickCode::BANNED.for_version(version), KickCode::BANNED);
        }
        assert!(!KickCode::BANNED.resumes_elsewhere());
        let b = srt(&ServerMessage::Kick(Kick {
            code: KickCode::BANNED.for_version(10),
            reason: "r".into(),
        }));
        assert_eq!(b, [0x84, 19, 1, b'r']);
    }

    #[test]
    fn chat_tags_belong_to_their_direction() {
        // A chat server tag sent to the server, a chat client tag sent to the client.
        assert_eq!(
            ClientMessage::decode(&[0x8c]),
            Err(DecodeError::UnknownTag(0x8c))
        );
        assert_eq!(
            ServerMessage::decode(&[0x06], None),
            Err(DecodeError::UnknownTag(0x06))
        );
        assert_eq!(ClientMessage::decode(&[0x06]), Err(DecodeError::Truncated));
        assert_eq!(
            ServerMessage::decode(&[0x8d], None),
            Err(DecodeError::Truncated)
        );
    }
}
