//! The admin API's recording routes (listed in [`crate::admin`]): start, stop, status and
//! download of a zone's recording.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use zonekeep_core::recording::{RecordLimits, DEFAULT_MAX_BYTES};

use crate::admin::{ask, bad_body, failure, parse};
use crate::host::{json_error, Shared};
use crate::recording::MAX_RECORDING_BYTES;
use crate::sim::{AdminFailure, SimCommand};

/// How long a download waits for the writer to close a stopped recording's file.
const FILE_WAIT: Duration = Duration::from_secs(5);

/// A recording request: `{"max_bytes"?}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordBody {
    /// The size cap (default 64 MiB, at most 256 MiB).
    #[serde(default)]
    max_bytes: Option<u64>,
}

impl RecordBody {
    pub(crate) fn limits(&self) -> Result<RecordLimits, String> {
        crate::recording::limits(self.max_bytes.unwrap_or(DEFAULT_MAX_BYTES))
    }
}

fn no_recording(id: &str) -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("zone {id:?} has no recording on this host"),
    )
}

/// `GET /admin/zones/{id}/recording`.
pub(crate) async fn status(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    match shared.sim.recordings.get(&id) {
        Some(r) => Json(r.info()).into_response(),
        None => no_recording(&id),
    }
}

/// `POST /admin/zones/{id}/recording`: record a running zone from its image (or, for a kind
/// without one, its snapshot).
pub(crate) async fn start(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let b: RecordBody = if body.is_empty() {
        RecordBody::default()
    } else {
        match parse(&body) {
            Ok(b) => b,
            Err(e) => return bad_body(e),
        }
    };
    let limits = match b.limits() {
        Ok(l) => l,
        Err(e) => return failure(AdminFailure::BadRequest(e)),
    };
    debug_assert!(limits.max_bytes <= MAX_RECORDING_BYTES);
    let zone = id.clone();
    let r = ask(&shared, &id, |reply| SimCommand::Record {
        zone_id: zone,
        limits,
        reply,
    })
    .await;
    match r.and_then(|x| x) {
        Ok(()) => match shared.sim.recordings.get(&id) {
            Some(rec) => (StatusCode::CREATED, Json(rec.info())).into_response(),
            None => no_recording(&id),
        },
        Err(f) => failure(f),
    }
}

/// `POST /admin/zones/{id}/recording/stop`.
pub(crate) async fn stop(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let Some(rec) = shared.sim.recordings.get(&id) else {
        return no_recording(&id);
    };
    if !rec.stopped() {
        let zone = id.clone();
        let r = ask(&shared, &id, |reply| SimCommand::StopRecording {
            zone_id: zone,
            reply,
        })
        .await;
        // A zone that ended meanwhile stopped its recording itself.
        if let Err(f) = r.and_then(|x| x) {
            if !rec.stopped() {
                return failure(f);
            }
        }
    }
    Json(rec.info()).into_response()
}

/// `GET /admin/zones/{id}/recording/file`: the file of a stopped recording.
pub(crate) async fn file(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let Some(rec) = shared.sim.recordings.get(&id) else {
        return no_recording(&id);
    };
    if !rec.stopped() {
        return json_error(
            StatusCode::CONFLICT,
            "running",
            "the recording is still running: stop it first",
        );
    }
    if !rec.wait_complete(FILE_WAIT).await {
        return failure(AdminFailure::Unavailable(
            "the recording's file is still being written".into(),
        ));
    }
    let path = rec.path().to_owned();
    let read = tokio::task::spawn_blocking(move || std::fs::read(path))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
    match read {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
        Err(e) => failure(AdminFailure::Unavailable(format!(
            "reading the recording: {e}"
        ))),
    }
}
