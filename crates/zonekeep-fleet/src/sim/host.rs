//! The model host: a process with its own drifting monotonic clock, a [`Lease`], and the zones it
//! believes it owns, following the protocol's host-side rules. It is a state machine: the world
//! hands it events with the host's local time and carries out the [`Action`]s it returns.

use super::db::{Answer, Directory, Query};
use super::trace::Note;
use super::{Breakage, SimReport};
use crate::claim::Decision;
use crate::failover::rendezvous;
use crate::lease::{Lease, Millis};
use crate::Timing;

/// A host's monotonic clock: `offset + real + real * ppm / 1e6`, in ms. Drift is constant per
/// machine; a restarted process keeps the machine's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    offset: u64,
    ppm: i64,
}

impl Clock {
    pub(crate) fn new(offset: u64, ppm: i64) -> Clock {
        // Keep the rate positive so the clock moves forward.
        Clock {
            offset,
            ppm: ppm.clamp(-500_000, 500_000),
        }
    }

    /// The local time at real time `real` (ms).
    pub(crate) fn local(&self, real: u64) -> Millis {
        // Simulated runs last minutes: i64 has room for a real time times a drift by far.
        let real = i64::try_from(real).unwrap_or(i64::MAX / 2_000_000);
        let skew = real.saturating_mul(self.ppm).div_euclid(1_000_000);
        Millis(self.offset.saturating_add_signed(real.saturating_add(skew)))
    }

    /// The real time, in ms rounded up, that `local_ms` of this clock take.
    pub(crate) fn real_span(&self, local_ms: u64) -> u64 {
        let rate = 1_000_000 + i128::from(self.ppm);
        let real = (i128::from(local_ms) * 1_000_000 + rate - 1) / rate;
        u64::try_from(real.max(1)).unwrap_or(u64::MAX)
    }
}

/// What a host asks the world to do.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Action {
    /// Send `query` to the database as incarnation `incarnation`.
    Send { incarnation: u32, query: Query },
    /// Act on `zone`: issue a durable write at `epoch` (the world checks who else is acting,
    /// then sends it).
    Act { zone: usize, epoch: u64 },
    /// Something to trace.
    Note(Note),
}

/// One simulated host machine and the process running on it, if any.
#[derive(Debug)]
pub(crate) struct Host {
    idx: usize,
    name: String,
    timing: Timing,
    /// The deliberate bug the checker must catch: act and claim whatever the lease says.
    ignore_lease: bool,
    /// The deliberate bug the liveness check must catch: never reclaim our own zones.
    never_reload: bool,
    pub(crate) clock: Clock,
    /// Whether a process runs (false before the first start and after a crash).
    pub(crate) up: bool,
    /// Counts processes on this machine; events addressed to an earlier process are dropped.
    pub(crate) process: u32,
    /// The directory incarnation the process registers under; raised when it is expelled and
    /// on every restart.
    pub(crate) incarnation: u32,
    /// Real time until which the process is stopped (SIGSTOP), if it is.
    pub(crate) paused_until: Option<u64>,
    registered: bool,
    lease: Lease,
    /// Per zone: the epoch at which this host believes it owns it.
    owned: Vec<Option<u64>>,
    /// Per zone: whether a claim is in flight (so a host does not race itself).
    claiming: Vec<bool>,
}

impl Host {
    pub(crate) fn new(
        idx: usize,
        timing: Timing,
        zones: usize,
        clock: Clock,
        breakage: Breakage,
    ) -> Host {
        Host {
            idx,
            name: format!("h{idx}"),
            timing,
            ignore_lease: breakage == Breakage::HostsIgnoreLease,
            never_reload: breakage == Breakage::HostsNeverReload,
            clock,
            up: false,
            process: 0,
            incarnation: 0,
            paused_until: None,
            registered: false,
            lease: Lease::new(timing),
            owned: vec![None; zones],
            claiming: vec![false; zones],
        }
    }

    /// Starts a new process: nothing registered, no lease, no zones.
    pub(crate) fn start(&mut self) {
        self.up = true;
        self.process += 1;
        self.paused_until = None;
        self.reset();
    }

    /// Forgets everything the process held and takes the next incarnation.
    fn reset(&mut self) {
        self.incarnation += 1;
        self.registered = false;
        self.lease = Lease::new(self.timing);
        self.owned.iter_mut().for_each(|z| *z = None);
        self.claiming.iter_mut().for_each(|c| *c = false);
    }

    /// Whether this host acts on `zone` at local time `now`: it believes it owns it and (unless
    /// broken on purpose) its lease holds.
    pub(crate) fn acting_on(&self, zone: usize, now: Millis) -> bool {
        self.up
            && self.owned.get(zone).is_some_and(Option::is_some)
            && (self.ignore_lease || self.lease.may_act(now))
    }

    /// Whether this host believes it owns any zone (and so needs its zone tick).
    pub(crate) fn owns_any(&self) -> bool {
        self.owned.iter().any(Option::is_some)
    }

    /// The epoch at which this host believes it owns `zone`.
    pub(crate) fn owns(&self, zone: usize) -> Option<u64> {
        self.owned.get(zone).copied().flatten()
    }

    pub(crate) fn may_act(&self, now: Millis) -> bool {
        self.registered && self.lease.may_act(now)
    }

    /// The protocol's first step on every wake-up: a host whose lease lapsed stops its zones
    /// before doing anything else.
    fn check_lease(&mut self, now: Millis, report: &mut SimReport, out: &mut Vec<Action>) {
        if self.ignore_lease || self.lease.may_act(now) {
            return;
        }
        let zones = self.drop_all();
        if zones > 0 {
            report.lease_lapses += 1;
            out.push(Action::Note(Note::LeaseLapsed {
                host: self.idx,
                zones,
            }));
        }
    }

    fn drop_all(&mut self) -> usize {
        let n = self.owned.iter().filter(|z| z.is_some()).count();
        self.owned.iter_mut().for_each(|z| *z = None);
        n
    }

    fn send(&self, query: Query, out: &mut Vec<Action>) {
        out.push(Action::Send {
            incarnation: self.incarnation,
            query,
        });
    }

    /// A resumed process checks its lease before anything else.
    pub(crate) fn on_resume(&mut self, now: Millis, report: &mut SimReport, out: &mut Vec<Action>) {
        self.check_lease(now, report, out);
    }

    /// The heartbeat round: register or heartbeat, and (while the lease holds) read the
    /// directory to find orphaned zones.
    pub(crate) fn on_round(&mut self, now: Millis, report: &mut SimReport, out: &mut Vec<Action>) {
        self.check_lease(now, report, out);
        let beat = self.lease.send(now);
        if !self.registered {
            self.send(Query::Register { beat }, out);
            return;
        }
        self.send(Query::Heartbeat { beat }, out);
        if self.ignore_lease || self.lease.may_act(now) {
            self.send(Query::Scan, out);
        }
    }

    /// The zone tick: while the lease holds, act on every owned zone.
    pub(crate) fn on_tick(&mut self, now: Millis, report: &mut SimReport, out: &mut Vec<Action>) {
        self.check_lease(now, report, out);
        if !self.registered || !(self.ignore_lease || self.lease.may_act(now)) {
            return;
        }
        for (zone, epoch) in self.owned.iter().enumerate() {
            if let Some(epoch) = *epoch {
                out.push(Action::Act { zone, epoch });
            }
        }
    }

    /// The answer to a query sent as incarnation `inc`; `None` when the query failed.
    pub(crate) fn on_answer(
        &mut self,
        now: Millis,
        inc: u32,
        query: Query,
        answer: Option<Answer>,
        report: &mut SimReport,
        out: &mut Vec<Action>,
    ) {
        self.check_lease(now, report, out);
        if inc != self.incarnation {
            return; // An answer for an incarnation this process has left behind.
        }
        let Some(answer) = answer else {
            self.on_failure(query);
            return;
        };
        match answer {
            Answer::Registered { beat } => {
                self.lease.landed(beat);
                if !self.registered {
                    self.registered = true;
                    out.push(Action::Note(Note::Registered {
                        host: self.idx,
                        incarnation: inc,
                    }));
                }
            }
            Answer::MustWait { beat } => {
                self.lease.failed(beat);
                out.push(Action::Note(Note::MustWait { host: self.idx }));
            }
            Answer::Landed { beat } => self.lease.landed(beat),
            Answer::Expelled => {
                let zones = self.drop_all();
                report.expulsions += 1;
                out.push(Action::Note(Note::Expelled {
                    host: self.idx,
                    incarnation: inc,
                }));
                if zones > 0 {
                    out.push(Action::Note(Note::LeaseLapsed {
                        host: self.idx,
                        zones,
                    }));
                }
                self.reset();
            }
            Answer::Directory(dir) => self.on_directory(now, &dir, out),
            Answer::Claim {
                zone,
                decision,
                epoch,
            } => {
                if let Some(c) = self.claiming.get_mut(zone) {
                    *c = false;
                }
                let usable = self.registered && (self.ignore_lease || self.lease.may_act(now));
                // Granted but the lease lapsed meanwhile: do not load it; the directory names
                // this host, so a later round reloads it under a fresh epoch.
                if decision == Decision::Take && usable {
                    if let Some(slot) = self.owned.get_mut(zone) {
                        // Two claims of our own may answer out of order: keep the newest epoch.
                        if slot.is_none_or(|e| e < epoch) {
                            *slot = Some(epoch);
                            out.push(Action::Note(Note::Took {
                                host: self.idx,
                                zone,
                                epoch,
                            }));
                        }
                    }
                }
            }
            Answer::Refused { zone, epoch } => {
                // Fenced: someone claimed the zone after us. Stop it, unless we have since
                // reloaded it under a newer epoch ourselves.
                if let Some(slot) = self.owned.get_mut(zone) {
                    if *slot == Some(epoch) {
                        *slot = None;
                        report.fenced_drops += 1;
                        out.push(Action::Note(Note::FencedDrop {
                            host: self.idx,
                            zone,
                            epoch,
                        }));
                    }
                }
            }
        }
    }

    fn on_failure(&mut self, query: Query) {
        match query {
            Query::Register { beat } | Query::Heartbeat { beat } => self.lease.failed(beat),
            Query::Claim { zone } => {
                if let Some(c) = self.claiming.get_mut(zone) {
                    *c = false;
                }
            }
            Query::Scan | Query::Write { .. } | Query::Leave => {}
        }
    }

    /// Claims the zones this host should run: those the directory already assigns to it (a
    /// claim it never heard back from, or zones it stopped when its lease lapsed), and those
    /// whose owner is not alive and for which it is the rendezvous winner among live hosts.
    fn on_directory(&mut self, now: Millis, dir: &Directory, out: &mut Vec<Action>) {
        if !self.registered || !(self.ignore_lease || self.lease.may_act(now)) {
            return;
        }
        let alive: Vec<String> = dir.alive.iter().map(|h| format!("h{h}")).collect();
        for (zone, &(owner, owner_alive)) in dir.zones.iter().enumerate() {
            if self.owned.get(zone).is_some_and(Option::is_some)
                || self.claiming.get(zone).copied().unwrap_or(true)
            {
                continue;
            }
            let mine = match owner {
                Some(o) if o == self.idx => !self.never_reload,
                Some(_) if owner_alive => false,
                _ => {
                    let zone_id = format!("z{zone}");
                    rendezvous(&zone_id, alive.iter().map(String::as_str)) == Some(&self.name)
                }
            };
            if mine {
                if let Some(c) = self.claiming.get_mut(zone) {
                    *c = true;
                }
                self.send(Query::Claim { zone }, out);
            }
        }
    }

    /// A graceful stop: stop every zone, then tell the directory this incarnation left.
    pub(crate) fn leave(&mut self, out: &mut Vec<Action>) {
        self.drop_all();
        if self.registered {
            self.send(Query::Leave, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::db::Directory;

    const ZONES: usize = 4;

    /// Host `h1` of a fleet, registered at local time 0 (its lease holds until 5,000).
    fn registered() -> (Host, SimReport) {
        let mut h = Host::new(
            1,
            Timing::default(),
            ZONES,
            Clock::new(0, 0),
            Breakage::None,
        );
        let mut report = SimReport::default();
        let mut out = Vec::new();
        h.start();
        h.on_round(Millis(0), &mut report, &mut out);
        let Some(Action::Send {
            query: Query::Register { beat },
            incarnation,
        }) = out.pop()
        else {
            panic!("no registration sent");
        };
        let answer = Some(Answer::Registered { beat });
        h.on_answer(
            Millis(5),
            incarnation,
            Query::Register { beat },
            answer,
            &mut report,
            &mut out,
        );
        assert!(h.may_act(Millis(5)));
        (h, report)
    }

    fn take(h: &mut Host, zone: usize, epoch: u64, now: u64, report: &mut SimReport) {
        let answer = Some(Answer::Claim {
            zone,
            decision: Decision::Take,
            epoch,
        });
        let inc = h.incarnation;
        h.on_answer(
            Millis(now),
            inc,
            Query::Claim { zone },
            answer,
            report,
            &mut Vec::new(),
        );
    }

    fn acts(out: &[Action]) -> Vec<(usize, u64)> {
        out.iter()
            .filter_map(|a| match *a {
                Action::Act { zone, epoch } => Some((zone, epoch)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_host_acts_on_its_zones_only_while_its_lease_holds() {
        let (mut h, mut report) = registered();
        take(&mut h, 2, 7, 10, &mut report);
        let mut out = Vec::new();
        h.on_tick(Millis(4_999), &mut report, &mut out);
        assert_eq!(acts(&out), [(2, 7)]);
        out.clear();
        h.on_tick(Millis(5_000), &mut report, &mut out);
        assert!(acts(&out).is_empty());
        assert!(matches!(
            out[..],
            [Action::Note(Note::LeaseLapsed { zones: 1, .. })]
        ));
        assert_eq!(h.owns(2), None, "stopped, not merely paused");
        assert_eq!(report.lease_lapses, 1);
    }

    #[test]
    fn a_refused_write_stops_that_zone_unless_it_was_reloaded_since() {
        let (mut h, mut report) = registered();
        take(&mut h, 0, 3, 10, &mut report);
        take(&mut h, 1, 5, 10, &mut report);
        let mut out = Vec::new();
        let refused = |zone, epoch| Some(Answer::Refused { zone, epoch });
        let inc = h.incarnation;
        let write = Query::Write { zone: 0, epoch: 3 };
        h.on_answer(Millis(20), inc, write, refused(0, 3), &mut report, &mut out);
        assert_eq!(h.owns(0), None);
        // A refusal of an older epoch than the one we now hold says nothing about the zone.
        let write = Query::Write { zone: 1, epoch: 4 };
        h.on_answer(Millis(20), inc, write, refused(1, 4), &mut report, &mut out);
        assert_eq!(h.owns(1), Some(5));
        assert_eq!(report.fenced_drops, 1);
    }

    #[test]
    fn a_claim_granted_after_the_lease_lapsed_is_not_loaded() {
        let (mut h, mut report) = registered();
        take(&mut h, 0, 1, 6_000, &mut report);
        assert_eq!(h.owns(0), None);
    }

    #[test]
    fn claims_answered_out_of_order_keep_the_newest_epoch() {
        let (mut h, mut report) = registered();
        take(&mut h, 0, 4, 10, &mut report);
        take(&mut h, 0, 3, 11, &mut report);
        assert_eq!(h.owns(0), Some(4));
    }

    #[test]
    fn an_expelled_host_stops_everything_and_starts_over_under_a_new_incarnation() {
        let (mut h, mut report) = registered();
        take(&mut h, 0, 1, 10, &mut report);
        let inc = h.incarnation;
        let mut out = Vec::new();
        let beat = h.lease.send(Millis(100));
        let q = Query::Heartbeat { beat };
        h.on_answer(
            Millis(200),
            inc,
            q,
            Some(Answer::Expelled),
            &mut report,
            &mut out,
        );
        assert_eq!(h.owns(0), None);
        assert_eq!(h.incarnation, inc + 1);
        assert!(!h.may_act(Millis(200)));
        out.clear();
        h.on_round(Millis(1_000), &mut report, &mut out);
        assert!(matches!(
            out[..],
            [Action::Send { query: Query::Register { .. }, incarnation }] if incarnation == inc + 1
        ));
        // Answers to the old incarnation are ignored.
        take(&mut h, 1, 9, 1_010, &mut report);
        assert_eq!(h.owns(1), None);
    }

    /// The zones `h` claims after reading `dir` at local time `now`.
    fn claims_after(h: &mut Host, dir: &Directory, now: u64) -> Vec<usize> {
        let (mut out, mut report) = (Vec::new(), SimReport::default());
        let answer = Some(Answer::Directory(Box::new(dir.clone())));
        let inc = h.incarnation;
        h.on_answer(Millis(now), inc, Query::Scan, answer, &mut report, &mut out);
        out.iter()
            .filter_map(|a| match *a {
                Action::Send {
                    query: Query::Claim { zone },
                    ..
                } => Some(zone),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_directory_leads_to_claims_of_own_and_orphaned_zones_it_wins() {
        // z0: assigned to us (h1) but not running; z1: a live owner; z2: a dead owner; z3: nobody.
        let zones = vec![
            (Some(1), true),
            (Some(0), true),
            (Some(2), false),
            (None, false),
        ];
        let alone = Directory {
            zones: zones.clone(),
            alive: vec![1],
        };
        let (mut h, _) = registered();
        assert_eq!(claims_after(&mut h, &alone, 100), [0, 2, 3]);
        assert!(
            claims_after(&mut h, &alone, 200).is_empty(),
            "claims in flight are not resent"
        );
        // With h0 alive too, the pinned hash gives both orphans to h0.
        assert_eq!(rendezvous("z2", ["h0", "h1"]), Some("h0"));
        assert_eq!(rendezvous("z3", ["h0", "h1"]), Some("h0"));
        let shared = Directory {
            zones,
            alive: vec![0, 1],
        };
        let (mut h, _) = registered();
        assert_eq!(claims_after(&mut h, &shared, 100), [0]);
    }
}
