//! Server messages on the wire: each one's bytes, round trips, the limits and checks that refuse
//! a message, and the codes and URLs a client of each protocol version is given.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

fn rt(m: &ServerMessage) -> Vec<u8> {
    let b = m.to_bytes(None).unwrap();
    assert_eq!(&ServerMessage::decode(&b, None).unwrap(), m);
    b
}

#[test]
fn kick_codes_and_unknown_codes() {
    let b = rt(&ServerMessage::Kick(Kick {
        code: KickCode::VERSION_MISMATCH,
        reason: "v".into(),
    }));
    assert_eq!(b, [0x84, 10, 1, b'v']);
    let b = rt(&ServerMessage::Kick(Kick {
        code: KickCode(999),
        reason: String::new(),
    }));
    assert_eq!(b, [0x84, 0xe7, 0x07, 0]);
    assert_eq!(KickCode::INTERNAL_ERROR.name(), Some("INTERNAL_ERROR"));
    assert_eq!(KickCode(24).name(), Some("ZONE_MOVED"));
    assert_eq!(KickCode(25).name(), Some("HOST_FENCED"));
    assert_eq!(KickCode(26).name(), Some("TOO_MANY_REDIRECTS"));
    assert_eq!(KickCode(27).name(), Some("CONTENT_OUTDATED"));
    assert_eq!(KickCode::CONTENT_OUTDATED, KickCode(27));
    assert!(!KickCode::CONTENT_OUTDATED.resumes_elsewhere());
    assert_eq!(KickCode(28).name(), Some("WORLD_HALTED"));
    assert_eq!(KickCode::WORLD_HALTED, KickCode(28));
    assert!(!KickCode::WORLD_HALTED.resumes_elsewhere());
    assert_eq!(KickCode(29).name(), Some("CHARACTER_MOVED"));
    assert_eq!(KickCode::CHARACTER_MOVED, KickCode(29));
    assert!(!KickCode::CHARACTER_MOVED.resumes_elsewhere());
    assert_eq!(KickCode(30).name(), Some("CHARACTER_ELSEWHERE"));
    assert_eq!(KickCode::CHARACTER_ELSEWHERE, KickCode(30));
    assert!(!KickCode::CHARACTER_ELSEWHERE.resumes_elsewhere());
    assert_eq!(KickCode(31).name(), Some("BANNED"));
    assert_eq!(KickCode::BANNED, KickCode(31));
    assert_eq!(KickCode(32).name(), None);
    let elsewhere: Vec<u16> = (0..=40)
        .filter(|c| KickCode(*c).resumes_elsewhere())
        .collect();
    assert_eq!(elsewhere, [24, 25]);
    assert_eq!(KickCode(999).to_string(), "kick code 999");
    assert_eq!(
        ServerMessage::decode(&[0x84, 0x80, 0x80, 0x04, 0], None),
        Err(DecodeError::Overflow)
    );
}

#[test]
fn world_halted_reaches_older_sessions_as_internal_error() {
    assert_eq!(HALT_PROTOCOL, 9);
    assert_eq!(
        KickCode::WORLD_HALTED.for_version(8),
        KickCode::INTERNAL_ERROR
    );
    assert_eq!(
        KickCode::WORLD_HALTED.for_version(2),
        KickCode::INTERNAL_ERROR
    );
    assert_eq!(
        KickCode::WORLD_HALTED.for_version(HALT_PROTOCOL),
        KickCode::WORLD_HALTED
    );
    assert_eq!(
        KickCode::WORLD_HALTED.for_version(HALT_PROTOCOL + 1),
        KickCode::WORLD_HALTED
    );
    every_other_code_goes_out_as_it_is(&[2, 3, 5, 6, 7, 8, 9, 10]);
    // The bytes an older session gets are those of INTERNAL_ERROR.
    let kick = |version| {
        rt(&ServerMessage::Kick(Kick {
            code: KickCode::WORLD_HALTED.for_version(version),
            reason: "r".into(),
        }))
    };
    assert_eq!(kick(8), [0x84, 23, 1, b'r']);
    assert_eq!(kick(9), [0x84, 28, 1, b'r']);
}

/// Every code, known or not, but those added after version 8 goes out as it is at each of
/// `versions`.
fn every_other_code_goes_out_as_it_is(versions: &[u32]) {
    let newer = [
        KickCode::WORLD_HALTED,
        KickCode::CHARACTER_MOVED,
        KickCode::CHARACTER_ELSEWHERE,
        KickCode::BANNED,
    ];
    for code in (0..=40).chain([300, 999, u16::MAX]).map(KickCode) {
        if newer.contains(&code) {
            continue;
        }
        for &version in versions {
            assert_eq!(
                code.for_version(version),
                code,
                "{code} at version {version}"
            );
        }
    }
}

#[test]
fn character_codes_reach_older_sessions_as_kicked_and_internal_error() {
    assert_eq!(CHARACTER_PROTOCOL, 10);
    assert_eq!(CHARACTER_PROTOCOL, HALT_PROTOCOL + 1);
    for version in [2, 3, 5, 6, 7, 8, 9] {
        // An older client stops on KICKED, as it should when its character went elsewhere...
        assert_eq!(
            KickCode::CHARACTER_MOVED.for_version(version),
            KickCode::KICKED,
            "version {version}"
        );
        // ...and retries INTERNAL_ERROR with backoff, as it should while the character is held.
        assert_eq!(
            KickCode::CHARACTER_ELSEWHERE.for_version(version),
            KickCode::INTERNAL_ERROR,
            "version {version}"
        );
    }
    for version in [CHARACTER_PROTOCOL, CHARACTER_PROTOCOL + 1, u32::MAX] {
        assert_eq!(
            KickCode::CHARACTER_MOVED.for_version(version),
            KickCode::CHARACTER_MOVED
        );
        assert_eq!(
            KickCode::CHARACTER_ELSEWHERE.for_version(version),
            KickCode::CHARACTER_ELSEWHERE
        );
    }
    // WORLD_HALTED keeps its own rule.
    assert_eq!(
        KickCode::WORLD_HALTED.for_version(9),
        KickCode::WORLD_HALTED
    );
    assert_eq!(
        KickCode::WORLD_HALTED.for_version(8),
        KickCode::INTERNAL_ERROR
    );
    every_other_code_goes_out_as_it_is(&[2, 8, 9, 10, 11]);
    // The bytes an older session gets are those of KICKED and INTERNAL_ERROR.
    let kick = |code: KickCode, version| {
        rt(&ServerMessage::Kick(Kick {
            code: code.for_version(version),
            reason: "r".into(),
        }))
    };
    assert_eq!(kick(KickCode::CHARACTER_MOVED, 9), [0x84, 11, 1, b'r']);
    assert_eq!(kick(KickCode::CHARACTER_MOVED, 10), [0x84, 29, 1, b'r']);
    assert_eq!(kick(KickCode::CHARACTER_ELSEWHERE, 9), [0x84, 23, 1, b'r']);
    assert_eq!(kick(KickCode::CHARACTER_ELSEWHERE, 10), [0x84, 30, 1, b'r']);
}

#[test]
fn pong_redirect_transfer() {
    rt(&ServerMessage::Pong(Pong {
        client_time: 1,
        server_time_us: u64::MAX,
        tick: 3,
    }));
    rt(&ServerMessage::Redirect(Redirect {
        url: "wss://b/zones/z".into(),
        zone_id: "z".into(),
    }));
    rt(&ServerMessage::Transfer(Transfer {
        zone_id: "z2".into(),
        ticket: "t".into(),
        url: "u".into(),
    }));
}

#[test]
fn transfers_lead_only_to_websocket_urls() {
    let t = |url: &str| Transfer {
        zone_id: "lobby".into(),
        ticket: "t".into(),
        url: url.into(),
    };
    for ok in ["wss://a.example/zones/lobby", "WS://a:7350/zones/lobby?x=1"] {
        assert_eq!(t(ok).websocket_url(), Some(ok));
    }
    for bad in [
        "https://a/zones/lobby",
        "/zones/lobby",
        "ws:///zones/lobby",
        "",
    ] {
        assert_eq!(t(bad).websocket_url(), None, "{bad}");
    }
}

#[test]
fn redirects_lead_only_to_websocket_urls() {
    let r = |url: &str| Redirect {
        url: url.into(),
        zone_id: "z".into(),
    };
    for ok in [
        "ws://b:7350/zones/z?hops=1",
        "wss://b.example/zones/z",
        "WSS://B.example/zones/z",
    ] {
        assert_eq!(r(ok).websocket_url(), Some(ok), "{ok}");
    }
    for bad in [
        "http://b/zones/z",
        "https://b/zones/z",
        "/zones/z",
        "b:7350/zones/z",
        "ws:/b/zones/z",
        "ws://",
        "ws:///zones/z",
        "javascript://b",
        "",
    ] {
        assert_eq!(r(bad).websocket_url(), None, "{bad}");
    }
}

#[test]
fn input_refused_and_known_set_check() {
    let b = rt(&ServerMessage::InputRefused(InputRefused {
        seq: 300,
        code: 2,
    }));
    assert_eq!(b, [0x87, 0xac, 0x02, 0x02]);
    assert_eq!(
        ServerMessage::decode(&[0x87, 0, 1], None),
        Err(DecodeError::Invalid("input seq 0"))
    );
    let b = rt(&ServerMessage::KnownSetCheck(KnownSetCheck {
        tick: 5,
        count: 2,
        hash: 0x0403_0201,
    }));
    assert_eq!(b, [0x88, 5, 2, 1, 2, 3, 4]);
    assert_eq!(
        ServerMessage::decode(&[0x88, 5, 2, 1, 2, 3], None),
        Err(DecodeError::Truncated)
    );
}

#[test]
fn welcome_checks_ranges() {
    let w = Welcome {
        version: 1,
        player_id: 7,
        zone_id: "arena-1".into(),
        role: Role::Observer,
        tick_hz: 20,
        patch_every: 2,
        tick: 99,
        features: 0,
        idle_timeout_ms: 30_000,
        handshake_timeout_ms: 5_000,
        reconnect_grace_ms: 60_000,
        reconnect_token: vec![0xab; 16],
        schema: Schema {
            pos_step: 0.5,
            kinds: vec![],
        },
        content_version: String::new(),
        entries: Vec::new(),
    };
    let b = rt(&ServerMessage::Welcome(w.clone()));
    let mut bad = b.clone();
    bad[1 + 1 + 1 + 1 + 7] = 2; // role byte
    assert_eq!(
        ServerMessage::decode(&bad, None),
        Err(DecodeError::Invalid("unknown role"))
    );
    let mut w0 = w;
    w0.tick_hz = 0;
    assert!(ServerMessage::Welcome(w0).to_bytes(None).is_err());
}

#[test]
fn welcome_carries_a_content_version_from_version_5() {
    let w = |version: u32, content_version: &str| Welcome {
        version,
        player_id: 1,
        zone_id: "z".into(),
        role: Role::Player,
        tick_hz: 20,
        patch_every: 1,
        tick: 0,
        features: 0,
        idle_timeout_ms: 0,
        handshake_timeout_ms: 0,
        reconnect_grace_ms: 0,
        reconnect_token: vec![],
        schema: Schema {
            pos_step: 1.0,
            kinds: vec![],
        },
        content_version: content_version.into(),
        entries: Vec::new(),
    };
    // Version 5: the content version follows the schema.
    let v4 = rt(&ServerMessage::Welcome(w(4, "")));
    let v5 = rt(&ServerMessage::Welcome(w(5, "1.4")));
    assert_eq!(v5[1], 5);
    assert_eq!(&v5[2..], [&v4[2..], &[3, b'1', b'.', b'4']].concat());
    // An empty one is still written (its length byte), and read back as empty.
    let empty = rt(&ServerMessage::Welcome(w(5, "")));
    assert_eq!(empty.last(), Some(&0));
    assert_eq!(empty.len(), v4.len() + 1);
    // Later versions carry it too.
    rt(&ServerMessage::Welcome(w(6, "2")));

    // A Welcome for an older version cannot carry one: refused, not dropped.
    assert_eq!(
        ServerMessage::Welcome(w(4, "1.4")).to_bytes(None),
        Err(EncodeError::Invalid(
            "Welcome content_version needs version 5"
        ))
    );
    // Decoding follows the Welcome's own version: version 4 bytes followed by a content
    // version are trailing bytes, and version 5 bytes without one are cut short.
    let mut v4_extra = v4.clone();
    v4_extra.extend_from_slice(&[3, b'1', b'.', b'4']);
    assert_eq!(
        ServerMessage::decode(&v4_extra, None),
        Err(DecodeError::TrailingBytes(4))
    );
    let mut v5_short = v4.clone();
    v5_short[1] = 5;
    assert_eq!(
        ServerMessage::decode(&v5_short, None),
        Err(DecodeError::Truncated)
    );
    // At most 64 bytes.
    rt(&ServerMessage::Welcome(w(5, &"9".repeat(64))));
    assert!(ServerMessage::Welcome(w(5, &"9".repeat(65)))
        .to_bytes(None)
        .is_err());
    let mut long = empty.clone();
    long.pop();
    long.push(65);
    long.extend_from_slice(&[b'9'; 65]);
    assert!(matches!(
        ServerMessage::decode(&long, None),
        Err(DecodeError::TooLong {
            what: "content version",
            ..
        })
    ));
}

#[test]
fn delta_needs_context() {
    assert!(matches!(
        ServerMessage::decode(&[0x82, 0, 0, 0, 0, 0, 0], None),
        Err(DecodeError::Invalid(_))
    ));
    let schema = Schema {
        pos_step: 1.0,
        kinds: vec![],
    };
    let ctx = DeltaContext {
        schema: &schema,
        known: &[],
    };
    let m = ServerMessage::decode(&[0x82, 0, 0, 0, 0, 0, 0], Some(ctx)).unwrap();
    assert_eq!(m.to_bytes(Some(ctx)).unwrap(), [0x82, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        ServerMessage::decode(&[0x01], None),
        Err(DecodeError::UnknownTag(1))
    );
    assert_eq!(peek_tag(&[]), Err(DecodeError::Truncated));
}
