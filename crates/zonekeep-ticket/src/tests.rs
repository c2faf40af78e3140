#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use serde_json::json;

const S1: &[u8] = b"0123456789abcdef0123456789abcdef-one";
const S2: &[u8] = b"0123456789abcdef0123456789abcdef-two";
const OLD: &[u8] = b"0123456789abcdef0123456789abcdef-old";

fn verifier() -> Verifier {
    let ring = KeyRing::new(vec![
        TicketKey::new("k1", S1, false).unwrap(),
        TicketKey::new("k2", S2, false).unwrap(),
        TicketKey::new("k0", OLD, true).unwrap(),
    ])
    .unwrap();
    Verifier::new(ring, TicketPolicy::default(), 8)
}

fn claims(now: u64) -> Value {
    json!({"sub": "alice", "zone": "arena-*", "exp": now + 60, "nbf": now, "jti": "j1", "team": "red"})
}

const NOW: u64 = 1_700_000_000;

#[test]
fn good_ticket_verifies_and_passes_free_claims() {
    let v = verifier();
    let t = sign_parts(S2, &json!({"alg": "HS256", "kid": "k2"}), &claims(NOW));
    let ok = v.verify(&t, "arena-7", NOW).unwrap();
    assert_eq!(ok.sub.as_str(), "alice");
    assert_eq!(ok.role, Role::Player);
    assert_eq!(ok.claims.get("team"), Some(&json!("red")));
    assert!(!ok.claims.contains_key("exp"));
    v.consume(&ok, NOW).unwrap();
    assert_eq!(v.consume(&ok, NOW), Err(TicketError::Replayed));
}

#[test]
fn each_refusal_has_its_own_error() {
    let v = verifier();
    let h = json!({"alg": "HS256", "kid": "k1"});
    let t = sign_parts(S1, &h, &claims(NOW));
    assert_eq!(
        v.verify(&t, "lobby", NOW),
        Err(TicketError::WrongZone("lobby".into()))
    );
    assert_eq!(v.verify(&t, "arena-1", NOW + 66), Err(TicketError::Expired));
    assert!(v.verify(&t, "arena-1", NOW + 65).is_ok(), "within leeway");
    assert_eq!(
        v.verify(&t, "arena-1", NOW - 6),
        Err(TicketError::NotYetValid)
    );
    let old = sign_parts(OLD, &json!({"alg": "HS256", "kid": "k0"}), &claims(NOW));
    assert_eq!(v.verify(&old, "arena-1", NOW), Err(TicketError::RetiredKey));
    let unk = sign_parts(S1, &json!({"alg": "HS256", "kid": "zz"}), &claims(NOW));
    assert_eq!(v.verify(&unk, "arena-1", NOW), Err(TicketError::UnknownKey));
    let wrong_key = sign_parts(S2, &h, &claims(NOW));
    assert_eq!(
        v.verify(&wrong_key, "arena-1", NOW),
        Err(TicketError::BadSignature)
    );
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims(NOW).to_string())
    );
    assert_eq!(
        v.verify(&none, "arena-1", NOW),
        Err(TicketError::BadAlgorithm("none".into()))
    );
    let rs = sign_parts(S1, &json!({"alg": "RS256", "kid": "k1"}), &claims(NOW));
    assert!(matches!(
        v.verify(&rs, "arena-1", NOW),
        Err(TicketError::BadAlgorithm(_))
    ));
    let long = sign_parts(
        S1,
        &h,
        &json!({"sub": "a", "zone": "arena-1", "exp": NOW + 3600, "jti": "x"}),
    );
    assert_eq!(
        v.verify(&long, "arena-1", NOW),
        Err(TicketError::LifetimeTooLong)
    );
}

#[test]
fn tampering_is_detected() {
    let v = verifier();
    let t = sign_parts(S1, &json!({"alg": "HS256", "kid": "k1"}), &claims(NOW));
    let mut parts: Vec<String> = t.split('.').map(str::to_owned).collect();
    let mut forged = claims(NOW);
    forged["sub"] = json!("mallory");
    parts[1] = URL_SAFE_NO_PAD.encode(forged.to_string());
    let tampered = parts.join(".");
    assert_eq!(
        v.verify(&tampered, "arena-1", NOW),
        Err(TicketError::BadSignature)
    );
    assert!(matches!(
        v.verify("a.b", "arena-1", NOW),
        Err(TicketError::Malformed(_))
    ));
    assert!(matches!(
        v.verify("", "arena-1", NOW),
        Err(TicketError::Malformed(_))
    ));
    assert!(matches!(
        v.verify("a.b.c.d", "arena-1", NOW),
        Err(TicketError::Malformed(_))
    ));
}

#[test]
fn mint_round_trips_with_default_key() {
    let v = verifier();
    let req = MintRequest {
        sub: "bob".into(),
        zone: "arena-1".into(),
        role: Role::Observer,
        ttl_secs: 30,
        params: Some(json!({"size": 3})),
        claims: Claims::new(),
    };
    let t = mint(v.keys().primary().unwrap(), &req, NOW).unwrap();
    let ok = v.verify(&t, "arena-1", NOW).unwrap();
    assert_eq!(ok.role, Role::Observer);
    assert_eq!(ok.params, Some(json!({"size": 3})));
    assert_eq!(ok.exp, NOW + 30);
}

#[test]
fn zone_patterns() {
    assert!(zone_matches("arena-*", "arena-1"));
    assert!(!zone_matches("arena-*", "lobby"));
    assert!(zone_matches("lobby", "lobby"));
    assert!(!zone_matches("lobby", "lobby2"));
}

#[test]
fn key_ring_validation() {
    assert!(matches!(
        TicketKey::new("k", b"short".to_vec(), false),
        Err(KeyError::ShortSecret { .. })
    ));
    let k = TicketKey::new("k", S1, true).unwrap();
    assert_eq!(KeyRing::new(vec![k]).unwrap_err(), KeyError::NoActiveKey);
    assert!(!format!("{:?}", TicketKey::new("k", S1, false).unwrap()).contains("0123"));
}

fn xfer() -> TransferClaim {
    TransferClaim {
        id: "t-42".into(),
        from: "lobby".into(),
        player: 7,
    }
}

#[test]
fn a_transfer_credential_admits_its_target_once_and_names_its_transfer() {
    let v = verifier();
    let key = v.keys().active("k1").unwrap().clone();
    let t =
        mint_transfer_credential(&key, &Principal::new("alice"), "arena-2", xfer(), NOW).unwrap();
    let ok = v.verify(&t, "arena-2", NOW).unwrap();
    assert_eq!(ok.sub.as_str(), "alice");
    assert_eq!(ok.zone, "arena-2");
    assert_eq!(ok.role, Role::Player);
    assert_eq!(ok.exp, NOW + TRANSFER_CREDENTIAL_TTL_SECS);
    assert_eq!(ok.transfer(), Some(&xfer()));
    // The host reads xfer; the zone's claims do not carry it.
    assert!(!ok.claims.contains_key("xfer"));
    // Only the target zone, and only once.
    assert!(matches!(
        v.verify(&t, "lobby", NOW),
        Err(TicketError::WrongZone(_))
    ));
    v.consume(&ok, NOW).unwrap();
    assert_eq!(v.consume(&ok, NOW), Err(TicketError::Replayed));
    // Valid for ten minutes (with the default lifetime limit of 600 s), not longer.
    assert!(v.verify(&t, "arena-2", NOW + 600).is_ok());
    assert_eq!(
        v.verify(&t, "arena-2", NOW + 606).unwrap_err(),
        TicketError::Expired
    );
    // An ordinary ticket is no transfer.
    let plain = sign_parts(S1, &json!({"alg": "HS256", "kid": "k1"}), &claims(NOW));
    assert_eq!(v.verify(&plain, "arena-1", NOW).unwrap().transfer(), None);
}

#[test]
fn a_malformed_xfer_is_a_bad_ticket() {
    let v = verifier();
    let with = |xfer: Value, zone: &str, role: &str| {
        let c = json!({"sub": "alice", "zone": zone, "exp": NOW + 60, "jti": "j", "role": role, "xfer": xfer});
        let t = sign_parts(S1, &json!({"alg": "HS256", "kid": "k1"}), &c);
        v.verify(&t, "arena-2", NOW)
    };
    let good = json!({"id": "t", "from": "lobby", "player": 3, "later": true});
    assert_eq!(
        with(good.clone(), "arena-2", "player")
            .unwrap()
            .transfer()
            .map(|x| x.player),
        Some(3)
    );
    let long = "x".repeat(129);
    for bad in [
        json!("t"),
        json!({"from": "lobby", "player": 3}),
        json!({"id": "", "from": "lobby", "player": 3}),
        json!({"id": long, "from": "lobby", "player": 3}),
        json!({"id": "t", "player": 3}),
        json!({"id": "t", "from": 5, "player": 3}),
        json!({"id": "t", "from": "lobby"}),
        json!({"id": "t", "from": "lobby", "player": -1}),
        json!({"id": "t", "from": "lobby", "player": 4_294_967_296u64}),
        json!({"id": "t", "from": "lobby", "player": "3"}),
    ] {
        assert!(
            matches!(
                with(bad.clone(), "arena-2", "player"),
                Err(TicketError::Malformed(_))
            ),
            "{bad}"
        );
    }
    // Exactly the target zone, as a player.
    assert!(matches!(
        with(good.clone(), "arena-*", "player"),
        Err(TicketError::Malformed(_))
    ));
    assert!(matches!(
        with(good, "arena-2", "observer"),
        Err(TicketError::Malformed(_))
    ));
}

#[test]
fn minting_refuses_a_credential_no_host_would_accept() {
    let key = TicketKey::new("k1", S1, false).unwrap();
    let alice = Principal::new("alice");
    for zone in ["", "arena-*"] {
        assert!(matches!(
            mint_transfer_credential(&key, &alice, zone, xfer(), NOW),
            Err(MintError::Invalid(_))
        ));
    }
    let long = TransferClaim {
        id: "x".repeat(129),
        ..xfer()
    };
    assert!(matches!(
        mint_transfer_credential(&key, &alice, "arena-2", long, NOW),
        Err(MintError::Invalid(_))
    ));
    assert!(matches!(
        mint_transfer_credential(&key, &Principal::new(""), "arena-2", xfer(), NOW),
        Err(MintError::Invalid(_))
    ));
}

#[test]
fn moderator_role_is_an_observer_that_moderates() {
    let v = verifier();
    let h = json!({"alg": "HS256", "kid": "k1"});
    let with_role = |role: Value, zone: &str| {
        let mut c = claims(NOW);
        c["role"] = role;
        c["zone"] = json!(zone);
        sign_parts(S1, &h, &c)
    };
    let m = v
        .verify(&with_role(json!("moderator"), "arena-*"), "arena-2", NOW)
        .unwrap();
    assert_eq!(m.role, Role::Observer);
    assert!(m.moderator);
    assert!(m.moderates_zone("arena-2"));
    assert!(m.moderates_zone("arena-9"));
    assert!(!m.moderates_zone("lobby"));
    assert!(!m.moderates_fleet());
    // The role is a host claim: the zone never sees it.
    assert!(!m.claims.contains_key("role"));

    // Exactly `*`: every zone and the fleet.
    let fleet = v
        .verify(&with_role(json!("moderator"), "*"), "lobby", NOW)
        .unwrap();
    assert!(fleet.moderates_fleet());
    assert!(fleet.moderates_zone("lobby"));
    // A zone-1 moderator moderates zone-1 only.
    let one = v
        .verify(&with_role(json!("moderator"), "zone-1"), "zone-1", NOW)
        .unwrap();
    assert!(one.moderates_zone("zone-1"));
    assert!(!one.moderates_zone("zone-10"));
    assert!(!one.moderates_fleet());

    // Players and observers moderate nothing, even with `*`.
    for role in [json!("player"), json!("observer")] {
        let t = v.verify(&with_role(role, "*"), "lobby", NOW).unwrap();
        assert!(!t.moderator);
        assert!(!t.moderates_zone("lobby"));
        assert!(!t.moderates_fleet());
    }
    let default = v
        .verify(&sign_parts(S1, &h, &claims(NOW)), "arena-1", NOW)
        .unwrap();
    assert_eq!(default.role, Role::Player);
    assert!(!default.moderator);

    // Any other role, or a role that is not a string, is malformed.
    for role in [json!("Moderator"), json!("admin"), json!(2), json!(null)] {
        assert_eq!(
            v.verify(&with_role(role, "arena-*"), "arena-1", NOW),
            Err(TicketError::Malformed(
                "role must be \"player\", \"observer\" or \"moderator\""
            ))
        );
    }
}

#[test]
fn moderator_tickets_mint_and_verify() {
    let v = verifier();
    let key = v.keys().primary().unwrap();
    let req = MintRequest {
        sub: "mod-ann".into(),
        zone: "*".into(),
        // Ignored: a moderator is an observer.
        role: Role::Player,
        ttl_secs: 60,
        params: None,
        claims: Claims::new(),
    };
    let t = mint_moderator(key, &req, NOW).unwrap();
    let ok = v.verify(&t, "arena-3", NOW).unwrap();
    assert_eq!(ok.sub.as_str(), "mod-ann");
    assert_eq!(ok.role, Role::Observer);
    assert!(ok.moderator);
    assert!(ok.moderates_fleet());
    // The ordinary mint never sets it.
    let plain = mint(
        key,
        &MintRequest {
            role: Role::Observer,
            ..req.clone()
        },
        NOW,
    )
    .unwrap();
    let ok = v.verify(&plain, "arena-3", NOW).unwrap();
    assert_eq!(ok.role, Role::Observer);
    assert!(!ok.moderator);
}

#[test]
fn a_transfer_credential_cannot_be_a_moderator() {
    let v = verifier();
    let mut c = claims(NOW);
    c["zone"] = json!("lobby");
    c["role"] = json!("moderator");
    c["xfer"] = json!({"id": "t1", "from": "arena-1", "player": 3});
    let t = sign_parts(S1, &json!({"alg": "HS256", "kid": "k1"}), &c);
    assert_eq!(
        v.verify(&t, "lobby", NOW),
        Err(TicketError::Malformed(
            "a transfer credential admits a player"
        ))
    );
}
