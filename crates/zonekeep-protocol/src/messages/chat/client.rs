//! What a client says in chat (§4.7–§4.9): a line on a channel, a report of lines to the
//! moderators, and a request for a channel's older lines.

use crate::error::{DecodeError, EncodeError};
use crate::limits::{
    MAX_CHAT_BODY, MAX_CHAT_CHANNEL, MAX_CHAT_LINES, MAX_CHAT_REPORT_LINES, MAX_CHAT_REPORT_REASON,
};
use crate::wire::{put_str_named, put_varint, Reader};

/// A line the client says on a channel (§4.7, tag `0x06`, version 11). The host answers with a
/// [`ChatReply`] carrying `reference` only when it refuses the line; an accepted line comes back
/// to every listener of the channel, the sender's own sessions included, in a [`ChatLines`].
///
/// [`ChatLines`]: super::ChatLines
/// [`ChatReply`]: super::ChatReply
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
///
/// [`ChatReply`]: super::ChatReply
/// [`ChatReplyCode::OK`]: super::ChatReplyCode::OK
/// [`ChatReplyCode::NOT_FOUND`]: super::ChatReplyCode::NOT_FOUND
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
///
/// [`ChatLines`]: super::ChatLines
/// [`ChatReply`]: super::ChatReply
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

impl Chat {
    /// Writes the fields after the tag; refuses an empty channel or body and values over the limits.
    pub(in crate::messages) fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
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
    pub(in crate::messages) fn read(r: &mut Reader<'_>) -> Result<Chat, DecodeError> {
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
    pub(in crate::messages) fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
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
    pub(in crate::messages) fn read(r: &mut Reader<'_>) -> Result<ChatReport, DecodeError> {
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
    pub(in crate::messages) fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
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
    pub(in crate::messages) fn read(r: &mut Reader<'_>) -> Result<ChatHistory, DecodeError> {
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
