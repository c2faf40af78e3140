//! The invariants checked while the simulation runs, and the violation they report.
//!
//! - (a) *One actor*: never two hosts acting on one zone at the same real time. A host acts on a
//!   zone while it believes it owns the zone and its lease holds by its own clock; the check runs
//!   at every write a host issues, against every other host — also paused ones, which would act
//!   the moment they resume.
//! - (b) *Fencing*: every write the database accepts carries an epoch no lower than the zone's,
//!   and that epoch was granted to the writing host's incarnation.
//! - (c) *Liveness*: once faults stop, within `dead_after` and a few heartbeats every zone is
//!   owned by a live host that knows it owns it, at the zone's current epoch, with its lease
//!   holding.

use super::db::{AcceptedWrite, Database};
use super::host::Host;

/// An invariant that failed, with the seed that reproduces it and the events leading to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("seed {seed}: {kind} (at {at_ms} ms)\nlast events:\n{}", .trace.join("\n"))]
pub struct Violation {
    /// The seed of the run: `run(seed, config)` with the same config reproduces it exactly.
    pub seed: u64,
    /// Simulated real time of the violation, in ms since the run started.
    pub at_ms: u64,
    /// Which invariant failed, and how.
    pub kind: ViolationKind,
    /// The last events before the violation, one line each, oldest first.
    pub trace: Vec<String>,
}

/// Which invariant failed. Hosts and zones are named by their ids in the run (`h0`, `z3`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViolationKind {
    /// (a) Two hosts were acting on one zone at once.
    #[error("two hosts act on {zone}: {writer} writes while {other} also acts on it")]
    TwoActors {
        /// The zone.
        zone: String,
        /// The host that issued the write.
        writer: String,
        /// The other host that believed it owned the zone under a holding lease.
        other: String,
    },
    /// (b) The database accepted a write whose epoch is below the zone's.
    #[error(
        "{zone}: accepted {writer}'s write at epoch {epoch}, below the zone's epoch {zone_epoch}"
    )]
    StaleWriteAccepted {
        /// The zone.
        zone: String,
        /// The writing host.
        writer: String,
        /// The write's epoch.
        epoch: u64,
        /// The zone's epoch at acceptance.
        zone_epoch: u64,
    },
    /// (b) The database accepted a write from a host that was never granted that epoch.
    #[error("{zone}: accepted {writer}'s write at epoch {epoch}, which was granted to {holder}")]
    WriteByNonHolder {
        /// The zone.
        zone: String,
        /// The writing host and incarnation.
        writer: String,
        /// The write's epoch.
        epoch: u64,
        /// Who was granted that epoch (`nobody` if no one was).
        holder: String,
    },
    /// (c) A zone was not served in time after faults stopped.
    #[error("{zone} not served {after_ms} ms after faults stopped: {why}")]
    NotServed {
        /// The zone.
        zone: String,
        /// How long after the last fault the check ran.
        after_ms: u64,
        /// What was wrong.
        why: String,
    },
}

/// (a): `writer` issues a write to `zone` at real time `now`; is any other host acting on it?
pub(crate) fn check_one_actor(
    hosts: &[Host],
    writer: usize,
    zone: usize,
    now: u64,
) -> Result<(), ViolationKind> {
    for (idx, other) in hosts.iter().enumerate() {
        // Owning first: it is cheap, and most hosts do not own the zone.
        if idx != writer
            && other.owns(zone).is_some()
            && other.acting_on(zone, other.clock.local(now))
        {
            return Err(ViolationKind::TwoActors {
                zone: format!("z{zone}"),
                writer: format!("h{writer}"),
                other: format!("h{idx}"),
            });
        }
    }
    Ok(())
}

/// (b): the database accepted `write`.
pub(crate) fn check_fenced(write: &AcceptedWrite) -> Result<(), ViolationKind> {
    let (host, inc) = write.writer;
    if write.epoch < write.zone_epoch {
        return Err(ViolationKind::StaleWriteAccepted {
            zone: format!("z{}", write.zone),
            writer: format!("h{host}"),
            epoch: write.epoch,
            zone_epoch: write.zone_epoch,
        });
    }
    if write.holder != Some(write.writer) {
        return Err(ViolationKind::WriteByNonHolder {
            zone: format!("z{}", write.zone),
            writer: format!("h{host} (incarnation {inc})"),
            epoch: write.epoch,
            holder: write.holder.map_or_else(
                || "nobody".to_owned(),
                |(h, i)| format!("h{h} (incarnation {i})"),
            ),
        });
    }
    Ok(())
}

/// (c): at real time `now`, `after_ms` after faults stopped, is every zone served?
pub(crate) fn check_served(
    db: &Database,
    hosts: &[Host],
    zones: usize,
    now: u64,
    after_ms: u64,
) -> Result<(), ViolationKind> {
    for zone in 0..zones {
        if let Err(why) = served(db, hosts, zone, now) {
            return Err(ViolationKind::NotServed {
                zone: format!("z{zone}"),
                after_ms,
                why,
            });
        }
    }
    Ok(())
}

fn served(db: &Database, hosts: &[Host], zone: usize, now: u64) -> Result<(), String> {
    let Some((owner, epoch, registered_inc)) = db.zone(zone) else {
        return Err("no such zone".to_owned());
    };
    let Some(owner) = owner else {
        return Err("no owner".to_owned());
    };
    if !db.alive(owner, now) {
        return Err(format!("its owner h{owner} is not alive"));
    }
    let Some(host) = hosts.get(owner) else {
        return Err(format!("its owner h{owner} does not exist"));
    };
    if !host.up || registered_inc != Some(host.incarnation) {
        return Err(format!(
            "h{owner}'s running process is not the registered incarnation"
        ));
    }
    let local = host.clock.local(now);
    if !host.may_act(local) {
        return Err(format!("h{owner}'s lease does not hold"));
    }
    match host.owns(zone) {
        Some(e) if e == epoch => Ok(()),
        Some(e) => Err(format!(
            "h{owner} runs it at epoch {e}, the zone is at {epoch}"
        )),
        None => Err(format!("h{owner} does not know it owns it")),
    }
}
