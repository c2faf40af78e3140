//! The live progress line (indicatif, on stderr; hidden when stderr is not a terminal or when
//! disabled): stage, joins, connections, traffic and probe mismatches, refreshed twice a second.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::bot::{Phase, RunShared};

/// Handle of the progress line.
pub struct Progress {
    bar: ProgressBar,
    stage: Arc<Mutex<&'static str>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// Starts the line (hidden unless `show`).
    pub fn start(shared: Arc<RunShared>, show: bool) -> Self {
        let target = if show {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        let stage = Arc::new(Mutex::new("join"));
        let task = show.then(|| {
            let (bar, stage) = (bar.clone(), stage.clone());
            tokio::spawn(async move {
                let bots = f64::from(shared.cfg.bots.max(1));
                let mut last = (Instant::now(), 0u64, 0u64);
                while shared.phase_now() != Phase::Done && Instant::now() < shared.hard_deadline {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    let now = Instant::now();
                    let bytes = shared.bytes_in.load(Ordering::Relaxed);
                    let msgs = shared.msgs_in.load(Ordering::Relaxed);
                    let dt = now.duration_since(last.0).as_secs_f64().max(1e-3);
                    let kbs = (bytes - last.1) as f64 / dt / bots / 1000.0;
                    let mps = (msgs - last.2) as f64 / dt / bots;
                    last = (now, bytes, msgs);
                    let s = *stage.lock().unwrap_or_else(PoisonError::into_inner);
                    bar.set_message(format!(
                        "{s}: joined {}/{} failed {} connected {} | per bot {:.1} kB/s {:.1} msg/s | mismatches {}",
                        shared.joined.load(Ordering::Relaxed),
                        shared.cfg.bots,
                        shared.failed.load(Ordering::Relaxed),
                        shared.connected.load(Ordering::Relaxed),
                        kbs,
                        mps,
                        shared.mismatches.load(Ordering::Relaxed),
                    ));
                    bar.tick();
                }
            })
        });
        Self { bar, stage, task }
    }

    /// Names the current stage.
    pub fn set_stage(&self, s: &'static str) {
        *self.stage.lock().unwrap_or_else(PoisonError::into_inner) = s;
    }

    /// Removes the line.
    pub fn finish(mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
        self.bar.finish_and_clear();
    }
}
