//! What the host tells a client in chat (§5.11–§5.12): a channel's lines, live or from the
//! store, and its answer to a chat message it refused or a report it filed, with the codes of
//! that answer.

use crate::error::{DecodeError, EncodeError};
use crate::limits::{
    MAX_CHAT_BODY, MAX_CHAT_CHANNEL, MAX_CHAT_LINES, MAX_CHAT_REPLY_TEXT, MAX_CHAT_SENDER,
};
use crate::wire::{put_str_named, put_varint, Reader};

/// The `history` bit of a ChatLines' flags (§5.11): the lines come from the store, sent on attach
/// or in answer to a ChatHistory, oldest first. Every other bit must be 0.
const CHAT_LINES_HISTORY: u8 = 0x01;

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
///
/// [`ChatHistory`]: super::ChatHistory
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

impl ChatLines {
    /// Writes the fields after the tag; refuses more than 200 lines and values over the limits.
    pub(in crate::messages) fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
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
    pub(in crate::messages) fn read(r: &mut Reader<'_>) -> Result<ChatLines, DecodeError> {
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
    pub(in crate::messages) fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_varint(out, u64::from(self.reference));
        put_varint(out, u64::from(self.code.0));
        put_varint(out, self.until_ms);
        put_str_named(out, "chat reply text", &self.text, MAX_CHAT_REPLY_TEXT)
    }

    /// Reads the fields after the tag.
    pub(in crate::messages) fn read(r: &mut Reader<'_>) -> Result<ChatReply, DecodeError> {
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
