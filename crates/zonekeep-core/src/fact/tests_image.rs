#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use serde_json::json;
use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::Reader;

fn image(book: &FactBook) -> Vec<u8> {
    let mut out = Vec::new();
    book.put_image(&mut out);
    out
}

fn read(bytes: &[u8]) -> Result<FactBook, DecodeError> {
    let mut r = Reader::new(bytes);
    let book = FactBook::get_image(&mut r)?;
    r.finish()?;
    Ok(book)
}

/// Emits, takes and settles the same way on any book; returns everything it observed.
fn churn(book: &mut FactBook, round: u64) -> Vec<String> {
    let mut seen = Vec::new();
    for i in 0..6u64 {
        let key = (i == 2).then(|| format!("game-{round}"));
        let principal = (i % 2 == 0).then_some("alice");
        let r = book.emit(round, "loot", json!({"i": i, "r": round}), principal, key);
        seen.push(format!("{r:?}"));
    }
    seen.push(format!("{:?}", book.take_unsent()));
    let keys: Vec<FactKey> = book.in_flight().map(|f| f.key.clone()).collect();
    for (n, key) in keys.iter().enumerate().filter(|(n, _)| n % 3 == 0) {
        let outcome = if n % 2 == 0 {
            FactOutcome::Ok(json!({"total": n}))
        } else {
            FactOutcome::Refused(format!("no {n}"))
        };
        book.queue_settlement(Settlement {
            key: key.clone(),
            outcome,
        });
    }
    while let Some(s) = book.next_settlement() {
        seen.push(format!("{s:?}"));
    }
    seen.push(format!(
        "{} {} {} {}",
        book.counter(),
        book.in_flight_len(),
        book.overflowed,
        book.unknown_settlements
    ));
    seen
}

/// A book with facts in flight (taken and not), queued settlements of both outcomes, and
/// overflow and unknown settlements counted.
fn busy_book() -> FactBook {
    let mut book = FactBook::new("zone-ü", 7, 6);
    book.emit(
        1,
        "kill",
        json!({"add": {"score": 50}}),
        Some("alice"),
        None,
    )
    .unwrap();
    book.emit(1, "loot", json!(["a", 1, -2, 0.5, null, true]), None, None)
        .unwrap();
    book.take_unsent();
    let mine = book
        .emit(
            2,
            "trade",
            json!("x\"y\n"),
            Some("bob"),
            Some("mine".into()),
        )
        .unwrap();
    book.emit(
        2,
        "big",
        json!({"u": u64::MAX, "i": i64::MIN, "f": -0.1}),
        None,
        None,
    )
    .unwrap();
    let first = book.in_flight().next().unwrap().key.clone();
    book.queue_settlement(Settlement {
        key: mine,
        outcome: FactOutcome::Refused("nope".into()),
    });
    book.queue_settlement(Settlement {
        key: first,
        outcome: FactOutcome::Ok(json!({"score": 150})),
    });
    book.queue_settlement(Settlement {
        key: FactKey("never".into()),
        outcome: FactOutcome::Ok(json!(null)),
    });
    for _ in 0..3 {
        let _ = book.emit(3, "spill", json!(null), None, None);
    }
    assert_eq!((book.overflowed, book.unknown_settlements), (1, 1));
    book
}

#[test]
fn image_round_trip_then_the_same_facts() {
    let mut book = busy_book();
    let bytes = image(&book);
    let mut copy = read(&bytes).unwrap();
    assert_eq!(image(&copy), bytes);
    assert_eq!(copy.boot_epoch(), book.boot_epoch());
    assert_eq!(
        copy.in_flight().collect::<Vec<_>>(),
        book.in_flight().collect::<Vec<_>>()
    );
    assert_eq!(copy.by_key, book.by_key);
    assert_eq!(copy.unsent, book.unsent);
    assert_eq!(copy.settlements, book.settlements);
    assert_eq!(copy.settlements.len(), 2);
    // The first round delivers the settlements queued before the image, on both.
    for round in 10..14 {
        let a = churn(&mut book, round);
        let b = churn(&mut copy, round);
        assert_eq!(a, b);
        assert_eq!(image(&book), image(&copy));
    }
}

#[test]
fn damaged_fact_images_are_refused() {
    let good = busy_book();
    let bytes = image(&good);
    for len in 0..bytes.len() {
        assert!(read(&bytes[..len]).is_err(), "cut at {len}");
    }
    type Break = fn(&mut FactBook);
    let cases: [(&str, Break); 5] = [
        ("order not issued", |b| b.next_order = 1),
        ("key in flight twice", |b| {
            let f = b.in_flight.values().next().unwrap().clone();
            b.in_flight.insert(b.next_order, f);
            b.next_order += 1;
        }),
        ("unsent out of order", |b| {
            b.unsent.push_back(0);
        }),
        ("settlement not in flight", |b| {
            b.settlements.push_back(Settlement {
                key: FactKey("gone".into()),
                outcome: FactOutcome::Refused(String::new()),
            });
        }),
        ("settlement queued twice", |b| {
            let s = b.settlements[0].clone();
            b.settlements.push_back(s);
        }),
    ];
    for (what, break_it) in cases {
        let mut b = busy_book();
        break_it(&mut b);
        assert!(
            matches!(read(&image(&b)), Err(DecodeError::Invalid(_))),
            "{what} was accepted"
        );
    }
    // Text that is not JSON where JSON belongs.
    let mut b = FactBook::new("z", 1, 2);
    b.emit(1, "k", json!(1), None, None).unwrap();
    let mut bytes = image(&b);
    let at = bytes.windows(2).rposition(|w| w == [1, b'1']).unwrap();
    bytes[at + 1] = b'{';
    assert!(matches!(read(&bytes), Err(DecodeError::Invalid(_))));
}
