//! One zone's writer: the task each registration runs, taking the newest snapshot from the
//! zone's slot, writing it under the worker's limit on concurrent writes, and retrying failures
//! with backoff. A fencing refusal, or the host's lease on the zone ending, stops it for good.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use zonekeep_store::StoreError;

use super::{Shared, ZoneEntry};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One zone's writer: takes the newest snapshot, writes it, retries.
pub(super) async fn run_zone(shared: Arc<Shared>, entry: Arc<ZoneEntry>) {
    let mut failures: u32 = 0;
    loop {
        let job = {
            let mut st = entry.lock();
            match st.pending.take() {
                Some(job) => {
                    st.writing = true;
                    st.writing_since = st.pending_since.take();
                    Some((job, st.status.kind.clone(), st.status.epoch))
                }
                None => {
                    st.writing = false;
                    st.status.pending = false;
                    entry.idle.send_replace(true);
                    if st.closed || st.status.fenced {
                        return;
                    }
                    None
                }
            }
        };
        let Some(((seq, bytes), kind, epoch)) = job else {
            tokio::select! {
                () = entry.wake.notified() => {}
                () = shared.cancel.cancelled() => return,
            }
            continue;
        };
        if entry.alarm.is_raised() {
            // The lease lapsed (or a write was already refused): this owner writes nothing more.
            shared.metrics.fenced_write_refused("save");
            tracing::warn!(zone = %entry.zone_id, epoch, seq, "save not written: this host's lease on the zone ended");
            let mut st = entry.lock();
            st.writing = false;
            st.status.fenced = true;
            st.pending = None;
            continue;
        }

        let write_started = std::time::Instant::now();
        let result = tokio::select! {
            r = write(&shared, &entry.zone_id, epoch, seq, &kind, &bytes) => r,
            () = shared.cancel.cancelled() => return,
            // The lease lapsed while the write waited (a hung database): abandon it.
            () = entry.alarm.raised() => {
                shared.metrics.fenced_write_refused("save");
                let mut st = entry.lock();
                st.writing = false;
                st.status.fenced = true;
                st.pending = None;
                continue;
            }
        };
        let m = &shared.metrics;
        match result {
            Ok(()) => {
                failures = 0;
                m.saves_ok.inc();
                let mut st = entry.lock();
                st.writing = false;
                st.writing_since = None;
                // A snapshot submitted while this one was written waits from its own submission.
                st.unsaved_since = st.pending_since;
                st.status.last_saved_seq = Some(seq);
                st.status.last_saved_at_ms = Some(now_ms());
                st.status.writes = st.status.writes.saturating_add(1);
                st.status.last_write_us =
                    Some(u64::try_from(write_started.elapsed().as_micros()).unwrap_or(u64::MAX));
                st.status.consecutive_failures = 0;
                st.status.last_error = None;
            }
            Err(e) if e.is_retryable() => {
                failures = failures.saturating_add(1);
                m.saves_failed.inc();
                m.store_errors.inc();
                tracing::warn!(zone = %entry.zone_id, seq, failures, error = %e, "zone save failed; retrying");
                {
                    let mut st = entry.lock();
                    st.status.consecutive_failures = failures;
                    st.status.last_error = Some(e.to_string());
                    // The snapshot waits on, from the older of its submission and the newer one's.
                    let since = st.writing_since.take();
                    st.pending_since = match (since, st.pending_since) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    if st.pending.is_none() {
                        st.pending = Some((seq, bytes));
                    } else {
                        // A newer snapshot arrived meanwhile: retry with it instead.
                        st.status.replaced = st.status.replaced.saturating_add(1);
                        m.save_replaced.inc();
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(shared.config.backoff.delay(failures)) => {}
                    () = shared.cancel.cancelled() => return,
                }
            }
            Err(e) => {
                m.saves_failed.inc();
                let fenced = matches!(e, StoreError::Fenced { .. });
                if fenced {
                    m.saves_fenced.inc();
                    m.fenced_write_refused("save");
                    entry.alarm.raise();
                    tracing::warn!(zone = %entry.zone_id, epoch, error = %e, "zone save fenced: a newer owner holds the zone");
                } else {
                    m.store_errors.inc();
                    tracing::error!(zone = %entry.zone_id, seq, error = %e, "zone save refused; snapshot dropped");
                }
                let mut st = entry.lock();
                st.writing = false;
                st.status.consecutive_failures = st.status.consecutive_failures.saturating_add(1);
                st.status.last_error = Some(e.to_string());
                if fenced {
                    st.status.fenced = true;
                    st.pending = None;
                }
            }
        }
    }
}

async fn write(
    shared: &Shared,
    zone_id: &str,
    epoch: u64,
    seq: u64,
    kind: &str,
    bytes: &[u8],
) -> Result<(), StoreError> {
    // The semaphore is never closed, so acquire cannot fail; treat it as a
    // backend error rather than panicking if that ever changes.
    let _permit = shared
        .writes
        .acquire()
        .await
        .map_err(|_| StoreError::Backend("storage worker stopped".into()))?;
    shared
        .saves
        .write(zone_id, epoch, seq, kind, bytes)
        .await
        .map(|_| ())
}
