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

mod client;
mod server;

pub use client::{Chat, ChatHistory, ChatReport};
pub use server::{ChatLine, ChatLines, ChatReply, ChatReplyCode};

/// The version that added chat (§4.7–§4.9, §5.11–§5.12) and [`KickCode::BANNED`](super::KickCode::BANNED):
/// a host sends ChatLines, ChatReply and BANNED only to a session that negotiated this version or
/// a later one, and treats a Chat, ChatReport or ChatHistory from an older session as a protocol
/// error.
pub const CHAT_PROTOCOL: u32 = 11;

/// Welcome's feature bit 0 (version 11): the host keeps chat, so the session hears its channels'
/// history and lines and may speak. A version 11 Welcome without it comes from a host without a
/// store, which refuses every chat message.
pub const FEATURE_CHAT: u32 = 1;

#[cfg(test)]
mod tests;
