//! Group membership in the key-value bucket: this host's changes written in order, and every
//! host's watched into its map.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use futures_util::StreamExt;

use crate::handle::{Backend, Shared};
use crate::naming::Names;

use super::pause;

/// Writes membership changes to the bucket in order, retrying each until NATS takes it (a
/// change made while NATS is down lands when it is back).
pub(super) async fn membership_writer(shared: Arc<Shared>) {
    let Backend::Nats(nats) = &shared.backend else {
        return;
    };
    let Some(mut rx) = nats
        .membership_rx
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    else {
        return;
    };
    loop {
        let item = tokio::select! {
            _ = shared.cancel.cancelled() => return,
            item = rx.recv() => item,
        };
        let Some((group, zone, join)) = item else {
            return;
        };
        let key = Names::group_key(&group, &zone);
        let mut backoff = Duration::from_millis(50);
        loop {
            let write = async {
                if join {
                    nats.kv
                        .put(&key, "1".into())
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                } else {
                    nats.kv.delete(&key).await.map_err(|e| e.to_string())
                }
            };
            match tokio::time::timeout(shared.config.publish_timeout, write).await {
                Ok(Ok(())) => break,
                Ok(Err(e)) => tracing::debug!(error = %e, "bus: group change not written yet"),
                Err(_) => tracing::debug!("bus: group change timed out"),
            }
            if !pause(&shared, &mut backoff).await {
                return;
            }
        }
    }
}

/// Keeps this host's group map equal to the bucket.
pub(super) async fn group_watcher(shared: Arc<Shared>) {
    let Backend::Nats(nats) = &shared.backend else {
        return;
    };
    let mut backoff = Duration::from_millis(50);
    loop {
        match nats.kv.watch_with_history(">").await {
            Ok(mut watch) => loop {
                let next = tokio::select! {
                    _ = shared.cancel.cancelled() => return,
                    next = watch.next() => next,
                };
                match next {
                    Some(Ok(entry)) => {
                        backoff = Duration::from_millis(50);
                        if let Some((group, zone)) = Names::parse_group_key(&entry.key) {
                            match entry.operation {
                                kv::Operation::Put => shared.groups.join(&group, &zone),
                                kv::Operation::Delete | kv::Operation::Purge => {
                                    shared.groups.leave(&group, &zone)
                                }
                            }
                        }
                    }
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "bus: group watch broke; watching again");
                        break;
                    }
                    None => break,
                }
            },
            Err(e) => tracing::debug!(error = %e, "bus: cannot watch groups yet"),
        }
        if !pause(&shared, &mut backoff).await {
            return;
        }
    }
}
