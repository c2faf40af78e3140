//! The scheduler: one priority queue of events in simulated real time (ms), processed in order,
//! on one thread, with no clock but its own. Events for one host are delivered to it with its
//! local time; a paused host's events wait until it resumes; a crashed process's events vanish.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::db::{Answer, Database, Query};
use super::faults::{Delivery, Network, Plan, ProcessFault};
use super::host::{Action, Clock, Host};
use super::invariants::{self, Violation, ViolationKind};
use super::rng::Rng;
use super::trace::{Note, Trace};
use super::{Breakage, SimConfig, SimReport};
use crate::lease::whole_millis;

/// Something that happens at one instant.
#[derive(Debug)]
enum Event {
    /// A host process starts (`restart`: after a crash or stop, not the first boot).
    Start { host: usize, restart: bool },
    /// A process's heartbeat round timer.
    Round { host: usize, process: u32 },
    /// A process's zone tick timer (runs while it owns zones).
    Tick { host: usize, process: u32 },
    /// A query reaches the database.
    Arrive {
        host: usize,
        process: u32,
        inc: u32,
        query: Query,
    },
    /// A query's outcome reaches its host: an answer, or `None` for a failure.
    Outcome {
        host: usize,
        process: u32,
        inc: u32,
        query: Query,
        answer: Option<Answer>,
    },
    /// A planned pause, crash or stop.
    Fault { host: usize, fault: ProcessFault },
    /// A paused process continues.
    Resume { host: usize, process: u32 },
    /// A partition starts (`Some(length)`) or heals; the network already knows, this traces it.
    Link { host: usize, down_ms: Option<u64> },
    /// The fault window closes.
    WindowEnd,
    /// The liveness check; the run ends with it.
    Deadline,
}

/// The events waiting to happen: a min-heap of small keys `(time, order of scheduling, slot)`
/// over a slab of events, so the heap moves 24-byte keys instead of whole events.
#[derive(Debug, Default)]
struct Queue {
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    slab: Vec<Option<Event>>,
    free: Vec<usize>,
    seq: u64,
}

impl Queue {
    fn push(&mut self, at: u64, event: Event) {
        let slot = match self.free.pop() {
            Some(slot) => {
                if let Some(s) = self.slab.get_mut(slot) {
                    *s = Some(event);
                }
                slot
            }
            None => {
                self.slab.push(Some(event));
                self.slab.len() - 1
            }
        };
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, slot)));
    }

    /// The earliest event; of simultaneous ones, the first scheduled.
    fn pop(&mut self) -> Option<(u64, Event)> {
        loop {
            let Reverse((at, _, slot)) = self.heap.pop()?;
            if let Some(event) = self.slab.get_mut(slot).and_then(Option::take) {
                self.free.push(slot);
                return Some((at, event));
            }
        }
    }
}

/// One run of the simulation.
pub(crate) struct World<'c> {
    config: &'c SimConfig,
    seed: u64,
    now: u64,
    queue: Queue,
    db: Database,
    hosts: Vec<Host>,
    net: Network,
    trace: Trace,
    report: SimReport,
    tick: u64,
    round: u64,
    /// Per host: whether its zone tick is scheduled. A host that owns no zone has nothing to
    /// tick, so its timer stops until it owns one again.
    ticking: Vec<bool>,
    /// When the last fault ended, once the window closed.
    faults_over: Option<u64>,
    actions: Vec<Action>,
}

impl<'c> World<'c> {
    pub(crate) fn new(seed: u64, config: &'c SimConfig) -> World<'c> {
        let mut rng = Rng::new(seed, 0);
        let min = config.min_hosts.max(1);
        let n =
            usize::try_from(rng.range(min as u64, config.max_hosts.max(min) as u64)).unwrap_or(min);
        let zones = config.zones;
        let window = whole_millis(config.fault_window);
        let plan = Plan::choose(&mut rng, n, window);
        let drift = i64::from(config.max_drift_ppm);
        let hosts = (0..n)
            .map(|idx| {
                let offset = rng.range(0, 1 << 40);
                let ppm =
                    i64::try_from(rng.range(0, 2 * drift.unsigned_abs())).unwrap_or(0) - drift;
                Host::new(
                    idx,
                    config.timing,
                    zones,
                    Clock::new(offset, ppm),
                    config.breakage,
                )
            })
            .collect();
        let db = Database::new(
            config.timing,
            rng.range(0, 1 << 40),
            n,
            zones,
            config.breakage == Breakage::DatabaseIgnoresEpoch,
        );
        let net = Network::new(Rng::new(seed, 1), &plan, window);
        let mut world = World {
            config,
            seed,
            now: 0,
            queue: Queue::default(),
            db,
            hosts,
            net,
            trace: Trace::new(config.trace_len),
            report: SimReport {
                seed,
                hosts: n,
                ..SimReport::default()
            },
            tick: whole_millis(config.tick_every).max(1),
            round: whole_millis(config.timing.heartbeat_every).max(1),
            ticking: vec![false; n],
            faults_over: None,
            actions: Vec::new(),
        };
        for host in 0..n {
            let at = rng.range(0, 500);
            world.schedule(
                at,
                Event::Start {
                    host,
                    restart: false,
                },
            );
        }
        for &(host, at, fault) in &plan.process {
            world.schedule(at, Event::Fault { host, fault });
        }
        for (host, cuts) in plan.partitions.iter().enumerate() {
            for &(start, end) in cuts {
                world.schedule(
                    start,
                    Event::Link {
                        host,
                        down_ms: Some(end - start),
                    },
                );
                world.schedule(
                    end,
                    Event::Link {
                        host,
                        down_ms: None,
                    },
                );
            }
        }
        world.schedule(window, Event::WindowEnd);
        world
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.queue.push(at, event);
    }

    fn note(&mut self, note: Note) {
        self.trace.push(self.now, note);
    }

    fn violation(&self, kind: ViolationKind) -> Violation {
        Violation {
            seed: self.seed,
            at_ms: self.now,
            kind,
            trace: self.trace.render(),
        }
    }

    /// Runs until the liveness deadline or the first violation.
    pub(crate) fn run(mut self) -> Result<SimReport, Violation> {
        while let Some((at, event)) = self.queue.pop() {
            self.now = at;
            self.report.events += 1;
            if self.handle(event)? {
                break;
            }
        }
        self.report.simulated_ms = self.now;
        Ok(self.report)
    }

    /// Whether an event addressed to `process` of `host` can still be delivered: that process
    /// is the one running (a crashed process's timers and answers vanish with it).
    fn deliverable(&self, host: usize, process: u32) -> bool {
        self.hosts
            .get(host)
            .is_some_and(|h| h.up && h.process == process)
    }

    fn paused_until(&self, host: usize) -> Option<u64> {
        self.hosts
            .get(host)
            .and_then(|h| h.paused_until)
            .filter(|&until| until > self.now)
    }

    /// Handles one event; `Ok(true)` ends the run.
    fn handle(&mut self, event: Event) -> Result<bool, Violation> {
        // Events a paused process would handle wait, in order, until it resumes.
        if let Event::Round { host, process }
        | Event::Tick { host, process }
        | Event::Outcome { host, process, .. } = event
        {
            if !self.deliverable(host, process) {
                return Ok(false);
            }
            if let Some(until) = self.paused_until(host) {
                self.schedule(until, event);
                return Ok(false);
            }
        }
        match event {
            Event::Start { host, restart } => self.start(host, restart),
            Event::Round { host, process } => {
                self.with_host(host, |h, now, report, out| h.on_round(now, report, out))?;
                let span = self.span(host, self.round);
                self.schedule(self.now + span, Event::Round { host, process });
            }
            Event::Tick { host, .. } => {
                if let Some(t) = self.ticking.get_mut(host) {
                    *t = false;
                }
                self.with_host(host, |h, now, report, out| h.on_tick(now, report, out))?;
            }
            Event::Arrive {
                host,
                process,
                inc,
                query,
            } => self.arrive(host, process, inc, query)?,
            Event::Outcome {
                host,
                inc,
                query,
                answer,
                ..
            } => self.with_host(host, |h, now, report, out| {
                h.on_answer(now, inc, query, answer, report, out);
            })?,
            Event::Fault { host, fault } => self.fault(host, fault),
            Event::Resume { host, process } => {
                if self.deliverable(host, process) {
                    if let Some(h) = self.hosts.get_mut(host) {
                        h.paused_until = None;
                    }
                    self.note(Note::Resume { host });
                    self.with_host(host, |h, now, report, out| h.on_resume(now, report, out))?;
                }
            }
            Event::Link { host, down_ms } => match down_ms {
                Some(ms) => {
                    self.report.partitions += 1;
                    self.note(Note::LinkDown { host, ms });
                }
                None => self.note(Note::LinkUp { host }),
            },
            Event::WindowEnd => {
                // Every fault was planned inside the window and every faulted message's fate is
                // known by now; later messages are never faulted.
                let over = self.now.max(self.net.last_faulted);
                self.faults_over = Some(over);
                self.note(Note::FaultsOver);
                self.schedule(over + self.settle(), Event::Deadline);
            }
            Event::Deadline => {
                let over = self.faults_over.unwrap_or(0).max(self.net.last_faulted);
                if over + self.settle() > self.now {
                    // A faulted message still in flight: wait for it.
                    self.faults_over = Some(over);
                    self.schedule(over + self.settle(), Event::Deadline);
                    return Ok(false);
                }
                invariants::check_served(
                    &self.db,
                    &self.hosts,
                    self.config.zones,
                    self.now,
                    self.now - over,
                )
                .map_err(|kind| self.violation(kind))?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// How long after faults stop every zone must be served: `dead_after` plus a few heartbeat
    /// rounds (to notice the death, claim, and hear back).
    fn settle(&self) -> u64 {
        whole_millis(self.config.timing.dead_after) + 5 * self.round
    }

    /// The real time `local_ms` of `host`'s clock take.
    fn span(&self, host: usize, local_ms: u64) -> u64 {
        self.hosts
            .get(host)
            .map_or(local_ms, |h| h.clock.real_span(local_ms))
    }

    fn start(&mut self, host: usize, restart: bool) {
        let Some(h) = self.hosts.get_mut(host) else {
            return;
        };
        h.start();
        let (process, incarnation) = (h.process, h.incarnation);
        if restart {
            self.report.restarts += 1;
        }
        if let Some(t) = self.ticking.get_mut(host) {
            *t = false;
        }
        self.note(Note::Start { host, incarnation });
        self.schedule(self.now, Event::Round { host, process });
    }

    fn fault(&mut self, host: usize, fault: ProcessFault) {
        let Some(h) = self.hosts.get_mut(host) else {
            return;
        };
        if !h.up || h.paused_until.is_some() {
            return;
        }
        match fault {
            ProcessFault::Pause { ms } => {
                h.paused_until = Some(self.now + ms);
                let process = h.process;
                self.report.pauses += 1;
                self.note(Note::Pause { host, ms });
                self.schedule(self.now + ms, Event::Resume { host, process });
            }
            ProcessFault::Down { ms, graceful } => {
                let mut out = std::mem::take(&mut self.actions);
                if graceful {
                    h.leave(&mut out);
                    self.report.leaves += 1;
                } else {
                    self.report.crashes += 1;
                }
                let process = h.process;
                h.up = false;
                self.note(Note::Crash { host, graceful });
                // The leave query is already on the wire when the process exits.
                for action in out.drain(..) {
                    if let Action::Send { incarnation, query } = action {
                        self.send(host, process, incarnation, query);
                    }
                }
                self.actions = out;
                self.schedule(
                    self.now + ms,
                    Event::Start {
                        host,
                        restart: true,
                    },
                );
            }
        }
    }

    /// Runs one host handler with the host's local time and carries out what it asks.
    fn with_host(
        &mut self,
        host: usize,
        f: impl FnOnce(&mut Host, crate::lease::Millis, &mut SimReport, &mut Vec<Action>),
    ) -> Result<(), Violation> {
        let Some(h) = self.hosts.get_mut(host) else {
            return Ok(());
        };
        let mut out = std::mem::take(&mut self.actions);
        let local = h.clock.local(self.now);
        let process = h.process;
        f(h, local, &mut self.report, &mut out);
        let mut result = Ok(());
        for action in out.drain(..) {
            match action {
                Action::Send { incarnation, query } => {
                    self.send(host, process, incarnation, query);
                }
                Action::Act { zone, epoch } => {
                    if let Err(kind) =
                        invariants::check_one_actor(&self.hosts, host, zone, self.now)
                    {
                        self.note(Note::Act { host, zone, epoch });
                        result = Err(self.violation(kind));
                        break;
                    }
                    self.note(Note::Act { host, zone, epoch });
                    let inc = self.hosts.get(host).map_or(0, |h| h.incarnation);
                    self.send(host, process, inc, Query::Write { zone, epoch });
                }
                Action::Note(note) => self.note(note),
            }
        }
        out.clear();
        self.actions = out;
        // Keep the zone tick running while the host owns zones.
        let owns = self.hosts.get(host).is_some_and(Host::owns_any);
        if result.is_ok() && owns && self.ticking.get(host) == Some(&false) {
            if let Some(t) = self.ticking.get_mut(host) {
                *t = true;
            }
            let span = self.span(host, self.tick);
            self.schedule(self.now + span, Event::Tick { host, process });
        }
        result
    }

    fn send(&mut self, host: usize, process: u32, inc: u32, query: Query) {
        match self.net.carry(host, self.now, &mut self.report) {
            Delivery::At(at) => self.schedule(
                at,
                Event::Arrive {
                    host,
                    process,
                    inc,
                    query,
                },
            ),
            Delivery::Lost(at) => self.schedule(
                at,
                Event::Outcome {
                    host,
                    process,
                    inc,
                    query,
                    answer: None,
                },
            ),
        }
    }

    fn arrive(
        &mut self,
        host: usize,
        process: u32,
        inc: u32,
        query: Query,
    ) -> Result<(), Violation> {
        let applied = self.db.apply(self.now, host, inc, query, &mut self.report);
        if let Some(note) = applied.note {
            self.note(note);
        }
        if let Some(write) = applied.accepted {
            invariants::check_fenced(&write).map_err(|kind| self.violation(kind))?;
        }
        if let Some(answer) = applied.answer {
            let answer = match self.net.carry(host, self.now, &mut self.report) {
                Delivery::At(at) => (at, Some(answer)),
                // Applied, but the host only hears that the query failed.
                Delivery::Lost(at) => (at, None),
            };
            self.schedule(
                answer.0,
                Event::Outcome {
                    host,
                    process,
                    inc,
                    query,
                    answer: answer.1,
                },
            );
        }
        Ok(())
    }
}
