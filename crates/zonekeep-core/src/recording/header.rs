//! The recording's header: what the zone was when the recording started (see the
//! [module docs](super) for its layout).

use std::time::Duration;

use zonekeep_protocol::wire::{put_varint, Reader};

use super::config_codec::{get_config, put_config};
use super::format::{nanos, put_blob, MAX_HEADER_BODY, RECORDING_MAGIC, RECORDING_VERSION};
use super::read::{bad, player, text, u64_le};
use crate::config::ZoneConfig;
use crate::player::PlayerId;

/// How the recorded zone came to be: the state the replay starts from.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// Recorded from its creation: the replay creates the zone afresh.
    Created,
    /// Recorded from a running zone whose kind keeps an image: the replay builds the zone from
    /// this [`ZoneHost::image`](crate::ZoneHost::image) and checks the state hash. Since
    /// version 3.
    Image {
        /// The image.
        image: Vec<u8>,
        /// The zone's state hash when the recording started.
        state_hash: u64,
    },
    /// Recorded from a running (or just restored) zone of a kind without an image: the replay
    /// restores this snapshot envelope, rejoins the participants that were connected, and
    /// checks the state hash.
    Snapshot {
        /// The envelope of [`ZoneHost::snapshot`](crate::ZoneHost::snapshot).
        envelope: Vec<u8>,
        /// The zone's state hash when the recording started.
        state_hash: u64,
        /// Participants connected when the recording started (restore admits everyone as
        /// dropped; these are rejoined).
        connected: Vec<PlayerId>,
    },
}

/// What a recording starts with: everything that makes the zone what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The zone's id.
    pub zone_id: String,
    /// The zone's kind (looked up in the replaying host's [`ZoneKinds`](crate::ZoneKinds)).
    pub kind: String,
    /// Create parameters, as JSON text.
    pub params: String,
    /// The configuration the zone ran with (its world seed seeds the zone's RNG).
    pub config: ZoneConfig,
    /// The owner epoch the zone ran under (part of its fact keys).
    pub boot_epoch: u64,
    /// The clock reading the zone's tick schedule starts from.
    pub start: Duration,
    /// The last tick run when the recording starts.
    pub start_tick: u64,
    /// The starting state.
    pub origin: Origin,
}

/// Appends the preamble and the header record.
pub(super) fn encode_header(out: &mut Vec<u8>, header: &Header) {
    out.extend_from_slice(&RECORDING_MAGIC);
    out.extend_from_slice(&RECORDING_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    let mut b = Vec::new();
    put_blob(&mut b, header.zone_id.as_bytes());
    put_blob(&mut b, header.kind.as_bytes());
    put_blob(&mut b, header.params.as_bytes());
    put_config(&mut b, &header.config);
    put_varint(&mut b, header.boot_epoch);
    put_varint(&mut b, nanos(header.start));
    put_varint(&mut b, header.start_tick);
    match &header.origin {
        Origin::Created => b.push(0),
        Origin::Image { image, state_hash } => {
            b.push(2);
            put_blob(&mut b, image);
            b.extend_from_slice(&state_hash.to_le_bytes());
        }
        Origin::Snapshot {
            envelope,
            state_hash,
            connected,
        } => {
            b.push(1);
            put_blob(&mut b, envelope);
            b.extend_from_slice(&state_hash.to_le_bytes());
            put_varint(&mut b, connected.len() as u64);
            for p in connected {
                put_varint(&mut b, u64::from(p.0));
            }
        }
    }
    put_varint(out, b.len() as u64);
    out.extend_from_slice(&b);
}

/// Reads the header record's body.
pub(super) fn decode_header(r: &mut Reader<'_>, version: u16) -> Result<Header, String> {
    let zone_id = text(r, "zone id")?.to_owned();
    let kind = text(r, "kind")?.to_owned();
    let params = text(r, "params")?.to_owned();
    let config = get_config(r, version)?;
    let boot_epoch = r.varint_u64().map_err(bad)?;
    let start = Duration::from_nanos(r.varint_u64().map_err(bad)?);
    let start_tick = r.varint_u64().map_err(bad)?;
    let origin = match r.u8().map_err(bad)? {
        0 => Origin::Created,
        1 => {
            let envelope = r
                .bytes_named("snapshot", MAX_HEADER_BODY)
                .map_err(bad)?
                .to_vec();
            let state_hash = u64_le(r)?;
            // Each id takes at least one byte, so the count is bounded by what is left.
            let n = r.count("connected", r.remaining()).map_err(bad)?;
            let mut connected = Vec::with_capacity(n);
            for _ in 0..n {
                connected.push(player(r)?);
            }
            Origin::Snapshot {
                envelope,
                state_hash,
                connected,
            }
        }
        2 => {
            let image = r
                .bytes_named("image", MAX_HEADER_BODY)
                .map_err(bad)?
                .to_vec();
            let state_hash = u64_le(r)?;
            Origin::Image { image, state_hash }
        }
        n => return Err(format!("unknown origin {n}")),
    };
    r.finish().map_err(bad)?;
    Ok(Header {
        zone_id,
        kind,
        params,
        config,
        boot_epoch,
        start,
        start_tick,
        origin,
    })
}
