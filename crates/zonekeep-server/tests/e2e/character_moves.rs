//! Moves that carry characters, end to end on SQLite and PostgreSQL: a character changed in one
//! zone (committed or not) arrives in the next with the change and comes back with the changes
//! made there, the store's lease naming the zone the player is in after each move and the
//! character's version only growing; a move through a zone of a kind without characters leaves
//! the character free in the store and takes it again in the next zone that keeps characters;
//! and a move that is returned (the target refuses, or cannot be started) leaves the character
//! with the source, unchanged.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use zonekeep_core::{
    Arrival, Claims, Ctx, EventTarget, InputRefusal, JoinRefusal, PlayerId, PlayerInfo, Zone,
    ZoneConfig, ZoneError, ZoneInit,
};
use zonekeep_protocol::messages::{ServerMessage, Transfer};
use zonekeep_server::persist::{PersistConfig, Persistence};
use zonekeep_server::HostBuilder;

use crate::common::*;
use crate::lasting::Backend;
use crate::tally::*;

/// The event topic by which a player whose move was returned is told why (PROTOCOL.md §5.3.2).
const RETURNED_TOPIC: u16 = 0xFFFF;

/// What a [`Walker`] input asks for.
enum Cmd {
    /// Earn one gold (a change of the character, not written yet).
    Earn,
    /// Write the character now.
    Commit,
    /// Move to a zone, naming the kind to create it as if it does not run.
    Go { to: String, kind: Option<String> },
}

/// A zone of gold diggers: each 8-byte input earns the player one gold, kept in its character
/// (8 bytes) and written only at the zone's saves, when asked (`c`), or when the player leaves;
/// `go:ZONE[:KIND]` moves the player. A player is told its gold (topic [`TOPIC_COUNT`], u64::MAX
/// for none: a kind without characters) as it joins, as its connection arrives after a move, and
/// as it comes back from a returned one. A zone whose id starts with `shut` refuses arrivals.
struct Walker {
    zone_id: String,
}

/// The gold in a character.
fn gold(c: Option<&[u8]>) -> u64 {
    c.and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Tells `p` its gold, u64::MAX when it holds no character here.
fn tell_gold(ctx: &mut Ctx<'_>, p: PlayerId) {
    let g = ctx.character(p).map_or(u64::MAX, |c| gold(Some(c)));
    ctx.emit_event(
        EventTarget::Player(p),
        TOPIC_COUNT,
        g.to_le_bytes().to_vec(),
    );
}

impl Zone for Walker {
    type Input = Cmd;
    fn create(init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Walker {
            zone_id: init.zone_id.clone(),
        })
    }
    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        tell_gold(ctx, p.id);
        Ok(())
    }
    fn on_rejoin(&mut self, ctx: &mut Ctx<'_>, p: PlayerId) {
        tell_gold(ctx, p);
    }
    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<Cmd, InputRefusal> {
        if payload.len() == 8 {
            return Ok(Cmd::Earn);
        }
        let text = std::str::from_utf8(payload).map_err(|_| InputRefusal::new(1, "text"))?;
        if text == "c" {
            return Ok(Cmd::Commit);
        }
        let mut parts = text
            .strip_prefix("go:")
            .ok_or(InputRefusal::new(1, "go:"))?
            .split(':');
        let to = parts.next().unwrap_or_default().to_owned();
        Ok(Cmd::Go {
            to,
            kind: parts.next().map(str::to_owned),
        })
    }
    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, cmd: Cmd) {
        match cmd {
            Cmd::Earn => {
                let g = gold(ctx.character(p)) + 1;
                let _ = ctx.set_character(p, g.to_le_bytes().to_vec());
            }
            Cmd::Commit => {
                let _ = ctx.commit_character(p);
            }
            Cmd::Go { to, kind } => {
                let mut claims = Claims::new();
                if let Some(kind) = kind {
                    claims.insert("kind".into(), kind.into());
                }
                ctx.transfer(p, &to, claims).unwrap();
            }
        }
    }
    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        p: &PlayerInfo,
        arrival: &Arrival<'_>,
    ) -> Result<(), JoinRefusal> {
        if arrival.returning {
            // Connected all along: told at once.
            tell_gold(ctx, p.id);
            return Ok(());
        }
        if self.zone_id.starts_with("shut") {
            return Err(JoinRefusal::new(7, "this zone takes no one in"));
        }
        // Told when its connection arrives (on_rejoin).
        Ok(())
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn save(&self) -> Option<Vec<u8>> {
        Some(self.zone_id.as_bytes().to_vec())
    }
    fn restore(init: &ZoneInit, _c: &mut Ctx<'_>, _b: &[u8]) -> Result<Self, ZoneError> {
        Ok(Walker {
            zone_id: init.zone_id.clone(),
        })
    }
}

/// Registers the kinds `walk` (characters) and `plain` (no characters), on the tally's tier
/// timeouts (`tally`).
pub fn walker_kinds(host: HostBuilder, tally: ZoneConfig) -> HostBuilder {
    let tally = ZoneConfig {
        // Room for the moved player's connection to come.
        reconnect_grace: Duration::from_secs(10),
        ..tally
    };
    host.zone_with::<Walker>(
        "walk",
        ZoneConfig {
            characters: true,
            ..tally.clone()
        },
        Value::Null,
    )
    .zone_with::<Walker>("plain", tally, Value::Null)
}

/// The store settings of a walkers' host on `backend`, its files in `dir`: zones save once an
/// hour, so a character changed and not asked to be written stays unwritten until its player
/// leaves.
pub fn walkers_store(backend: &Backend, dir: &Path) -> PersistConfig {
    PersistConfig {
        store: backend.store(),
        data_dir: dir.to_path_buf(),
        save_every: Duration::from_secs(3600),
        ..PersistConfig::default()
    }
}

/// A host with the walkers' kinds on `backend`.
pub async fn walkers(backend: &Backend, dir: &Path) -> (TestServer, Arc<Persistence>) {
    persistent_kinds(dir, walkers_store(backend, dir), walker_kinds).await
}

/// `principal`'s character as the store holds it: its gold, version and holder zone.
async fn stored(p: &Persistence, principal: &str) -> (u64, u64, Option<String>) {
    let c = p
        .store()
        .characters
        .load_character(principal)
        .await
        .unwrap()
        .expect("a stored character");
    (
        gold(Some(&c.data)),
        c.version,
        c.holder.map(|(zone, _)| zone),
    )
}

/// What a walker's client has read so far.
#[derive(Default)]
struct Walk {
    gold: Option<u64>,
    returned: Option<String>,
    transfer: Option<Transfer>,
    ack: u32,
}

/// Reads until `done` holds.
async fn walk_until(ws: &mut Ws, w: &mut Walk, done: impl Fn(&Walk) -> bool) {
    let schema = empty_schema();
    while !done(w) {
        match recv(ws, &schema).await {
            Seen::Msg(ServerMessage::Delta(d)) => {
                w.ack = w.ack.max(d.ack);
                for e in d.events.into_iter().flatten() {
                    match e.topic {
                        TOPIC_COUNT => {
                            w.gold = Some(u64::from_le_bytes(e.payload.try_into().unwrap()))
                        }
                        RETURNED_TOPIC => w.returned = Some(String::from_utf8(e.payload).unwrap()),
                        _ => {}
                    }
                }
            }
            Seen::Msg(ServerMessage::Transfer(t)) => w.transfer = Some(t),
            Seen::Msg(ServerMessage::Kick(k)) => panic!("kicked: {k:?}"),
            Seen::Msg(_) => {}
            Seen::Closed => panic!("closed"),
        }
    }
}

/// A walker's session: its socket, what it read and its last input's sequence number, and the
/// URL it is connected to.
pub struct Player {
    ws: Ws,
    walk: Walk,
    seq: u32,
    pub url: String,
}

impl Player {
    /// Joins `zone` as `sub` and reads until its gold is told.
    pub async fn join(server: &TestServer, zone: &str, sub: &str) -> Player {
        let mut ws = connect(server, zone).await;
        send(&mut ws, hello_bytes(&ticket(sub, zone), &[])).await;
        let mut walk = Walk::default();
        walk_until(&mut ws, &mut walk, |w| w.gold.is_some()).await;
        Player {
            ws,
            walk,
            seq: 0,
            url: server.url(zone),
        }
    }

    pub fn gold(&self) -> u64 {
        self.walk.gold.expect("told its gold")
    }

    /// Sends `payload` and waits until the zone applied it.
    pub async fn input(&mut self, payload: &[u8]) {
        self.seq += 1;
        send_input(&mut self.ws, self.seq, payload).await;
        let seq = self.seq;
        walk_until(&mut self.ws, &mut self.walk, |w| w.ack >= seq).await;
    }

    pub async fn earn(&mut self, n: u64) {
        for _ in 0..n {
            self.input(&[0; 8]).await;
        }
    }

    /// Moves to `to` (created as `kind` if it does not run) and follows the Transfer there:
    /// the session in the target, told its gold.
    pub async fn go(mut self, to: &str, kind: Option<&str>) -> Player {
        self.ask_to_go(to, kind).await;
        walk_until(&mut self.ws, &mut self.walk, |w| {
            assert!(
                w.returned.is_none(),
                "the move was returned: {:?}",
                w.returned
            );
            w.transfer.is_some()
        })
        .await;
        let t = self.walk.transfer.take().unwrap();
        assert_eq!(t.zone_id, to);
        let (mut ws, _) = tokio_tungstenite::connect_async(&t.url).await.unwrap();
        send(&mut ws, hello_bytes(&t.ticket, &[])).await;
        let mut walk = Walk::default();
        walk_until(&mut ws, &mut walk, |w| w.gold.is_some()).await;
        Player {
            ws,
            walk,
            seq: 0,
            url: t.url,
        }
    }

    /// Moves to `to`, which does not take the player: answers why, once it is back here and
    /// told its gold again.
    pub async fn go_and_come_back(&mut self, to: &str, kind: Option<&str>) -> String {
        self.ask_to_go(to, kind).await;
        walk_until(&mut self.ws, &mut self.walk, |w| {
            assert!(w.transfer.is_none(), "the move was not returned");
            w.returned.is_some() && w.gold.is_some()
        })
        .await;
        self.walk.returned.take().unwrap()
    }

    async fn ask_to_go(&mut self, to: &str, kind: Option<&str>) {
        let go = match kind {
            Some(k) => format!("go:{to}:{k}"),
            None => format!("go:{to}"),
        };
        self.walk.gold = None;
        self.seq += 1;
        send_input(&mut self.ws, self.seq, go.as_bytes()).await;
    }
}

/// Checks the store holds `principal`'s character in `zone` (or free, `None`) with a version no
/// lower than `*version`, which it raises to the stored one.
pub async fn held_in(
    p: &Persistence,
    principal: &str,
    zone: Option<&str>,
    version: &mut u64,
) -> u64 {
    let (g, v, holder) = stored(p, principal).await;
    assert_eq!(
        holder.as_deref(),
        zone,
        "the lease names where the player is"
    );
    assert!(v >= *version, "the version only grows: {v} after {version}");
    *version = v;
    g
}

async fn a_character_moves_with_its_player_and_back(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = walkers(&backend, dir.path()).await;
    let mut version = 0;

    // Ann earns 2 gold in walk-a and has them written, then a third, not written yet.
    let mut ann = Player::join(&server, "walk-a", "ann").await;
    assert_eq!(ann.gold(), 0, "a new character");
    ann.earn(2).await;
    ann.input(b"c").await;
    eventually("the commit written", || async {
        stored(&p, "ann").await.0 == 2
    })
    .await;
    ann.earn(1).await;
    assert_eq!(held_in(&p, "ann", Some("walk-a"), &mut version).await, 2);

    // She moves to walk-b with all three; the store names walk-b.
    let mut ann = ann.go("walk-b", None).await;
    assert_eq!(ann.gold(), 3, "the change not yet written came along");
    assert_eq!(held_in(&p, "ann", Some("walk-b"), &mut version).await, 3);

    // walk-b changes it (not written), and she moves back to walk-a, which sees the change.
    ann.earn(2).await;
    let mut ann = ann.go("walk-a", None).await;
    assert_eq!(ann.gold(), 5, "walk-b's change came back");
    assert_eq!(held_in(&p, "ann", Some("walk-a"), &mut version).await, 5);

    // And on: one more gold in walk-a, then a move to a zone started by the move.
    ann.earn(1).await;
    let ann = ann.go("walk-c", Some("walk")).await;
    assert_eq!(ann.gold(), 6);
    assert_eq!(held_in(&p, "ann", Some("walk-c"), &mut version).await, 6);
    assert_eq!(
        metric(&server, "zonekeep_transfers_total{outcome=\"moved\"}").await,
        3.0
    );

    // Leaving writes it and frees it.
    drop(ann);
    eventually("the character handed back as ann left", || async {
        stored(&p, "ann").await.2.is_none()
    })
    .await;
    assert_eq!(held_in(&p, "ann", None, &mut version).await, 6);
    server.stop().await;
    drop(p);
    backend.cleanup().await;
}

async fn a_zone_without_characters_leaves_the_character_free_for_the_next_one(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = walkers(&backend, dir.path()).await;
    let mut version = 0;
    let mut bob = Player::join(&server, "walk-a", "bob").await;
    bob.earn(4).await;

    // In a zone of a kind without characters bob has none, and the store keeps his, free, as
    // walk-a handed it back.
    let mut bob = bob.go("plain-1", Some("plain")).await;
    assert_eq!(bob.gold(), u64::MAX, "no character in a plain zone");
    assert_eq!(held_in(&p, "bob", None, &mut version).await, 4);
    bob.earn(3).await;
    assert_eq!(held_in(&p, "bob", None, &mut version).await, 4, "untouched");

    // Into a zone that keeps characters again (started by the move): taken there.
    let bob = bob.go("walk-b", Some("walk")).await;
    assert_eq!(bob.gold(), 4);
    assert_eq!(held_in(&p, "bob", Some("walk-b"), &mut version).await, 4);
    server.stop().await;
    drop(p);
    backend.cleanup().await;
}

async fn a_returned_move_leaves_the_character_with_the_source_unchanged(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = walkers(&backend, dir.path()).await;
    let mut version = 0;
    let mut cy = Player::join(&server, "walk-a", "cy").await;
    cy.earn(2).await;
    cy.input(b"c").await;
    cy.earn(2).await;

    // The target refuses the arrival: cy stays, with all four gold.
    let why = cy.go_and_come_back("shut-1", Some("walk")).await;
    assert!(why.contains("takes no one in"), "{why}");
    assert_eq!(cy.gold(), 4, "back with the character as it left");
    assert_eq!(held_in(&p, "cy", Some("walk-a"), &mut version).await, 4);

    // The target cannot be started (no such kind): the same.
    let why = cy.go_and_come_back("void-1", Some("nope")).await;
    assert!(!why.is_empty());
    assert_eq!(cy.gold(), 4);
    assert_eq!(held_in(&p, "cy", Some("walk-a"), &mut version).await, 4);
    assert_eq!(
        metric(&server, "zonekeep_transfers_total{outcome=\"returned\"}").await,
        2.0
    );

    // The character is cy's to play with, here.
    cy.earn(1).await;
    cy.input(b"c").await;
    eventually("the commit written", || async {
        stored(&p, "cy").await.0 == 5
    })
    .await;
    assert_eq!(held_in(&p, "cy", Some("walk-a"), &mut version).await, 5);
    server.stop().await;
    drop(p);
    backend.cleanup().await;
}

async fn a_move_whose_target_cannot_take_the_character_is_returned(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, p) = walkers(&backend, dir.path()).await;
    // Dan plays in a zone without characters; his character, with 5 gold, is held by a zone of
    // another host this one cannot ask.
    let far = p.store().saves.claim("far-1").await.unwrap();
    let chars = &p.store().characters;
    chars
        .acquire_character("dan", "far-1", far.epoch)
        .await
        .unwrap();
    chars
        .commit_character("dan", "far-1", far.epoch, &5u64.to_le_bytes())
        .await
        .unwrap();
    create_zone(&server, "plain-1", "plain").await;
    let mut dan = Player::join(&server, "plain-1", "dan").await;

    // walk-b cannot take it: the move is returned, and nothing changed.
    let why = dan.go_and_come_back("walk-b", Some("walk")).await;
    assert!(why.contains("far-1"), "{why}");
    assert_eq!(
        dan.gold(),
        u64::MAX,
        "still without a character, in plain-1"
    );
    assert_eq!(stored(&p, "dan").await, (5, 1, Some("far-1".into())));

    // far-1 gets a new owner, which frees the character: now the move takes it along.
    p.store().saves.claim("far-1").await.unwrap();
    let dan = dan.go("walk-b", Some("walk")).await;
    assert_eq!(dan.gold(), 5);
    let mut version = 1;
    assert_eq!(held_in(&p, "dan", Some("walk-b"), &mut version).await, 5);
    server.stop().await;
    drop(p);
    backend.cleanup().await;
}

on_both_backends!(
    a_character_moves_with_its_player_and_back:
    a_character_moves_with_its_player_and_back_on_sqlite,
    a_character_moves_with_its_player_and_back_on_postgres
);

on_both_backends!(
    a_zone_without_characters_leaves_the_character_free_for_the_next_one:
    a_zone_without_characters_leaves_the_character_free_for_the_next_one_on_sqlite,
    a_zone_without_characters_leaves_the_character_free_for_the_next_one_on_postgres
);

on_both_backends!(
    a_returned_move_leaves_the_character_with_the_source_unchanged:
    a_returned_move_leaves_the_character_with_the_source_unchanged_on_sqlite,
    a_returned_move_leaves_the_character_with_the_source_unchanged_on_postgres
);

on_both_backends!(
    a_move_whose_target_cannot_take_the_character_is_returned:
    a_move_whose_target_cannot_take_the_character_is_returned_on_sqlite,
    a_move_whose_target_cannot_take_the_character_is_returned_on_postgres
);
