//! A player driven by the Rust SDK (`zonekeep-client`): it follows redirects and reconnects by
//! itself — resuming with its token, or joining afresh with a new ticket — as a game would.

use std::time::Duration;

use tokio::sync::watch;
use zonekeep_client::{connect, ConnectOptions, Event};

/// What one player has seen.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// Highest input acknowledged.
    pub acked: u32,
    /// Player ids it was welcomed as.
    pub players: Vec<u32>,
    /// Resumed Welcomes.
    pub resumed: u32,
    /// Longest gap between two Deltas, ms.
    pub longest_gap_ms: u64,
    /// Counters of the SDK at the last Delta.
    pub fresh_joins: u64,
    /// The connection ended for good.
    pub closed: bool,
    /// Why it ended, once it has.
    pub close_reason: Option<String>,
    /// The highest input number sent (inputs are numbered 1, 2, ...).
    pub sent: u64,
    /// Kick codes received.
    pub kicks: Vec<u16>,
    /// `Disconnected` events: sessions the SDK told the game it lost.
    pub disconnects: u32,
    /// The input number each sequence number carried (as the SDK stamped it): with no fresh
    /// join, an acknowledgement of `seq` vouches for every number up to `numbers[seq]`.
    pub numbers: std::collections::BTreeMap<u32, u64>,
}

/// A player of `zone` entering at `entry`: sends an input every 25 ms, records acks and Welcomes.
pub async fn player(entry: String, zone: String, principal: String) -> watch::Receiver<Seen> {
    player_every(entry, zone, principal, Duration::from_millis(25)).await
}

/// A player of `zone` entering at `entry` that sends an input `every`, numbered 1, 2, ...
pub async fn player_every(
    entry: String,
    zone: String,
    principal: String,
    every: Duration,
) -> watch::Receiver<Seen> {
    let url = format!("ws://{entry}/zones/{zone}");
    let (z, p) = (zone.clone(), principal.clone());
    let opts = ConnectOptions::new(super::ticket(&principal, &zone)).with_fresh_ticket(move || {
        let t = super::ticket(&p, &z);
        async move { Ok::<_, String>(t) }
    });
    let (mut conn, welcome) = connect(&url, opts).await.unwrap();
    let (tx, rx) = watch::channel(Seen {
        players: vec![welcome.player_id],
        ..Seen::default()
    });
    tokio::spawn(async move {
        let mut every = tokio::time::interval(every);
        // Ticks missed while offline are skipped, not made up in a burst.
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n = 0u64;
        let mut last = tokio::time::Instant::now();
        let mut online = true;
        loop {
            tokio::select! {
                // Like a game, it stops sending while it has no connection (the SDK would queue
                // the inputs and deliver them in one burst on resuming).
                _ = every.tick(), if online => {
                    n += 1;
                    let seq = conn.send_input(&n.to_le_bytes()).ok();
                    tx.send_modify(|s| {
                        s.sent = n;
                        if let Some(seq) = seq {
                            s.numbers.insert(seq, n);
                        }
                    });
                }
                e = conn.recv() => match e {
                    Some(Event::Delta(d)) => {
                        let gap = u64::try_from(last.elapsed().as_millis()).unwrap_or(u64::MAX);
                        last = tokio::time::Instant::now();
                        let fresh = conn.counters().fresh_joins;
                        tx.send_modify(|s| {
                            s.acked = s.acked.max(d.ack);
                            s.longest_gap_ms = s.longest_gap_ms.max(gap);
                            s.fresh_joins = fresh;
                        });
                    }
                    Some(Event::Welcome { welcome, resumed }) => {
                        online = true;
                        tx.send_modify(|s| {
                            s.players.push(welcome.player_id);
                            s.resumed += u32::from(resumed);
                        });
                    }
                    Some(Event::Disconnected { .. }) => {
                        online = false;
                        tx.send_modify(|s| s.disconnects += 1);
                    }
                    Some(Event::Kick(k)) => {
                        online = false;
                        tx.send_modify(|s| s.kicks.push(k.code.0));
                    }
                    Some(Event::Closed(reason)) => {
                        tx.send_modify(|s| {
                            s.closed = true;
                            s.close_reason = Some(format!("{reason:?}"));
                        });
                        return;
                    }
                    None => {
                        tx.send_modify(|s| s.closed = true);
                        return;
                    }
                    Some(_) => {}
                },
            }
        }
    });
    rx
}

/// Waits (bounded) until `f` holds for `rx`.
pub async fn until(rx: &mut watch::Receiver<Seen>, what: &str, f: impl Fn(&Seen) -> bool) -> Seen {
    let r = tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|s| f(s)))
        .await
        .map(|r| r.map(|s| s.clone()));
    match r {
        Ok(Ok(s)) => s,
        _ => panic!("timed out waiting for {what}: {:?}", *rx.borrow()),
    }
}
