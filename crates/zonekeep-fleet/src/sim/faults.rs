//! The faults a seed chooses: process pauses, crashes and graceful stops, partitions between a host
//! and the database, and the fate of every message (slow, hanging, lost). All of them happen
//! inside the fault window; after it the network is healthy and every process runs, so the
//! liveness check knows when faults stopped.

use super::rng::Rng;
use super::SimReport;

/// A process fault planned for one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessFault {
    /// Stopped (SIGSTOP) for `ms`.
    Pause { ms: u64 },
    /// Gone for `ms`, then restarted under the same host id; `graceful` stops first leave the
    /// directory, crashes do not.
    Down { ms: u64, graceful: bool },
}

/// Everything planned for one run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// `(host, start, fault)`, non-overlapping per host, each over before the window ends.
    pub(crate) process: Vec<(usize, u64, ProcessFault)>,
    /// Per host, the partitions `[start, end)` from the database, sorted and disjoint.
    pub(crate) partitions: Vec<Vec<(u64, u64)>>,
    /// Per-message fault rates, in per mille.
    pub(crate) slow: u64,
    pub(crate) hang: u64,
    pub(crate) lose: u64,
}

/// The longest pause, downtime and partition a seed may choose (ms).
const MAX_PAUSE: u64 = 30_000;
const MAX_DOWN: u64 = 15_000;
const MAX_PARTITION: u64 = 20_000;

impl Plan {
    /// Chooses the faults of a run with `hosts` hosts and a fault window of `window` ms.
    pub(crate) fn choose(rng: &mut Rng, hosts: usize, window: u64) -> Plan {
        let mut process = Vec::new();
        let mut partitions = Vec::with_capacity(hosts);
        for host in 0..hosts {
            // Some hosts are left alone, so runs mix healthy and troubled hosts.
            if !rng.chance(300) {
                let mut t = rng.range(1_000, window / 3);
                while t < window {
                    let room = window - t;
                    let fault = if rng.chance(600) {
                        ProcessFault::Pause {
                            ms: rng.range(0, MAX_PAUSE).min(room),
                        }
                    } else {
                        ProcessFault::Down {
                            ms: rng.range(0, MAX_DOWN).min(room),
                            graceful: rng.chance(330),
                        }
                    };
                    process.push((host, t, fault));
                    let len = match fault {
                        ProcessFault::Pause { ms } | ProcessFault::Down { ms, .. } => ms,
                    };
                    t += len + rng.range(2_000, window / 2);
                }
            }
            let mut cuts = Vec::new();
            if !rng.chance(400) {
                let mut t = rng.range(1_000, window / 2);
                while t < window {
                    let end = (t + rng.range(0, MAX_PARTITION)).min(window);
                    cuts.push((t, end));
                    t = end + rng.range(3_000, window / 2);
                }
            }
            partitions.push(cuts);
        }
        Plan {
            process,
            partitions,
            slow: rng.range(0, 60),
            hang: rng.range(0, 8),
            lose: rng.range(0, 8),
        }
    }
}

/// Where a message ends up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Delivered at this real time.
    At(u64),
    /// Lost; the sender's connection reports the failure at this real time.
    Lost(u64),
}

/// The links between each host and the database.
#[derive(Debug)]
pub(crate) struct Network {
    rng: Rng,
    partitions: Vec<Vec<(u64, u64)>>,
    slow: u64,
    hang: u64,
    lose: u64,
    /// Messages sent from here on are never faulted.
    window_end: u64,
    /// The latest delivery (or failure report) of any faulted message.
    pub(crate) last_faulted: u64,
}

impl Network {
    pub(crate) fn new(rng: Rng, plan: &Plan, window_end: u64) -> Network {
        Network {
            rng,
            partitions: plan.partitions.clone(),
            slow: plan.slow,
            hang: plan.hang,
            lose: plan.lose,
            window_end,
            last_faulted: 0,
        }
    }

    /// The partition of `host`'s link covering real time `now`, if any.
    fn partition(&self, host: usize, now: u64) -> Option<(u64, u64)> {
        self.partitions
            .get(host)?
            .iter()
            .find(|&&(start, end)| start <= now && now < end)
            .copied()
    }

    /// The fate of a message crossing `host`'s link (either way) at real time `now`.
    pub(crate) fn carry(&mut self, host: usize, now: u64, report: &mut SimReport) -> Delivery {
        let cut = self.partition(host, now);
        let rng = &mut self.rng;
        let fate = if let Some((_, end)) = cut {
            // The connection hangs until the partition heals, then the message either goes
            // through late or the connection breaks.
            let at = end + rng.range(1, 50);
            if rng.chance(500) {
                Delivery::At(at)
            } else {
                Delivery::Lost(at)
            }
        } else if now >= self.window_end {
            return Delivery::At(now + rng.range(1, 10));
        } else if rng.chance(self.hang) {
            report.hung_queries += 1;
            Delivery::At(now + rng.range(5_000, 30_000))
        } else if rng.chance(self.lose) {
            report.lost_queries += 1;
            Delivery::Lost(now + rng.range(100, 3_000))
        } else if rng.chance(self.slow) {
            report.slow_queries += 1;
            Delivery::At(now + rng.range(0, 3_000))
        } else {
            return Delivery::At(now + rng.range(1, 10));
        };
        let (Delivery::At(t) | Delivery::Lost(t)) = fate;
        self.last_faulted = self.last_faulted.max(t);
        fate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_stay_inside_the_window_and_do_not_overlap() {
        for seed in 0..200 {
            let mut rng = Rng::new(seed, 0);
            let plan = Plan::choose(&mut rng, 5, 40_000);
            for host in 0..5 {
                let mut last_end = 0;
                for &(_, start, fault) in plan.process.iter().filter(|p| p.0 == host) {
                    let len = match fault {
                        ProcessFault::Pause { ms } | ProcessFault::Down { ms, .. } => ms,
                    };
                    assert!(start >= last_end && start + len <= 40_000, "seed {seed}");
                    last_end = start + len;
                }
                let mut last_end = 0;
                for &(start, end) in &plan.partitions[host] {
                    assert!(
                        start >= last_end && start <= end && end <= 40_000,
                        "seed {seed}"
                    );
                    last_end = end;
                }
            }
        }
    }

    #[test]
    fn a_partition_holds_messages_until_it_heals_and_nothing_is_faulted_after_the_window() {
        let plan = Plan {
            process: Vec::new(),
            partitions: vec![vec![(1_000, 5_000)]],
            slow: 1_000,
            hang: 0,
            lose: 0,
        };
        let mut net = Network::new(Rng::new(1, 1), &plan, 10_000);
        let mut report = SimReport::default();
        for _ in 0..20 {
            let (Delivery::At(t) | Delivery::Lost(t)) = net.carry(0, 2_000, &mut report);
            assert!((5_001..=5_050).contains(&t));
        }
        assert!(net.last_faulted >= 5_001);
        for _ in 0..20 {
            let d = net.carry(0, 10_000, &mut report);
            assert!(matches!(d, Delivery::At(t) if (10_001..=10_010).contains(&t)));
        }
    }
}
