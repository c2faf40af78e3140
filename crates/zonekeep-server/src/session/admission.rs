//! Admitting a connection's Hello: content, ticket, the zone's start or its owner elsewhere,
//! then the join or resume (or the player's move elsewhere).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::oneshot;
use zonekeep_protocol::messages::{
    negotiate_version, ClientMessage, Hello, CHAT_PROTOCOL, RESUME_FROM_VERSION,
};

use super::{Attached, Entered, Handshake};
use crate::error::SessionError;
use crate::fleet::route::Route;
use crate::host::{params_refusal, Routed, Shared};
use crate::net::conn::ConnHandle;
use crate::sim::{
    admit_zone, wait_running, AdmitError, Arrival, JoinFailure, Joined, SimCommand, StartError,
    ZoneCreate, ZoneEntry, ZoneStart,
};
use crate::ticket::unix_now;

/// The rest of a handshake once the first message arrived: it must be a Hello offering one of
/// `versions`; then content, ticket, admission and the zone's Welcome (or a move elsewhere).
/// Shared by the WebSocket and WebTransport paths.
pub(crate) async fn admit_hello(
    shared: &Arc<Shared>,
    zone_id: &str,
    bytes: Bytes,
    versions: &[u32],
    conn: &ConnHandle,
) -> Result<Handshake, SessionError> {
    let hello = match ClientMessage::decode(&bytes) {
        Ok(ClientMessage::Hello(h)) => h,
        Ok(_) => {
            return Err(SessionError::Protocol(
                "the first message must be Hello".into(),
            ))
        }
        Err(e) => return Err(SessionError::Protocol(format!("undecodable Hello: {e}"))),
    };
    let version =
        negotiate_version(&hello.versions, versions).ok_or_else(|| SessionError::Version {
            min: versions.iter().copied().min().unwrap_or(0),
            max: versions.iter().copied().max().unwrap_or(0),
        })?;
    admit_negotiated(shared, zone_id, hello, bytes, version, conn)
        .await
        .map_err(|e| e.for_version(version))
}

/// [`admit_hello`] once the version is negotiated.
async fn admit_negotiated(
    shared: &Arc<Shared>,
    zone_id: &str,
    hello: Hello,
    bytes: Bytes,
    version: u32,
    conn: &ConnHandle,
) -> Result<Handshake, SessionError> {
    // A host that requires a minimum content version refuses older content here, before the
    // ticket is verified or its single-use id spent: the client reloads and presents it again.
    if let Err(refusal) = shared.sim.content.admit(version, &hello.content_version) {
        shared.metrics.connection_refused("content_outdated");
        return Err(refusal.into());
    }
    // A new player of a zone that relays serve goes to the relay with the most room (a host
    // that places), before its ticket is verified or spent: it presents both there.
    if shared.config.relay_placement
        && conn.transport() == crate::net::conn::Transport::WebSocket
        && version >= 3
        && hello.reconnect_token.is_empty()
    {
        if let Some(url) = shared.relay_places.pick(zone_id) {
            return Ok(Handshake::ToRelay(url));
        }
    }
    let (tx, rx) = oneshot::channel();
    // Admission may start the zone (claim and restore from the store): the
    // client waits for it, but shutdown does not.
    let admitted = tokio::select! {
        _ = shared.shutdown.cancelled() => return Err(SessionError::ShuttingDown),
        r = admit(shared, zone_id, &hello, version, conn, tx) => r,
    };
    let (thread, sub) = match admitted {
        Ok(Entered::Zone(thread, sub)) => (thread, sub),
        Ok(Entered::Moved(frame)) => return Ok(Handshake::Transferred(frame)),
        Err(SessionError::Join(JoinFailure::Moved { host, url })) => {
            return Ok(Handshake::Elsewhere(crate::fleet::forward::Moved {
                host,
                url,
                version,
                hello: bytes,
            }))
        }
        Err(e) => return Err(e),
    };
    let joined: Joined = tokio::select! {
        _ = shared.shutdown.cancelled() => return Err(SessionError::ShuttingDown),
        r = rx => match r.map_err(|_| JoinFailure::Unavailable("the zone's thread is gone".into()))? {
            Ok(joined) => joined,
            // A resume of a player that was moved to another zone: it is sent there again.
            Err(JoinFailure::ReconnectRefused(why)) => {
                return match crate::transfer::resend(shared, zone_id, &sub).await {
                    Some(frame) => Ok(Handshake::Transferred(frame)),
                    None => Err(JoinFailure::ReconnectRefused(why).into()),
                };
            }
            Err(e) => return Err(e.into()),
        },
    };
    let entry = shared
        .registry
        .get(zone_id)
        .filter(|e| e.thread == thread)
        .ok_or_else(|| JoinFailure::Unavailable("zone stopped".into()))?;
    // A session that speaks chat hears it from here (its zone's history first).
    let chat = match shared.chat.get() {
        Some(chat) if version >= CHAT_PROTOCOL => {
            Some(chat.seat(&sub, Arc::clone(&entry), conn.clone()))
        }
        _ => None,
    };
    Ok(Handshake::Attached(Attached {
        entry,
        player: joined.player,
        conn_id: conn.id,
        netsim: shared.netsim.connection(&sub),
        version,
        chat,
    }))
}

/// Verify the ticket, start the zone if it is new (or wait for the join
/// that is starting it), and queue a join or resume; returns the zone's thread.
async fn admit(
    shared: &Arc<Shared>,
    zone_id: &str,
    hello: &Hello,
    version: u32,
    conn: &ConnHandle,
    reply: oneshot::Sender<Result<Joined, JoinFailure>>,
) -> Result<Entered, SessionError> {
    let now = unix_now();
    let ticket = shared.verifier.verify(&hello.ticket, zone_id, now)?;
    // Params the directory cannot keep are the ticket's fault, refused before anything is
    // claimed or the ticket spent.
    if let Some(refusal) = ticket.params.as_ref().and_then(params_refusal) {
        return Err(SessionError::Params(refusal));
    }
    let sub = ticket.sub.as_str().to_owned();
    // A principal banned from the zone (or its group, or the fleet) is refused before anything
    // is spent; a zone not running here yet is checked by its groups once it runs (the next
    // read of the sanctions closes the session).
    if let Some(chat) = shared.chat.get() {
        let groups = shared
            .registry
            .get(zone_id)
            .map(|e| e.groups())
            .unwrap_or_default();
        let seat = crate::chat::channel::Seat {
            principal: &sub,
            zone: zone_id,
            groups: &groups,
        };
        if let Some(ban) = chat.sanctions.ban_of(&seat) {
            chat.metrics.refused("banned");
            return Err(JoinFailure::Banned(crate::chat::sanctions::ban_reason(&ban)).into());
        }
    }
    // A lasting world halted here is refused before the directory is asked or anything spent:
    // its store is what fails, and the client retries with the same ticket and token.
    if let Some(h) = shared.sim.halts.get(zone_id) {
        return Err(JoinFailure::Halted(h.message()).into());
    }
    // Where the zone lives, asked before a token or the ticket's single-use id
    // is spent: a client sent elsewhere presents both to the owner, which
    // spends them once, on admission.
    let listed = match shared.fleet() {
        Some(fleet) if shared.registry.get(zone_id).is_none() => {
            let kind = ticket.kind.as_deref().unwrap_or(&shared.default_kind);
            let params = ticket.params.clone().unwrap_or_else(|| {
                shared
                    .sim
                    .specs
                    .get(kind)
                    .map_or(Value::Null, |s| s.default_params.clone())
            });
            match fleet.route(zone_id, kind, &params).await {
                Ok(Route::Here(listed)) => listed,
                Ok(Route::Owner { host, url }) => {
                    return Err(JoinFailure::Moved { host, url }.into())
                }
                Err(e) => {
                    return Err(
                        JoinFailure::StoreUnreachable(format!("fleet directory: {e}")).into(),
                    )
                }
            }
        }
        _ => None,
    };
    // A zone another host claimed is not served here: refused before a token
    // or the ticket's single-use id is spent, so the client can use both there.
    if shared.registry.is_fenced(zone_id) {
        return Err(JoinFailure::Fenced.into());
    }
    if ticket.transfer().is_some() {
        // A transfer credential admits only as the arrival of the move it names.
        let (thread, sub) =
            crate::transfer::arrival(shared, zone_id, ticket, listed, version, conn, reply).await?;
        return Ok(Entered::Zone(thread, sub));
    }
    if !hello.reconnect_token.is_empty() {
        // A resume may present the same ticket again: the token, not the jti, is single-use here.
        let redeemed = shared.reconnect.redeem(
            &hello.reconnect_token,
            &ticket.sub,
            zone_id,
            ticket.role,
            Instant::now(),
        );
        let player = match redeemed {
            Ok(player) => player,
            Err(e) => {
                // A player moved to another zone that comes back here is sent there again.
                return match crate::transfer::resend(shared, zone_id, ticket.sub.as_str()).await {
                    Some(frame) => Ok(Entered::Moved(frame)),
                    None => Err(e.into()),
                };
            }
        };
        let resume = |create| SimCommand::Resume {
            zone_id: zone_id.to_owned(),
            create,
            player,
            principal: ticket.sub,
            version,
            // Only a version 4 session continues from what the client holds (§4.1.1).
            resume_from: hello.resume_from.filter(|_| version >= RESUME_FROM_VERSION),
            conn: conn.clone(),
            reply,
        };
        let (entry, create, took_over, arrival) = match shared.registry.hold(zone_id) {
            Some((entry, arrival)) => (entry, None, false, arrival),
            // The zone moved here (a drain, a failover) and has not started yet: start it from
            // its save, which holds the player, and resume there.
            None => {
                let took_over = is_takeover(shared, listed.as_ref());
                let Some(listed) = listed else {
                    return Err(JoinFailure::ReconnectRefused("zone is not running".into()).into());
                };
                let r = shared.route_join(zone_id, Some(&listed.kind), Some(listed.params))?;
                (r.entry, r.create, took_over, r.arrival)
            }
        };
        let refused = JoinFailure::ReconnectRefused;
        enter_zone(shared, &entry, create, arrival, took_over, refused, resume).await?;
        return Ok(Entered::Zone(entry.thread, sub));
    }
    spend_ticket(shared, &ticket).await?;
    // A zone the directory knows runs as the kind and params it was created with.
    let took_over = is_takeover(shared, listed.as_ref());
    let (kind, params) = match listed {
        Some(l) => (Some(l.kind), Some(l.params)),
        None => (ticket.kind.clone(), ticket.params.clone()),
    };
    let Routed {
        entry,
        create,
        arrival,
    } = shared.route_join(zone_id, kind.as_deref(), params)?;
    // A player whose move out of this zone a crash left undelivered gets its state back.
    let (reclaimed, create) = if ticket.role == zonekeep_core::Role::Player {
        crate::transfer::reclaim_on_join(
            shared,
            zone_id,
            ticket.sub.as_str(),
            &entry,
            create,
            took_over,
        )
        .await?
    } else {
        (None, create)
    };
    let reclaimed_id = reclaimed.as_ref().map(|r| r.transfer.id.clone());
    // A kind whose players bring characters: the zone runs first (its owner epoch names the
    // lease), then the character is acquired, recalled from another zone of this host if need be.
    let asked_kind = kind.as_deref().unwrap_or(&shared.default_kind);
    let resolved_kind = super::character::zone_kind(&entry, create.as_ref(), asked_kind);
    let (character, create) = if ticket.role == zonekeep_core::Role::Player
        && super::character::kind_keeps_characters(shared, &resolved_kind)
    {
        if let Some(c) = create {
            start_alone(shared, &entry, c, took_over).await?;
        }
        let data = super::character::acquire(shared, &entry, ticket.sub.as_str()).await?;
        (Some(data), None)
    } else {
        (None, create)
    };
    let holds_character = character.is_some();
    let principal = ticket.sub.as_str().to_owned();
    let join = |create| SimCommand::Join {
        zone_id: zone_id.to_owned(),
        create,
        principal: ticket.sub,
        claims: ticket.claims,
        role: ticket.role,
        version,
        conn: conn.clone(),
        reclaimed: reclaimed.map(Box::new),
        character,
        reply,
    };
    let unavailable = JoinFailure::Unavailable;
    let entered = enter_zone(
        shared,
        &entry,
        create,
        arrival,
        took_over,
        unavailable,
        join,
    )
    .await;
    if let Err(e) = entered {
        if holds_character {
            super::character::give_back(shared, &entry, &principal);
        }
        // The join never reached the zone: a state it reclaimed waits for the player's next.
        if let Some(id) = reclaimed_id {
            let epoch = entry.epoch.load(std::sync::atomic::Ordering::Acquire);
            let job = crate::transfer::Job::Unclaimed { id, epoch };
            if shared.sim.transfers.submit(job).is_err() {
                tracing::warn!(zone = %zone_id, "the transfer worker is full: a refused join's reclaimed state is not given up");
            }
        }
        return Err(e.into());
    }
    Ok(Entered::Zone(entry.thread, sub))
}

/// Starts the zone of `entry` on its own, without a join (a kind with characters: the join, or a
/// move's arrival, waits for the zone's owner epoch to take the character's lease under).
pub(crate) async fn start_alone(
    shared: &Arc<Shared>,
    entry: &Arc<ZoneEntry>,
    create: ZoneCreate,
    took_over: bool,
) -> Result<(), JoinFailure> {
    let (tx, rx) = oneshot::channel();
    let zone_id = entry.zone_id.clone();
    admit_zone(&shared.sim, &shared.pool, entry, create, |start| {
        SimCommand::Create {
            zone_id,
            create: start,
            reply: tx,
        }
    })
    .await
    .map_err(|e| start_failure(shared, entry, JoinFailure::Unavailable, e))?;
    count_takeover(shared, took_over);
    match rx.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(JoinFailure::Unavailable(e.to_string())),
        Err(_) => Err(JoinFailure::Unavailable("the zone's thread is gone".into())),
    }
}

/// Spends the ticket's single-use id, on this host and across the fleet: a ticket for `arena-*`
/// must not admit its bearer once per host, nor again at a zone's new owner after a move.
pub(crate) async fn spend_ticket(
    shared: &Shared,
    ticket: &crate::ticket::VerifiedTicket,
) -> Result<(), SessionError> {
    shared.verifier.consume(ticket, unix_now())?;
    if let Some(fleet) = shared.fleet() {
        let forget_after = ticket
            .exp
            .saturating_add(shared.config.ticket_leeway_secs)
            .saturating_mul(1000);
        match fleet.spend_ticket(&ticket.jti, forget_after).await {
            Ok(true) => {}
            Ok(false) => return Err(crate::ticket::TicketError::Replayed.into()),
            Err(e) => {
                return Err(JoinFailure::StoreUnreachable(format!("fleet directory: {e}")).into())
            }
        }
    }
    Ok(())
}

/// Hands a join or resume (`cmd`) to the zone's simulation thread: together with the zone's start
/// when this Hello is what starts it here (`create`), otherwise once the zone runs, with the
/// `arrival` that keeps the zone loaded until its thread has `cmd`. `refused` words a zone that
/// cannot be started or is not running for the client.
pub(crate) async fn enter_zone(
    shared: &Arc<Shared>,
    entry: &Arc<ZoneEntry>,
    create: Option<ZoneCreate>,
    arrival: Arrival,
    took_over: bool,
    refused: fn(String) -> JoinFailure,
    cmd: impl FnOnce(Option<ZoneStart>) -> SimCommand,
) -> Result<(), JoinFailure> {
    match create {
        Some(c) => {
            admit_zone(&shared.sim, &shared.pool, entry, c, |start| {
                cmd(Some(start))
            })
            .await
            .map_err(|e| start_failure(shared, entry, refused, e))?;
            count_takeover(shared, took_over);
        }
        None => {
            wait_running(entry).await.map_err(|why| {
                // The start this join waited on failed the zone: told as any join to it is.
                match shared.registry.failure(&entry.zone_id) {
                    Some(_) => failed(shared, entry, why),
                    None => refused(why),
                }
            })?;
            let cmd = SimCommand::Arriving {
                arrival,
                cmd: Box::new(cmd(None)),
            };
            shared
                .pool
                .send(entry.thread, cmd)
                .map_err(|_| JoinFailure::Busy)?;
        }
    }
    Ok(())
}

/// How a start that a join waits on failing is told to the client.
pub(crate) fn start_failure(
    shared: &Shared,
    entry: &ZoneEntry,
    refused: fn(String) -> JoinFailure,
    e: AdmitError,
) -> JoinFailure {
    match e {
        AdmitError::Start(StartError::Moved { host, url }) => JoinFailure::Moved { host, url },
        AdmitError::Start(StartError::Failed(why)) => failed(shared, entry, why),
        // The store failed or the start timed out: nothing the client could change.
        AdmitError::Start(StartError::Unavailable(why)) => JoinFailure::StoreUnreachable(why),
        AdmitError::Start(e) => refused(e.to_string()),
        AdmitError::Busy => JoinFailure::Busy,
    }
}

/// The refusal of a join to a zone that failed (`why`, unless the failure is remembered).
fn failed(shared: &Shared, entry: &ZoneEntry, why: String) -> JoinFailure {
    JoinFailure::Failed(
        shared
            .registry
            .failure(&entry.zone_id)
            .map_or(why, |f| f.message()),
    )
}

/// Whether starting the zone listed so takes it from a dead or departed host.
fn is_takeover(shared: &Shared, listed: Option<&zonekeep_store::ZoneLocation>) -> bool {
    let me = shared.fleet().map(|f| f.host_id.as_str());
    listed.is_some_and(|l| l.owner.is_some() && l.owner.as_deref() != me && !l.owner_alive)
}

/// Counts a takeover that happened on a client's Hello (the reconcile pass counts its own).
pub(crate) fn count_takeover(shared: &Shared, took_over: bool) {
    if let (true, Some(f)) = (took_over, shared.fleet()) {
        f.metrics.takeovers.inc();
        tracing::info!("took over a dead host's zone on a client's Hello");
    }
}
