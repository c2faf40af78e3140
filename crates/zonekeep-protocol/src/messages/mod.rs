//! Every message of PROTOCOL.md §4–§5 as an owned value with `encode` and a total `decode`.

pub mod chat;
pub mod client;
pub mod server;

pub use chat::{
    Chat, ChatHistory, ChatLine, ChatLines, ChatReply, ChatReplyCode, ChatReport, CHAT_PROTOCOL,
    FEATURE_CHAT,
};
pub use client::{
    negotiate_version, ClientMessage, Hello, Input, Inputs, Ping, ResumeFrom, Resync,
    RESUME_FROM_VERSION,
};
pub use server::{
    peek_tag, write_events, DeltaContext, Entries, Events, InputRefused, Kick, KickCode,
    KnownSetCheck, Pong, Redirect, Role, ServerMessage, Transfer, Welcome, CHARACTER_PROTOCOL,
    CONTENT_VERSION_PROTOCOL, ENTRIES_PROTOCOL, HALT_PROTOCOL, TRANSFER_PROTOCOL,
};

/// Message tags (PROTOCOL.md §1: client → server `0x01..=0x7f`, server → client `0x80..=0xff`).
pub mod tag {
    /// Hello (client).
    pub const HELLO: u8 = 0x01;
    /// Input (client).
    pub const INPUT: u8 = 0x02;
    /// Ping (client).
    pub const PING: u8 = 0x03;
    /// Resync (client, protocol version 2).
    pub const RESYNC: u8 = 0x04;
    /// Inputs (client datagram, protocol version 6).
    pub const INPUTS: u8 = 0x05;
    /// Chat (client, protocol version 11).
    pub const CHAT: u8 = 0x06;
    /// ChatReport (client, protocol version 11).
    pub const CHAT_REPORT: u8 = 0x07;
    /// ChatHistory (client, protocol version 11).
    pub const CHAT_HISTORY: u8 = 0x08;
    /// Welcome (server).
    pub const WELCOME: u8 = 0x81;
    /// Delta (server).
    pub const DELTA: u8 = crate::delta::TAG_DELTA;
    /// Pong (server).
    pub const PONG: u8 = 0x83;
    /// Kick (server).
    pub const KICK: u8 = 0x84;
    /// Redirect (server, protocol version 3).
    pub const REDIRECT: u8 = 0x85;
    /// Transfer (server, protocol version 8).
    pub const TRANSFER: u8 = 0x86;
    /// InputRefused (server, protocol version 2).
    pub const INPUT_REFUSED: u8 = 0x87;
    /// KnownSetCheck (server, protocol version 2).
    pub const KNOWN_SET_CHECK: u8 = 0x88;
    /// State (server datagram, protocol version 6): a Delta against an acknowledged base.
    pub const STATE: u8 = crate::delta::TAG_STATE;
    /// Events (server, protocol version 6).
    pub const EVENTS: u8 = 0x8a;
    /// Entries (server, protocol version 7).
    pub const ENTRIES: u8 = 0x8b;
    /// ChatLines (server, protocol version 11).
    pub const CHAT_LINES: u8 = 0x8c;
    /// ChatReply (server, protocol version 11).
    pub const CHAT_REPLY: u8 = 0x8d;
}
