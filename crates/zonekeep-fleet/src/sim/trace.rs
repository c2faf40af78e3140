//! The event trace a violation is reported with: the last events of the run, kept as small
//! records and formatted only when something went wrong.
//!
//! Writes are by far the most frequent events, so they get a ring of their own: a long run of
//! writes must not push the pauses, partitions and claims that explain a violation out of view.

use std::collections::VecDeque;
use std::fmt;

use crate::claim::Decision;

/// One traced event. Hosts and zones are indices; they print as the ids the simulation gives
/// them (`h0`, `z3`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Note {
    Start {
        host: usize,
        incarnation: u32,
    },
    Crash {
        host: usize,
        graceful: bool,
    },
    Pause {
        host: usize,
        ms: u64,
    },
    Resume {
        host: usize,
    },
    LinkDown {
        host: usize,
        ms: u64,
    },
    LinkUp {
        host: usize,
    },
    Registered {
        host: usize,
        incarnation: u32,
    },
    MustWait {
        host: usize,
    },
    Expelled {
        host: usize,
        incarnation: u32,
    },
    LeaseLapsed {
        host: usize,
        zones: usize,
    },
    Claim {
        host: usize,
        zone: usize,
        decision: Decision,
        epoch: u64,
    },
    Took {
        host: usize,
        zone: usize,
        epoch: u64,
    },
    Refused {
        host: usize,
        zone: usize,
        epoch: u64,
        current: u64,
    },
    FencedDrop {
        host: usize,
        zone: usize,
        epoch: u64,
    },
    Act {
        host: usize,
        zone: usize,
        epoch: u64,
    },
    Accepted {
        host: usize,
        zone: usize,
        epoch: u64,
    },
    FaultsOver,
}

impl Note {
    /// Whether this is one of the frequent write events that go to their own ring.
    fn is_write(&self) -> bool {
        matches!(self, Note::Act { .. } | Note::Accepted { .. })
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Note::Start { host, incarnation } => {
                write!(f, "h{host} starts (incarnation {incarnation})")
            }
            Note::Crash {
                host,
                graceful: true,
            } => write!(f, "h{host} leaves and stops"),
            Note::Crash {
                host,
                graceful: false,
            } => write!(f, "h{host} crashes"),
            Note::Pause { host, ms } => write!(f, "h{host} paused for {ms} ms"),
            Note::Resume { host } => write!(f, "h{host} resumes"),
            Note::LinkDown { host, ms } => {
                write!(f, "h{host} cut off from the database for {ms} ms")
            }
            Note::LinkUp { host } => write!(f, "h{host} reaches the database again"),
            Note::Registered { host, incarnation } => {
                write!(f, "h{host} registered (incarnation {incarnation})")
            }
            Note::MustWait { host } => write!(f, "h{host} must wait: its old incarnation is alive"),
            Note::Expelled { host, incarnation } => {
                write!(f, "h{host} expelled: incarnation {incarnation} is dead")
            }
            Note::LeaseLapsed { host, zones } => {
                write!(f, "h{host} lease lapsed, stops {zones} zone(s)")
            }
            Note::Claim {
                host,
                zone,
                decision,
                epoch,
            } => {
                write!(
                    f,
                    "db: h{host} claims z{zone}: {decision:?} (epoch {epoch})"
                )
            }
            Note::Took { host, zone, epoch } => write!(f, "h{host} owns z{zone} at epoch {epoch}"),
            Note::Refused {
                host,
                zone,
                epoch,
                current,
            } => {
                write!(
                    f,
                    "db: refused h{host}'s write to z{zone} at epoch {epoch} < {current}"
                )
            }
            Note::FencedDrop { host, zone, epoch } => {
                write!(f, "h{host} fenced out of z{zone} (epoch {epoch}), stops it")
            }
            Note::Act { host, zone, epoch } => write!(f, "h{host} writes z{zone} at epoch {epoch}"),
            Note::Accepted { host, zone, epoch } => {
                write!(
                    f,
                    "db: accepted h{host}'s write to z{zone} at epoch {epoch}"
                )
            }
            Note::FaultsOver => write!(f, "faults over"),
        }
    }
}

/// The last events of a run, in two bounded rings.
#[derive(Debug)]
pub(crate) struct Trace {
    events: VecDeque<(u64, Note)>,
    writes: VecDeque<(u64, Note)>,
    cap: usize,
}

impl Trace {
    /// A trace keeping the last `cap` events and the last `cap / 4` writes.
    pub(crate) fn new(cap: usize) -> Trace {
        Trace {
            events: VecDeque::with_capacity(cap),
            writes: VecDeque::with_capacity(cap / 4),
            cap,
        }
    }

    /// Records `note` at real time `at` (ms).
    pub(crate) fn push(&mut self, at: u64, note: Note) {
        let (ring, cap) = if note.is_write() {
            (&mut self.writes, self.cap / 4)
        } else {
            (&mut self.events, self.cap)
        };
        if cap == 0 {
            return;
        }
        if ring.len() == cap {
            ring.pop_front();
        }
        ring.push_back((at, note));
    }

    /// Both rings merged in time order, one line per event.
    pub(crate) fn render(&self) -> Vec<String> {
        let mut all: Vec<&(u64, Note)> = self.events.iter().chain(&self.writes).collect();
        // Stable: events of the same millisecond keep their ring order.
        all.sort_by_key(|(at, _)| *at);
        all.into_iter()
            .map(|(at, note)| format!("{at:>8} ms  {note}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_do_not_push_other_events_out() {
        let mut t = Trace::new(8);
        t.push(1, Note::Pause { host: 0, ms: 20 });
        for at in 2..100 {
            t.push(
                at,
                Note::Act {
                    host: 1,
                    zone: 0,
                    epoch: 1,
                },
            );
        }
        let lines = t.render();
        assert_eq!(
            lines.len(),
            3,
            "one event and the last two writes: {lines:?}"
        );
        assert!(lines[0].contains("h0 paused for 20 ms"));
        assert!(lines[2].contains("99 ms  h1 writes z0 at epoch 1"));
    }
}
