//! The limits of PROTOCOL.md §7, in one place so encoders and decoders agree.

/// Largest client → server message in bytes (hosts may set a lower limit).
pub const MAX_CLIENT_MESSAGE: usize = 8192;
/// Largest server → client message in bytes; decoders refuse larger and encoders never produce it.
pub const MAX_SERVER_MESSAGE: usize = 1 << 20;
/// Most protocol versions a Hello may offer.
pub const MAX_VERSIONS: usize = 8;
/// Longest ticket in bytes.
pub const MAX_TICKET: usize = 4096;
/// Longest reconnect token in bytes.
pub const MAX_RECONNECT_TOKEN: usize = 64;
/// Longest zone id in bytes.
pub const MAX_ZONE_ID: usize = 128;
/// Longest content version in bytes (a Hello's and a Welcome's).
pub const MAX_CONTENT_VERSION: usize = 64;
/// Longest kick reason in bytes.
pub const MAX_KICK_REASON: usize = 256;
/// Longest input payload in bytes.
pub const MAX_INPUT_PAYLOAD: usize = 4096;
/// Longest redirect / transfer URL in bytes (a Welcome's entry URLs too).
pub const MAX_URL: usize = 512;
/// Most entry URLs a Welcome lists (version 7).
pub const MAX_ENTRIES: usize = 8;
/// Most entity kinds in a schema.
pub const MAX_KINDS: usize = 64;
/// Most fields in one kind.
pub const MAX_FIELDS: usize = 32;
/// Longest kind or field name in bytes.
pub const MAX_NAME: usize = 64;
/// Longest `str` field `max_len` a schema may declare.
pub const MAX_STR_FIELD: usize = 255;
/// Most entries in each Delta list (despawns, updates, spawns).
pub const MAX_DELTA_LIST: usize = 65_536;
/// Most events in one Delta.
pub const MAX_EVENTS: usize = 1024;
/// Longest event payload in bytes.
pub const MAX_EVENT_PAYLOAD: usize = 16_384;
/// Longest chat channel name in bytes (`zone:<id>`, `group:<name>`, `dm:<principal>`; version 11).
pub const MAX_CHAT_CHANNEL: usize = 300;
/// Longest chat line body in bytes (version 11); a host may set a lower limit (`chat_max_line`).
pub const MAX_CHAT_BODY: usize = 1024;
/// Longest sender of a chat line in bytes: a principal (version 11).
pub const MAX_CHAT_SENDER: usize = 256;
/// Most lines one ChatReport names (version 11).
pub const MAX_CHAT_REPORT_LINES: usize = 20;
/// Longest reason of a ChatReport in bytes (version 11).
pub const MAX_CHAT_REPORT_REASON: usize = 500;
/// Most lines a ChatHistory asks for and one ChatLines carries (version 11).
pub const MAX_CHAT_LINES: usize = 200;
/// Longest text of a ChatReply in bytes (version 11).
pub const MAX_CHAT_REPLY_TEXT: usize = 1024;
/// The newest version this crate implements and every current host speaks. Version 11
/// ([`crate::messages::CHAT_PROTOCOL`]) is version 10 plus chat: the client messages Chat,
/// ChatReport and ChatHistory, the server messages ChatLines and ChatReply, and the Kick code
/// BANNED (PROTOCOL.md §4.7–§4.9, §5.11–§5.12). Version 10
/// ([`crate::messages::CHARACTER_PROTOCOL`]) is version 9 plus the Kick codes CHARACTER_MOVED (the
/// player's character was taken into another zone: another game or device) and
/// CHARACTER_ELSEWHERE (another zone holds it and could not give it back yet; PROTOCOL.md §5.3).
/// Version 9 ([`crate::messages::HALT_PROTOCOL`]) is version 8 plus the Kick code WORLD_HALTED (a lasting
/// world whose saves failed stopped; PROTOCOL.md §5.3). Version 8
/// ([`crate::messages::TRANSFER_PROTOCOL`]) is version 7 plus the Transfer message, with which a
/// host moves a player to another zone (PROTOCOL.md §5.3.2). Version 7 adds the entry
/// URLs to Welcome: where else a client may enter when its entry URL is unreachable (PROTOCOL.md
/// §5.3.1). Version 6 adds the
/// WebTransport transport with its datagrams (PROTOCOL.md §1.1). Version 5 adds the host's
/// content version to Welcome and the Kick code CONTENT_OUTDATED, with which a host that requires a
/// minimum content version refuses an older client (PROTOCOL.md §4.1.2). Version 4 lets a resuming
/// Hello carry `resume_from`, so the host may continue with a Delta instead of a BASELINE; its
/// bytes are version 3's otherwise. Version 3 sends Redirect and
/// adds the Kick codes ZONE_MOVED, HOST_FENCED and TOO_MANY_REDIRECTS; its bytes are version 2's.
/// Version 2 added Welcome's timeouts, InputRefused, KnownSetCheck and Resync.
pub const PROTOCOL_VERSION: u32 = 11;
/// The version that adds the WebTransport transport (PROTOCOL.md §1.1): State and Inputs datagrams
/// and the Events message. Over WebSocket its bytes are version 5's.
pub const DATAGRAM_VERSION: u32 = 6;
/// Most inputs one Inputs datagram carries (the newest and the unacknowledged ones before it).
pub const MAX_DATAGRAM_INPUTS: usize = 8;
/// How many recent States the host keeps to diff against, and a client keeps to apply onto.
pub const STATE_RING: usize = 32;
/// The oldest protocol version a current host still accepts: a host speaks
/// `MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION`, and a client offering only version 1 is answered
/// `Kick(VERSION_MISMATCH)`.
pub const MIN_PROTOCOL_VERSION: u32 = 2;
/// Most Redirects a client follows in one connection attempt (PROTOCOL.md §5.3): a host refuses a
/// further hop itself with `Kick(TOO_MANY_REDIRECTS)`, and a client refuses a further Redirect.
pub const MAX_REDIRECTS: u32 = 3;

/// `text` cut to at most `max` bytes on a character boundary: how every reason and name past its
/// limit is shortened rather than refused where the text is only reported.
pub fn clip(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_cuts_on_a_character_boundary() {
        assert_eq!(clip("short", 64), "short");
        assert_eq!(clip("abcdef", 3), "abc");
        // "é" is two bytes: a cut inside it keeps the text before it.
        assert_eq!(clip("aé", 2), "a");
        assert_eq!(clip("aé", 3), "aé");
        assert_eq!(clip("€", 2), "");
        assert_eq!(clip("", 0), "");
    }
}
