//! The deduplication table forgets the least recently seen sender past its bound, and a
//! mailbox's image reads back byte for byte with every cut a typed error.
#![allow(clippy::unwrap_used)]
use super::mailbox::Dedup;
use super::*;
use zonekeep_protocol::wire::Reader;

fn id(sender: &str, epoch: u64, seq: u64) -> MessageId {
    MessageId {
        sender: sender.into(),
        epoch,
        seq,
    }
}

#[test]
fn the_dedup_table_forgets_the_least_recently_seen_sender() {
    let mut d = Dedup::default();
    for i in 0..MAX_DEDUP_SENDERS {
        assert!(d.admit(&id(&format!("z{i}"), 1, 1)));
    }
    // z0 is seen again, so z1 is now the oldest.
    assert!(d.admit(&id("z0", 1, 2)));
    assert!(d.admit(&id("new", 1, 1)));
    assert_eq!(d.len(), MAX_DEDUP_SENDERS);
    assert!(!d.admit(&id("z0", 1, 2)), "z0 is still remembered");
    assert!(d.admit(&id("z1", 1, 1)), "z1 was forgotten");
}

#[test]
fn a_mailbox_image_reads_back_and_damage_is_typed() {
    let mut m = Mailbox::new("zone-a", 3);
    m.parent = Some("world".into());
    m.join_group("g1").unwrap();
    m.send(4, MessageTarget::Group("g1".into()), 7, b"hi", false)
        .unwrap();
    m.receive(InboundMessage {
        id: id("zone-b", 2, 9),
        from: MessageFrom::Zone("zone-b".into()),
        topic: 1,
        payload: vec![1, 2],
        via_parent: true,
    });
    m.undeliverable(
        id("zone-a", 3, 1),
        MessageTarget::Zone("x".into()),
        7,
        "gone".into(),
    );
    let mut bytes = Vec::new();
    m.put_image(&mut bytes);
    let mut r = Reader::new(&bytes);
    let back = Mailbox::get_image(&mut r, "zone-a", 3).unwrap();
    r.finish().unwrap();
    let mut again = Vec::new();
    back.put_image(&mut again);
    assert_eq!(again, bytes);
    assert_eq!(back.outbox, m.outbox);
    for cut in 0..bytes.len() {
        let mut r = Reader::new(&bytes[..cut]);
        assert!(
            Mailbox::get_image(&mut r, "zone-a", 3).is_err(),
            "cut at {cut}"
        );
    }
}
