//! Zones linked to others through the ABI: players transferred out and in, messages to zones,
//! groups and the parent, a child's events, and what could not be delivered.

use crate::testing::{Command, TestHost};
use crate::{returning, Ctx, Player, PlayerId, Refusal, Zone};

/// A zone that moves players and trades messages, through the SDK's new calls and commands.
#[derive(Default)]
struct Mover {
    heard: Vec<String>,
}

impl Zone for Mover {
    type Input = Vec<u8>;

    fn create(ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        ctx.set_parent(Some("world"));
        ctx.join_group("north");
        Ok(Mover::default())
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _input: Vec<u8>) {
        ctx.transfer(player, "zone-b", r#"{"hp":3}"#);
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) -> Vec<u8> {
        ctx.kick(player, "gone");
        vec![7, player.0 as u8]
    }

    fn transfer_in(
        &mut self,
        _ctx: &mut Ctx<'_>,
        player: Player,
        arrival: crate::Arrival<'_>,
    ) -> Result<(), Refusal> {
        self.heard.push(format!(
            "in {} {} {} {} {} {:?}",
            player.id,
            arrival.from_zone,
            arrival.claims,
            arrival.returning,
            arrival.new_to_run,
            arrival.state
        ));
        if player.principal == "banned" {
            return Err(Refusal::new(3, "no"));
        }
        Ok(())
    }

    fn on_message(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: crate::MessageFrom<'_>,
        topic: u16,
        payload: &[u8],
    ) {
        self.heard
            .push(format!("message {from:?} {topic} {payload:?}"));
        ctx.send_to_zone("zone-b", 1, b"a");
        ctx.send_to_group("north", 2, b"b");
        ctx.to_parent(3, b"c");
        ctx.leave_group("north");
        ctx.set_parent(None);
        ctx.save_now();
        ctx.publish_listing(false, r#"{"round":2}"#);
    }

    fn on_child(&mut self, _ctx: &mut Ctx<'_>, child: &str, event: crate::ChildEvent<'_>) {
        self.heard.push(format!("child {child} {event:?}"));
    }

    fn on_undeliverable(
        &mut self,
        _ctx: &mut Ctx<'_>,
        to: &str,
        to_group: bool,
        topic: u16,
        reason: &str,
    ) {
        self.heard
            .push(format!("undeliverable {to} {to_group} {topic} {reason}"));
    }
}

#[test]
fn transfers_messages_groups_and_the_parent_go_through_the_abi() {
    let mut host = TestHost::<Mover>::new(50_000);
    assert_eq!(
        host.create(1, "mover-1", "{}").unwrap(),
        vec![
            Command::SetParent("world".into()),
            Command::JoinGroup("north".into())
        ]
    );
    assert_eq!(
        host.input(4, &[1]).unwrap(),
        vec![Command::Transfer {
            player: 4,
            target: "zone-b".into(),
            claims: r#"{"hp":3}"#.into()
        }]
    );
    let (state, commands) = host.transfer_out(4).unwrap();
    assert_eq!(state, vec![7, 4]);
    assert_eq!(
        commands,
        vec![Command::Kick {
            player: 4,
            reason: "gone".into()
        }]
    );
    assert!(host
        .transfer_in(5, "ann", r#"{"hp":3}"#, "zone-a", returning::ARRIVAL, &[1])
        .unwrap()
        .is_empty());
    let refused = host
        .transfer_in(6, "banned", "{}", "zone-a", returning::ARRIVAL, &[])
        .unwrap();
    assert_eq!(
        refused,
        vec![Command::Refuse {
            code: 3,
            reason: "no".into()
        }]
    );
    let sent = host.message("zone:zone-c", 9, b"hi").unwrap();
    assert_eq!(
        sent,
        vec![
            Command::Send {
                kind: 0,
                to: "zone-b".into(),
                topic: 1,
                payload: b"a".to_vec()
            },
            Command::Send {
                kind: 1,
                to: "north".into(),
                topic: 2,
                payload: b"b".to_vec()
            },
            Command::Send {
                kind: 2,
                to: String::new(),
                topic: 3,
                payload: b"c".to_vec()
            },
            Command::LeaveGroup("north".into()),
            Command::SetParent(String::new()),
            Command::SaveNow,
            Command::PublishListing {
                open: false,
                metadata: r#"{"round":2}"#.into()
            },
        ]
    );
    host.message("admin", 1, b"").unwrap();
    host.child("zone-c", 0xFFFF, &[1, 2]).unwrap();
    host.child("zone-c", 4, b"x").unwrap();
    host.undeliverable(true, "south", 2, "no bus").unwrap();
    assert_eq!(
        host.zone().unwrap().heard,
        vec![
            "in 5 zone-a {\"hp\":3} false false [1]",
            "in 6 zone-a {} false false []",
            "message Zone(\"zone-c\") 9 [104, 105]",
            "message Admin 1 []",
            "child zone-c Tier { from: Idle, to: Dormant }",
            "child zone-c Message { topic: 4, payload: [120] }",
            "undeliverable south true 2 no bus",
        ]
    );
}
