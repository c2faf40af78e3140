//! The model database: a clock of its own, the host directory and the zone table, and the rules
//! the SQL backends apply to each query — [`claim::decide`] for claims, the epoch fence for writes,
//! and the directory's rules for registering and heartbeating.
//!
//! Every query is applied atomically when it arrives, by the database's clock, as one SQL
//! transaction would be. What a host learns of it travels back separately (and may be late or
//! lost).

use std::time::Duration;

use super::trace::Note;
use super::SimReport;
use crate::claim::{self, Ask, Decision, Owner};
use crate::lease::Beat;
use crate::Timing;

/// A query a host sends. Hosts and zones are indices into the world's lists.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Query {
    /// Join the directory under the sender's incarnation; counts as a heartbeat.
    Register { beat: Beat },
    /// `UPDATE ... SET heartbeat = db_now` for the sender's incarnation, if it is still alive.
    Heartbeat { beat: Beat },
    /// Read the zone table and the live hosts.
    Scan,
    /// Claim `zone` for the sender (`by == to`).
    Claim { zone: usize },
    /// A durable write to `zone`, carrying the writer's epoch.
    Write { zone: usize, epoch: u64 },
    /// Leave the directory: the sender stopped its zones, others may take them now.
    Leave,
}

/// The database's answer to a query.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// Registered (or still registered) under the incarnation asked: the beat landed.
    Registered { beat: Beat },
    /// Another incarnation of the host is alive: try again later.
    MustWait { beat: Beat },
    /// The heartbeat landed.
    Landed { beat: Beat },
    /// The sender's incarnation is dead, gone or replaced: it must stop everything and register
    /// anew under a new incarnation.
    Expelled,
    /// The zone table and the live hosts, as of the query's arrival.
    Directory(Box<Directory>),
    /// The claim's outcome; `epoch` is the zone's epoch afterwards.
    Claim {
        zone: usize,
        decision: Decision,
        epoch: u64,
    },
    /// The write was refused: its epoch is below the zone's.
    Refused { zone: usize, epoch: u64 },
}

/// A snapshot of the directory.
#[derive(Debug, Clone)]
pub(crate) struct Directory {
    /// Per zone: its owner and whether that owner is alive.
    pub(crate) zones: Vec<(Option<usize>, bool)>,
    /// The hosts alive now.
    pub(crate) alive: Vec<usize>,
}

/// A write the database accepted, for the fencing invariant.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AcceptedWrite {
    pub(crate) zone: usize,
    pub(crate) writer: (usize, u32),
    pub(crate) epoch: u64,
    /// The zone's epoch at acceptance.
    pub(crate) zone_epoch: u64,
    /// Who was granted `epoch` on this zone, if anyone was.
    pub(crate) holder: Option<(usize, u32)>,
}

/// What applying one query did.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// The answer to send back, if the sender waits for one.
    pub(crate) answer: Option<Answer>,
    /// What to trace.
    pub(crate) note: Option<Note>,
    /// Set when a write was accepted.
    pub(crate) accepted: Option<AcceptedWrite>,
}

#[derive(Debug, Clone, Copy)]
struct HostRow {
    incarnation: u32,
    /// The last landed heartbeat, by the database's clock.
    heartbeat: u64,
    left: bool,
}

#[derive(Debug, Clone, Default)]
struct ZoneRow {
    owner: Option<usize>,
    epoch: u64,
    /// `holders[e - 1]` was granted epoch `e`: the checker's record, not a column.
    holders: Vec<(usize, u32)>,
}

/// The model database.
#[derive(Debug)]
pub(crate) struct Database {
    timing: Timing,
    /// Database clock = real time + `offset`.
    offset: u64,
    names: Vec<String>,
    hosts: Vec<Option<HostRow>>,
    zones: Vec<ZoneRow>,
    /// The deliberate bug the fencing check must catch: accept writes whatever their epoch.
    ignore_epoch: bool,
}

impl Database {
    pub(crate) fn new(
        timing: Timing,
        offset: u64,
        hosts: usize,
        zones: usize,
        ignore_epoch: bool,
    ) -> Database {
        Database {
            timing,
            offset,
            names: (0..hosts).map(|h| format!("h{h}")).collect(),
            hosts: vec![None; hosts],
            zones: vec![ZoneRow::default(); zones],
            ignore_epoch,
        }
    }

    fn clock(&self, real: u64) -> u64 {
        real.saturating_add(self.offset)
    }

    fn age(&self, row: &HostRow, db_now: u64) -> Duration {
        Duration::from_millis(db_now.saturating_sub(row.heartbeat))
    }

    /// Whether `host` is alive at real time `real`: registered, not left, heard from within
    /// `dead_after`. A host with no row is not alive.
    pub(crate) fn alive(&self, host: usize, real: u64) -> bool {
        let db_now = self.clock(real);
        self.row(host)
            .is_some_and(|r| self.timing.is_alive(self.age(&r, db_now), r.left))
    }

    fn row(&self, host: usize) -> Option<HostRow> {
        self.hosts.get(host).copied().flatten()
    }

    /// The zone's owner, its epoch, and the incarnation registered for the owner.
    pub(crate) fn zone(&self, zone: usize) -> Option<(Option<usize>, u64, Option<u32>)> {
        let row = self.zones.get(zone)?;
        let inc = row.owner.and_then(|o| self.row(o)).map(|r| r.incarnation);
        Some((row.owner, row.epoch, inc))
    }

    /// Applies `query` from `host`'s incarnation `inc`, arriving at real time `real`.
    pub(crate) fn apply(
        &mut self,
        real: u64,
        host: usize,
        inc: u32,
        query: Query,
        report: &mut SimReport,
    ) -> Applied {
        let db_now = self.clock(real);
        match query {
            Query::Register { beat } => self.register(db_now, host, inc, beat, report),
            Query::Heartbeat { beat } => self.heartbeat(db_now, host, inc, beat),
            Query::Scan => self.scan(real),
            Query::Claim { zone } => self.claim(real, host, inc, zone, report),
            Query::Write { zone, epoch } => self.write(host, inc, zone, epoch, report),
            Query::Leave => {
                if let Some(row) = self.hosts.get_mut(host).and_then(Option::as_mut) {
                    if row.incarnation == inc {
                        row.left = true;
                    }
                }
                Applied::default()
            }
        }
    }

    fn answer(answer: Answer) -> Applied {
        Applied {
            answer: Some(answer),
            ..Applied::default()
        }
    }

    fn register(
        &mut self,
        db_now: u64,
        host: usize,
        inc: u32,
        beat: Beat,
        report: &mut SimReport,
    ) -> Applied {
        let fresh = HostRow {
            incarnation: inc,
            heartbeat: db_now,
            left: false,
        };
        let Some(slot) = self.hosts.get_mut(host) else {
            return Self::answer(Answer::Expelled);
        };
        let answer = match *slot {
            None => {
                *slot = Some(fresh);
                Answer::Registered { beat }
            }
            Some(row) => {
                let alive = self.timing.is_alive(
                    Duration::from_millis(db_now.saturating_sub(row.heartbeat)),
                    row.left,
                );
                if row.incarnation == inc && alive {
                    // A retry of a registration that landed: refresh it like a heartbeat.
                    *slot = Some(fresh);
                    Answer::Registered { beat }
                } else if row.incarnation >= inc {
                    // Dead since, or replaced by a newer process: this incarnation is over.
                    Answer::Expelled
                } else if alive {
                    // The old incarnation may still act on its zones: wait until it is silent
                    // for `dead_after` (or has left).
                    report.registrations_delayed += 1;
                    Answer::MustWait { beat }
                } else {
                    *slot = Some(fresh);
                    Answer::Registered { beat }
                }
            }
        };
        Self::answer(answer)
    }

    fn heartbeat(&mut self, db_now: u64, host: usize, inc: u32, beat: Beat) -> Applied {
        let timing = self.timing;
        let row = self.hosts.get_mut(host).and_then(Option::as_mut);
        match row {
            Some(row)
                if row.incarnation == inc
                    && timing.is_alive(
                        Duration::from_millis(db_now.saturating_sub(row.heartbeat)),
                        row.left,
                    ) =>
            {
                row.heartbeat = db_now;
                Self::answer(Answer::Landed { beat })
            }
            // A heartbeat never revives a dead incarnation: others may already own its zones,
            // and a late heartbeat would let it believe its lease holds.
            _ => Self::answer(Answer::Expelled),
        }
    }

    fn scan(&self, real: u64) -> Applied {
        let zones = self
            .zones
            .iter()
            .map(|z| (z.owner, z.owner.is_some_and(|o| self.alive(o, real))))
            .collect();
        let alive = (0..self.hosts.len())
            .filter(|&h| self.alive(h, real))
            .collect();
        Self::answer(Answer::Directory(Box::new(Directory { zones, alive })))
    }

    fn claim(
        &mut self,
        real: u64,
        host: usize,
        inc: u32,
        zone: usize,
        report: &mut SimReport,
    ) -> Applied {
        let db_now = self.clock(real);
        let by_lease_holds = self.row(host).is_some_and(|r| {
            r.incarnation == inc && !r.left && self.age(&r, db_now) <= self.timing.fence_after
        });
        // The model has no draining hosts: usable means alive.
        let to_usable = self.alive(host, real);
        let Some(row) = self.zones.get(zone) else {
            return Applied::default();
        };
        let prior = row.owner;
        let owner = match prior {
            None => Owner::None,
            Some(o) => Owner::Host {
                id: self.names.get(o).map_or("", String::as_str),
                alive: self.alive(o, real),
            },
        };
        let me = self.names.get(host).map_or("", String::as_str);
        let decision = claim::decide(
            owner,
            &Ask {
                by: me,
                by_lease_holds,
                to: me,
                to_usable,
            },
        );
        let Some(row) = self.zones.get_mut(zone) else {
            return Applied::default();
        };
        if decision == Decision::Take {
            row.owner = Some(host);
            row.epoch += 1;
            row.holders.push((host, inc));
            match prior {
                None => report.first_claims += 1,
                Some(o) if o == host => report.reloads += 1,
                Some(_) => report.takeovers += 1,
            }
        } else {
            report.claims_refused += 1;
        }
        let epoch = row.epoch;
        Applied {
            answer: Some(Answer::Claim {
                zone,
                decision,
                epoch,
            }),
            note: Some(Note::Claim {
                host,
                zone,
                decision,
                epoch,
            }),
            accepted: None,
        }
    }

    fn write(
        &mut self,
        host: usize,
        inc: u32,
        zone: usize,
        epoch: u64,
        report: &mut SimReport,
    ) -> Applied {
        let Some(row) = self.zones.get(zone) else {
            return Applied::default();
        };
        if epoch < row.epoch && !self.ignore_epoch {
            report.stale_writes_refused += 1;
            return Applied {
                answer: Some(Answer::Refused { zone, epoch }),
                note: Some(Note::Refused {
                    host,
                    zone,
                    epoch,
                    current: row.epoch,
                }),
                accepted: None,
            };
        }
        report.writes_accepted += 1;
        let holder = usize::try_from(epoch)
            .ok()
            .and_then(|e| e.checked_sub(1))
            .and_then(|i| row.holders.get(i).copied());
        // An accepted write needs no answer: the host only acts on refusals.
        Applied {
            answer: None,
            note: Some(Note::Accepted { host, zone, epoch }),
            accepted: Some(AcceptedWrite {
                zone,
                writer: (host, inc),
                epoch,
                zone_epoch: row.epoch,
                holder,
            }),
        }
    }
}
