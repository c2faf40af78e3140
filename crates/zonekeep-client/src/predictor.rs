//! `Predictor`: client-side prediction of the player's own entity, reconciled against the server.
//!
//! The player should see its own input take effect at once, not a round trip later. The game
//! supplies the same `step(&state, &input) -> state` the zone runs; the predictor applies each input
//! as it is sent and remembers it. When a Delta arrives it carries the server's authoritative state
//! for the player's entity and the last input the zone processed (`ack`); the predictor drops every
//! input up to the ack (processed or refused alike — either way the server state reflects it) and
//! replays the rest on top of the server state. If the result differs from what was predicted, the
//! display either snaps to it or eases from the old display over a duration.
//!
//! Pure: time enters as microseconds supplied by the caller.

use std::collections::VecDeque;
use std::fmt;

/// The game's simulation step for the controlled entity.
pub type StepFn<S, I> = Box<dyn Fn(&S, &I) -> S + Send + Sync>;

/// Blends two states: `blend(from, to, t)` with `t` in `[0, 1]` (0 = `from`, 1 = `to`).
pub type BlendFn<S> = Box<dyn Fn(&S, &S, f32) -> S + Send + Sync>;

/// How a correction reaches the display.
pub enum Smoothing<S> {
    /// The display jumps to the corrected state at once.
    Snap,
    /// The display eases from where it was to the corrected prediction over `duration_us`.
    Ease {
        /// How long the error takes to vanish (µs).
        duration_us: u64,
        /// Interpolates between two states.
        blend: BlendFn<S>,
    },
}

impl<S> fmt::Debug for Smoothing<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Smoothing::Snap => f.write_str("Snap"),
            Smoothing::Ease { duration_us, .. } => f
                .debug_struct("Ease")
                .field("duration_us", duration_us)
                .finish(),
        }
    }
}

/// What one reconciliation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconciled {
    /// Inputs dropped because the server acknowledged them.
    pub acked: usize,
    /// Inputs replayed on top of the server state.
    pub replayed: usize,
    /// The corrected prediction differs from the previous one.
    pub diverged: bool,
}

/// Counters of the predictor's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PredictorStats {
    /// Reconciliations performed.
    pub reconciliations: u64,
    /// Reconciliations whose result differed from the prediction.
    pub corrections: u64,
    /// Inputs dropped unacknowledged because the pending buffer was full.
    pub overflowed: u64,
}

struct Easing<S> {
    /// The display state at the correction, advanced by every input since (so the player's own
    /// motion keeps going while the error fades).
    from: S,
    start_us: u64,
}

/// Predicts the controlled entity's state `S` from inputs `I`.
pub struct Predictor<S, I> {
    step: StepFn<S, I>,
    smoothing: Smoothing<S>,
    capacity: usize,
    pending: VecDeque<(u32, I)>,
    predicted: Option<S>,
    /// The server state of the last reconciliation: what a refused input is replayed without.
    base: Option<S>,
    easing: Option<Easing<S>>,
    last_ack: u32,
    stats: PredictorStats,
}

impl<S, I> fmt::Debug for Predictor<S, I>
where
    S: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Predictor")
            .field("pending", &self.pending.len())
            .field("predicted", &self.predicted)
            .field("smoothing", &self.smoothing)
            .field("last_ack", &self.last_ack)
            .field("stats", &self.stats)
            .finish()
    }
}

impl<S: Clone + PartialEq, I> Predictor<S, I> {
    /// Default bound of unacknowledged inputs: several seconds of input at 60 Hz.
    pub const DEFAULT_CAPACITY: usize = 512;

    /// A predictor with the game's step function, snapping corrections.
    pub fn new(step: impl Fn(&S, &I) -> S + Send + Sync + 'static) -> Self {
        Self {
            step: Box::new(step),
            smoothing: Smoothing::Snap,
            capacity: Self::DEFAULT_CAPACITY,
            pending: VecDeque::new(),
            predicted: None,
            base: None,
            easing: None,
            last_ack: 0,
            stats: PredictorStats::default(),
        }
    }

    /// Sets how corrections reach the display.
    pub fn with_smoothing(mut self, smoothing: Smoothing<S>) -> Self {
        self.smoothing = smoothing;
        self
    }

    /// Sets the bound of unacknowledged inputs (at least 1).
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    /// Records an input just sent with sequence `seq` and applies it to the prediction. Before the
    /// first server state there is nothing to predict from; the input is still kept for replay.
    pub fn record(&mut self, seq: u32, input: I) {
        if seq <= self.last_ack {
            return;
        }
        if let Some(p) = &self.predicted {
            self.predicted = Some((self.step)(p, &input));
        }
        if let Some(e) = &mut self.easing {
            e.from = (self.step)(&e.from, &input);
        }
        if self.pending.len() >= self.capacity {
            self.pending.pop_front();
            self.stats.overflowed += 1;
        }
        self.pending.push_back((seq, input));
    }

    /// Reconciles with the server: `server` is the controlled entity's state at the patch whose
    /// ack is `ack`. `now_us` starts an ease if the prediction was wrong.
    pub fn reconcile(&mut self, ack: u32, server: S, now_us: u64) -> Reconciled {
        let before = self.pending.len();
        // Acks only move forward; a stale one (reordered) must not resurrect dropped inputs.
        let ack = ack.max(self.last_ack);
        self.last_ack = ack;
        while self.pending.front().is_some_and(|(seq, _)| *seq <= ack) {
            self.pending.pop_front();
        }
        let acked = before - self.pending.len();
        self.base = Some(server.clone());
        let mut state = server;
        for (_, input) in &self.pending {
            state = (self.step)(&state, input);
        }
        let display_before = self.display(now_us);
        let diverged = self.predicted.as_ref().is_some_and(|p| *p != state);
        self.stats.reconciliations += 1;
        if diverged {
            self.stats.corrections += 1;
            if let (Smoothing::Ease { .. }, Some(from)) = (&self.smoothing, display_before) {
                self.easing = Some(Easing {
                    from,
                    start_us: now_us,
                });
            }
        }
        self.predicted = Some(state);
        Reconciled {
            acked,
            replayed: self.pending.len(),
            diverged,
        }
    }

    /// The host refused input `seq` (PROTOCOL.md §5.6): it will never be applied, so it leaves the
    /// pending inputs and the prediction is replayed without it from the last server state.
    /// Returns whether `seq` was pending.
    pub fn refuse(&mut self, seq: u32) -> bool {
        let Some(at) = self.pending.iter().position(|(s, _)| *s == seq) else {
            return false;
        };
        self.pending.remove(at);
        if let Some(base) = &self.base {
            let mut state = base.clone();
            for (_, input) in &self.pending {
                state = (self.step)(&state, input);
            }
            self.predicted = Some(state);
        }
        true
    }

    /// The current prediction (where the entity will be once the server has run every input sent).
    pub fn predicted(&self) -> Option<&S> {
        self.predicted.as_ref()
    }

    /// The state to draw at `now_us`: the prediction, or during an ease a blend from the old display
    /// towards it.
    pub fn display(&mut self, now_us: u64) -> Option<S> {
        let predicted = self.predicted.as_ref()?;
        let (Smoothing::Ease { duration_us, blend }, Some(e)) = (&self.smoothing, &self.easing)
        else {
            return Some(predicted.clone());
        };
        let elapsed = now_us.saturating_sub(e.start_us);
        if *duration_us == 0 || elapsed >= *duration_us {
            self.easing = None;
            return Some(predicted.clone());
        }
        let t = elapsed as f32 / *duration_us as f32;
        Some(blend(&e.from, predicted, t))
    }

    /// Inputs sent and not yet acknowledged.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The highest ack seen.
    pub fn last_ack(&self) -> u32 {
        self.last_ack
    }

    /// Counters.
    pub fn stats(&self) -> PredictorStats {
        self.stats
    }

    /// Forgets everything (a reconnect: a fresh baseline follows; a fresh join restarts sequences).
    pub fn reset(&mut self) {
        self.pending.clear();
        self.predicted = None;
        self.base = None;
        self.easing = None;
        self.last_ack = 0;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    struct P {
        x: f32,
        y: f32,
    }

    /// Movement with a speed of 1 per input and a wall at x = 10 (the server knows the wall; a
    /// client that does not would diverge).
    fn step(s: &P, i: &(i8, i8)) -> P {
        P {
            x: (s.x + f32::from(i.0)).min(10.0),
            y: s.y + f32::from(i.1),
        }
    }

    #[test]
    fn predicts_immediately_and_replays_unacked_inputs() {
        let mut p = Predictor::new(step);
        p.reconcile(0, P { x: 0.0, y: 0.0 }, 0);
        for seq in 1..=5 {
            p.record(seq, (1, 0));
        }
        assert_eq!(p.predicted(), Some(&P { x: 5.0, y: 0.0 }));
        // The server processed 1..=2 and agrees: nothing diverges; 3 inputs replayed.
        let r = p.reconcile(2, P { x: 2.0, y: 0.0 }, 1_000);
        assert_eq!(
            r,
            Reconciled {
                acked: 2,
                replayed: 3,
                diverged: false
            }
        );
        assert_eq!(p.predicted(), Some(&P { x: 5.0, y: 0.0 }));
        assert_eq!(p.pending(), 3);
    }

    #[test]
    fn a_refused_input_leaves_the_prediction_at_once() {
        let mut p = Predictor::new(step);
        p.reconcile(0, P { x: 0.0, y: 0.0 }, 0);
        p.record(1, (1, 0));
        p.record(2, (0, 1));
        p.record(3, (1, 0));
        assert!(p.refuse(2));
        assert_eq!(p.predicted(), Some(&P { x: 2.0, y: 0.0 }));
        assert_eq!(p.pending(), 2);
        assert!(!p.refuse(2), "already gone");
        // A later ack past the refused seq replays only what is left.
        p.reconcile(1, P { x: 1.0, y: 0.0 }, 10);
        assert_eq!(p.predicted(), Some(&P { x: 2.0, y: 0.0 }));
    }

    #[test]
    fn divergence_is_corrected_from_the_server_state() {
        let mut p = Predictor::new(|s: &P, i: &(i8, i8)| P {
            // This client does not know the wall: it will diverge.
            x: s.x + f32::from(i.0),
            y: s.y + f32::from(i.1),
        });
        p.reconcile(0, P { x: 8.0, y: 0.0 }, 0);
        for seq in 1..=4 {
            p.record(seq, (1, 0));
        }
        assert_eq!(p.predicted().unwrap().x, 12.0);
        // The server (with the wall) processed 1..=3: x stopped at 10. One input left to replay.
        let r = p.reconcile(
            3,
            step(
                &step(&step(&P { x: 8.0, y: 0.0 }, &(1, 0)), &(1, 0)),
                &(1, 0),
            ),
            0,
        );
        assert!(r.diverged);
        assert_eq!(r.replayed, 1);
        assert_eq!(p.predicted().unwrap().x, 11.0);
        // Once everything is acked the prediction is exactly the server's.
        let r = p.reconcile(4, P { x: 10.0, y: 0.0 }, 0);
        assert!(r.diverged);
        assert_eq!(p.predicted(), Some(&P { x: 10.0, y: 0.0 }));
        assert_eq!(p.pending(), 0);
        assert_eq!(p.stats().corrections, 2);
        assert_eq!(p.stats().reconciliations, 3);
    }

    #[test]
    fn refused_inputs_drop_out_with_the_ack() {
        let mut p = Predictor::new(step);
        p.reconcile(0, P { x: 0.0, y: 0.0 }, 0);
        p.record(1, (0, 1));
        p.record(2, (0, 1));
        p.record(3, (0, 1));
        // The server refused input 2 (ack moved past it, y only +2).
        let r = p.reconcile(3, P { x: 0.0, y: 2.0 }, 0);
        assert!(r.diverged);
        assert_eq!(p.pending(), 0);
        assert_eq!(p.predicted(), Some(&P { x: 0.0, y: 2.0 }));
        // A stale ack arriving late does not bring inputs back or move the ack back.
        p.record(4, (0, 1));
        p.reconcile(1, P { x: 0.0, y: 2.0 }, 0);
        assert_eq!(p.last_ack(), 3);
        assert_eq!(p.pending(), 1);
        assert_eq!(p.predicted(), Some(&P { x: 0.0, y: 3.0 }));
        // Recording an already-acked seq is ignored.
        p.record(2, (0, 1));
        assert_eq!(p.pending(), 1);
    }

    #[test]
    fn ease_blends_the_error_away_over_the_duration_while_inputs_keep_applying() {
        let blend = |a: &P, b: &P, t: f32| P {
            x: a.x + (b.x - a.x) * t,
            y: a.y + (b.y - a.y) * t,
        };
        let mut p = Predictor::new(step).with_smoothing(Smoothing::Ease {
            duration_us: 100_000,
            blend: Box::new(blend),
        });
        p.reconcile(0, P { x: 0.0, y: 0.0 }, 0);
        p.record(1, (0, 0));
        // The server says y = 4: prediction corrects, display eases from y = 0.
        p.reconcile(1, P { x: 0.0, y: 4.0 }, 1_000_000);
        assert_eq!(p.display(1_000_000), Some(P { x: 0.0, y: 0.0 }));
        assert_eq!(p.display(1_050_000), Some(P { x: 0.0, y: 2.0 }));
        // An input during the ease moves both the eased-from and the predicted state.
        p.record(2, (1, 0));
        assert_eq!(p.display(1_050_000), Some(P { x: 1.0, y: 2.0 }));
        assert_eq!(p.display(1_100_000), Some(P { x: 1.0, y: 4.0 }));
        assert_eq!(p.display(1_200_000), Some(P { x: 1.0, y: 4.0 }));
    }

    #[test]
    fn snap_reset_and_bound() {
        let mut p = Predictor::new(step).with_capacity(3);
        // Inputs before any server state are kept and replayed on the first one.
        p.record(1, (1, 0));
        assert!(p.predicted().is_none());
        p.reconcile(0, P { x: 0.0, y: 0.0 }, 0);
        assert_eq!(p.predicted(), Some(&P { x: 1.0, y: 0.0 }));
        p.reconcile(1, P { x: 3.0, y: 0.0 }, 0);
        assert_eq!(
            p.display(0),
            Some(P { x: 3.0, y: 0.0 }),
            "snap shows the correction at once"
        );
        for seq in 2..=6 {
            p.record(seq, (1, 0));
        }
        assert_eq!(p.pending(), 3);
        assert_eq!(p.stats().overflowed, 2);
        p.reset();
        assert_eq!(p.pending(), 0);
        assert!(p.predicted().is_none());
        assert_eq!(p.last_ack(), 0);
        // After a reset (fresh join) sequences restart at 1.
        p.record(1, (1, 0));
        assert_eq!(p.pending(), 1);
    }
}
