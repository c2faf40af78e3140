//! Zone recordings on a host: the admin API starts one on a zone (or creates a zone recorded
//! from its first tick), the zone's simulation thread takes the bytes its host recorded after
//! every step and hands them to a writer thread through a bounded queue, and the file is
//! downloaded once the recording stopped. The tick never waits for the disk: a writer that
//! falls behind or fails stops the recording, with the reason in its status and in `/metrics`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crossbeam_channel::{bounded, Sender, TrySendError};
use serde::Serialize;
use zonekeep_core::recording::{RecordLimits, StopReason, DEFAULT_MAX_BUFFERED};
use zonekeep_core::ZoneHost;

use crate::metrics::Metrics;

/// Largest size cap a recording may be given.
pub const MAX_RECORDING_BYTES: u64 = 256 << 20;
/// Recordings a host keeps track of (running or stopped with a file to download); the oldest
/// stopped one is forgotten (its file deleted) to make room.
pub const MAX_RECORDINGS: usize = 16;
/// Chunks (one per step) waiting for the writer before the recording stops as fallen behind:
/// about 8 s of steps at 30 Hz.
const WRITER_QUEUE: usize = 256;

/// What the admin API shows of a recording.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RecordingInfo {
    /// The zone recorded.
    pub zone: String,
    /// `running` or `stopped`.
    pub state: &'static str,
    /// Why it stopped (snake_case), once stopped.
    pub reason: Option<&'static str>,
    /// Why it stopped, in words.
    pub detail: Option<String>,
    /// Bytes recorded.
    pub bytes: u64,
    /// Ticks recorded.
    pub ticks: u64,
    /// The size cap.
    pub max_bytes: u64,
    /// The file is written and closed (ready to download).
    pub file_complete: bool,
}

#[derive(Debug, Default)]
struct Progress {
    bytes: u64,
    ticks: u64,
    stopped: Option<StopReason>,
    write_error: Option<String>,
}

/// One recording's file and progress, shared by its zone's thread, its writer and the admin API.
#[derive(Debug)]
pub(crate) struct Recording {
    zone: String,
    path: PathBuf,
    max_bytes: u64,
    progress: Mutex<Progress>,
    /// Becomes true once the writer closed the file.
    complete: tokio::sync::watch::Sender<bool>,
}

impl Recording {
    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The admin view.
    pub fn info(&self) -> RecordingInfo {
        let p = self.progress();
        RecordingInfo {
            zone: self.zone.clone(),
            state: if p.stopped.is_some() {
                "stopped"
            } else {
                "running"
            },
            reason: p.stopped.as_ref().map(StopReason::code),
            detail: p.stopped.as_ref().map(ToString::to_string),
            bytes: p.bytes,
            ticks: p.ticks,
            max_bytes: self.max_bytes,
            file_complete: *self.complete.borrow(),
        }
    }

    /// Whether it stopped.
    pub fn stopped(&self) -> bool {
        self.progress().stopped.is_some()
    }

    /// Wait (at most `bound`) for the writer to close the file; true when it did.
    pub async fn wait_complete(&self, bound: std::time::Duration) -> bool {
        let mut rx = self.complete.subscribe();
        let waited = tokio::time::timeout(bound, rx.wait_for(|done| *done)).await;
        matches!(waited, Ok(Ok(_)))
    }

    /// The recorded file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

/// Every recording of this host, by zone.
#[derive(Debug)]
pub(crate) struct Recordings {
    dir: PathBuf,
    metrics: Arc<Metrics>,
    by_zone: Mutex<BTreeMap<String, Arc<Recording>>>,
}

impl Recordings {
    /// Recordings written under `dir` (created when the first one starts).
    pub fn new(dir: PathBuf, metrics: Arc<Metrics>) -> Self {
        Self {
            dir,
            metrics,
            by_zone: Mutex::new(BTreeMap::new()),
        }
    }

    /// The recording of `zone`, if one is known.
    pub fn get(&self, zone: &str) -> Option<Arc<Recording>> {
        self.by_zone
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(zone)
            .cloned()
    }

    /// Register a new recording of `zone` and create its file.
    fn begin(&self, zone: &str, max_bytes: u64) -> Result<(Arc<Recording>, std::fs::File), String> {
        let mut map = self.by_zone.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(zone).is_some_and(|r| !r.stopped()) {
            return Err(format!("zone {zone:?} is being recorded already"));
        }
        if let Some(old) = map.remove(zone) {
            let _ = std::fs::remove_file(&old.path);
        }
        if map.len() >= MAX_RECORDINGS {
            let oldest = map
                .iter()
                .find(|(_, r)| r.stopped())
                .map(|(k, _)| k.clone())
                .ok_or_else(|| format!("{MAX_RECORDINGS} recordings are running already"))?;
            if let Some(old) = map.remove(&oldest) {
                let _ = std::fs::remove_file(&old.path);
            }
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("creating {}: {e}", self.dir.display()))?;
        // Zone ids are `[A-Za-z0-9._:-]`: `~` is no id character, so the name is unique per zone
        // (and has no `:`, which some file systems refuse).
        let path = self.dir.join(format!("{}.zkrec", zone.replace(':', "~")));
        let file = std::fs::File::create(&path)
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        let (complete, _) = tokio::sync::watch::channel(false);
        let rec = Arc::new(Recording {
            zone: zone.to_owned(),
            path,
            max_bytes,
            progress: Mutex::new(Progress::default()),
            complete,
        });
        map.insert(zone.to_owned(), rec.clone());
        Ok((rec, file))
    }

    fn forget(&self, rec: &Recording) {
        let mut map = self.by_zone.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(&rec.zone).is_some_and(|r| std::ptr::eq(&**r, rec)) {
            map.remove(&rec.zone);
        }
        let _ = std::fs::remove_file(&rec.path);
    }
}

/// The limits of a recording capped at `max_bytes` (bounded by [`MAX_RECORDING_BYTES`]).
pub fn limits(max_bytes: u64) -> Result<RecordLimits, String> {
    if !(4096..=MAX_RECORDING_BYTES).contains(&max_bytes) {
        return Err(format!(
            "max_bytes must be 4096..={MAX_RECORDING_BYTES}, not {max_bytes}"
        ));
    }
    Ok(RecordLimits {
        max_bytes,
        max_buffered: DEFAULT_MAX_BUFFERED,
    })
}

/// A zone's running recording, owned by the zone on its simulation thread.
pub(crate) struct ZoneRecording {
    rec: Arc<Recording>,
    tx: Sender<Vec<u8>>,
    metrics: Arc<Metrics>,
}

impl ZoneRecording {
    /// Start recording `host` into a new file with a writer thread of its own.
    pub fn start(
        recordings: &Recordings,
        zone: &str,
        host: &mut ZoneHost,
        limits: RecordLimits,
    ) -> Result<Self, String> {
        let (rec, file) = recordings.begin(zone, limits.max_bytes)?;
        if let Err(e) = host.start_recording(limits) {
            recordings.forget(&rec);
            return Err(e.to_string());
        }
        let (tx, rx) = bounded::<Vec<u8>>(WRITER_QUEUE);
        let writer = rec.clone();
        let spawned = std::thread::Builder::new()
            .name("zonekeep-recorder".into())
            .spawn(move || {
                let mut out = std::io::BufWriter::new(file);
                let mut failed = None;
                for chunk in rx {
                    if let Err(e) = out.write_all(&chunk) {
                        failed = Some(e.to_string());
                        break;
                    }
                }
                if failed.is_none() {
                    failed = out.flush().err().map(|e| e.to_string());
                }
                if let Some(e) = failed {
                    writer.progress().write_error = Some(e);
                }
                writer.complete.send_replace(true);
            });
        if let Err(e) = spawned {
            let _ = host.end_recording();
            recordings.forget(&rec);
            return Err(format!("starting the recording's writer: {e}"));
        }
        recordings.metrics.recording_started();
        let mut zr = Self {
            rec,
            tx,
            metrics: recordings.metrics.clone(),
        };
        zr.pump(host);
        Ok(zr)
    }

    /// Hand what `host` recorded since the last call to the writer, never waiting. False once
    /// the recording is over (its last bytes handed over; drop this).
    pub fn pump(&mut self, host: &mut ZoneHost) -> bool {
        if let Some(e) = self.rec.progress().write_error.clone() {
            host.stop_recording(StopReason::WriterFailed(e));
        }
        let bytes = host.take_recorded();
        if !bytes.is_empty() {
            let n = bytes.len() as u64;
            match self.tx.try_send(bytes) {
                Ok(()) => self.metrics.recording_bytes(n),
                Err(TrySendError::Full(_)) => {
                    host.stop_recording(StopReason::WriterFailed("the writer fell behind".into()))
                }
                Err(TrySendError::Disconnected(_)) => {
                    host.stop_recording(StopReason::WriterFailed("the writer stopped".into()))
                }
            }
        }
        let Some(status) = host.recording_status() else {
            return false;
        };
        let stopped = status.stopped.clone();
        {
            let mut p = self.rec.progress();
            p.bytes = status.bytes;
            p.ticks = status.ticks;
        }
        let Some(reason) = stopped else {
            return true;
        };
        if let Some((rest, _)) = host.end_recording() {
            let n = rest.len() as u64;
            if !rest.is_empty() && self.tx.try_send(rest).is_ok() {
                self.metrics.recording_bytes(n);
            }
        }
        self.metrics.recording_stopped(reason.code());
        self.rec.progress().stopped = Some(reason);
        false
    }

    /// Stop with `reason` and hand over the last bytes.
    pub fn stop(mut self, host: &mut ZoneHost, reason: StopReason) {
        host.stop_recording(reason);
        self.pump(host);
    }
}
