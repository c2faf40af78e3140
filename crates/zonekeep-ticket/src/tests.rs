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
