//! Chat on the wire: each message's bytes, the limits and checks that refuse one in wire order,
//! the reply codes, and what a session older than chat is sent instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::error::{DecodeError, EncodeError};
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
