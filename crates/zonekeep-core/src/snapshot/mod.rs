//! The snapshot envelope: a zone's saved state plus its in-flight facts.
//!
//! [`ZoneHost::snapshot`](crate::ZoneHost::snapshot) writes it at a tick
//! boundary; [`ZoneHost::restore`](crate::ZoneHost::restore) reads it back. The
//! store keeps it as opaque bytes. The format is versioned and checksummed so a
//! truncated, corrupted or future envelope is a typed [`SnapshotError`], never
//! a panic or a silently wrong zone.
//!
//! # Format, version 1 (all integers little-endian)
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | magic `ZKSN` |
//! | 4 | 2 | version (`1`) |
//! | 6 | 2 | flags (`0`; readers refuse unknown flags) |
//! | 8 | 8 | body length `N` |
//! | 16 | N | body |
//! | 16 + N | 8 | FNV-1a 64 of bytes `0 .. 16 + N` |
//!
//! Body: `u64 tick`, `u64 boot_epoch` (of the writer), `u64 fact_counter`,
//! `u32 F` then `F` facts, then `u64 L` and the zone's `L` save bytes. A fact
//! is `str key`, `str kind`, `u8 has_principal` (0 or 1) and, if 1,
//! `str principal`, then `str payload` (JSON text) and `u64 tick`. A `str` is a
//! `u32` byte length and that many UTF-8 bytes.
//!
//! Version 2 appends the roster, so a zone restored on another host (a
//! deploy drain, a failover) still knows its participants and each player
//! can resume there, keeping its id and its input sequence: `u32 next_player`,
//! `u32 R`, then `R` participants, each `u32 id`, `str principal`, `u8 role`
//! (0 player, 1 observer), `str claims` (a JSON object), `u8 has_seq` (0 or 1)
//! and, if 1, `u32 last_seq` (the newest input the zone consumed). Version 1
//! envelopes are still read, with an empty roster.
//!
//! Version 3 appends the zone's links ([`SavedLinks`], see [`crate::message`]):
//! `u8 has_parent` and, if 1, `str parent`; `u32 G` and `G` group names (`str`);
//! `u64 message_seq` (the last message sequence number sent under the writer's
//! epoch); `u32 D` and `D` deduplication entries, least recently seen first, each
//! `str sender`, `u64 epoch`, `u64 seq`; then `u32 I` and `I` entries of the inbox
//! (received, not yet delivered), each `u8 kind` then a message id (`str sender`,
//! `u64 epoch`, `u64 seq`) and, for a message (kind 0), `u8 from` (0 a zone,
//! followed by `str zone`, or 1 the operator), `u16 topic`, `u8 via_parent` and
//! `u32` length and payload bytes; for an undeliverable notice (kind 1),
//! `u8 target` (0 zone, 1 group), `str name`, `u16 topic` and `str reason`.
//! Versions 1 and 2 are read with no links (no parent, no groups, empty tables).
//!
//! Version 4 appends what wrote the save: `u32 state_version` (the kind's
//! [`ZoneConfig::state_version`](crate::ZoneConfig::state_version), what the zone's
//! bytes mean) and `str build` (the build of the code that wrote them: the host's version for a
//! native kind, the module's content hash for a module). Older envelopes are read as state
//! version 1 with no build: they were written before kinds had state versions, when every
//! kind's state was at the first one. Then `u32 C` and `C` characters handed to the restore
//! (see [`Snapshot::characters`]), each `u32 player` and `u64` length and bytes; a zone's own
//! save never holds any.
//!
//! Version 5 appends the durable calls in flight ([`crate::call`]): `u32 K`, then `K` calls, each
//! `str key`, `str function`, `str args` (JSON text) and `u64 tick`. Older envelopes have none.

mod links;

use std::hash::Hasher;

use crate::call::{Call, CallKey};
use crate::error::ZoneError;
use crate::fact::{Fact, FactKey};
use crate::hash::StateHasher;
use crate::message::{Inbound, MessageId};
use crate::player::{Claims, PlayerId, Principal, Role};
use links::{put_links, read_links};

/// The envelope's first four bytes.
pub const SNAPSHOT_MAGIC: [u8; 4] = *b"ZKSN";
/// The envelope version this build writes (it also reads every older one, from 1).
pub const SNAPSHOT_VERSION: u16 = 5;
const HEADER_LEN: usize = 16;
const CHECKSUM_LEN: usize = 8;

/// Why an envelope could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Shorter than a header and checksum, or the body is cut short.
    #[error("snapshot truncated")]
    Truncated,
    /// The first bytes are not `ZKSN`: not a Zonekeep snapshot.
    #[error("not a zonekeep snapshot (bad magic)")]
    BadMagic,
    /// Written by a newer (or unknown) format version.
    #[error("unsupported snapshot version {0}")]
    UnsupportedVersion(u16),
    /// The checksum does not match: the bytes were damaged.
    #[error("snapshot checksum mismatch")]
    Checksum,
    /// Well-framed but inconsistent content (bad UTF-8, bad JSON, trailing bytes, unknown flags).
    #[error("malformed snapshot: {0}")]
    Malformed(String),
}

/// Why [`ZoneHost::restore`](crate::ZoneHost::restore) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    /// The envelope itself is unreadable.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The envelope is fine but the zone's code refused its bytes (for
    /// example the state's schema changed), or the config is invalid.
    #[error("zone restore failed: {0}")]
    Zone(#[from] ZoneError),
    /// The save was written under another state version than the kind's, and the kind has no
    /// migration from it (a newer save than the code is never read).
    #[error("the save holds state version {saved} (written by {}), and this kind reads version {current}: restore the compatible build or deploy a migration", if build.is_empty() { "an unrecorded build" } else { build.as_str() })]
    StateChanged {
        /// The save's state version.
        saved: u32,
        /// The kind's.
        current: u32,
        /// The build that wrote the save (empty when unrecorded).
        build: String,
    },
    /// The kind's migration from the save's state version failed.
    #[error("migrating the save from state version {from} to {to} failed: {reason}")]
    Migration {
        /// The save's state version.
        from: u32,
        /// The kind's.
        to: u32,
        /// What the migration said.
        reason: String,
    },
}

/// A decoded envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The last tick run when it was taken.
    pub tick: u64,
    /// The boot epoch of the host that took it.
    pub boot_epoch: u64,
    /// The fact key counter.
    pub fact_counter: u64,
    /// Facts in flight when it was taken, in emission order.
    pub facts: Vec<Fact>,
    /// The zone's own [`Zone::save`](crate::Zone::save) bytes.
    pub zone: Vec<u8>,
    /// The next participant id the host would hand out (0 in a version-1 envelope).
    pub next_player: u32,
    /// The participants present when it was taken (empty in a version-1 envelope).
    pub roster: Vec<SavedParticipant>,
    /// The kind's state version the zone's bytes were written under (1 before version 4).
    pub state_version: u32,
    /// The build that wrote them (empty before version 4, or when unknown).
    pub build: String,
    /// For a kind whose players bring characters: the characters of the saved participants,
    /// by player id, as their store holds them for the restoring owner (the host puts them in
    /// before it restores; a zone's own save never holds any). A saved player without one here
    /// is not readmitted: it comes back by joining.
    pub characters: Vec<(PlayerId, Vec<u8>)>,
    /// Durable calls in flight when it was taken, in the order they were made (none before
    /// version 5).
    pub calls: Vec<Call>,
}

/// What links a saved zone to others (version 3; empty in older envelopes): kept beside the
/// [`Snapshot`] so code that builds one field by field does not change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SavedLinks {
    /// The zone's parent, if any.
    pub parent: Option<String>,
    /// The groups it is in.
    pub groups: Vec<String>,
    /// The last message sequence number sent under the writer's epoch.
    pub message_seq: u64,
    /// Per sender, the highest message taken, least recently seen first.
    pub dedup: Vec<MessageId>,
    /// Messages and notices received and not yet delivered, in order.
    pub inbox: Vec<Inbound>,
}

/// One participant as a snapshot keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedParticipant {
    /// Its id.
    pub id: PlayerId,
    /// Its verified principal.
    pub principal: Principal,
    /// Player or observer.
    pub role: Role,
    /// Its ticket's claims.
    pub claims: Claims,
    /// The newest input sequence number the zone consumed from it.
    pub last_seq: Option<u32>,
}

impl Snapshot {
    /// Encodes the envelope with no links.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with(&SavedLinks::default())
    }

    /// Encodes the envelope with the zone's `links`.
    pub fn encode_with(&self, links: &SavedLinks) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.zone.len() + 64);
        put_u64(&mut body, self.tick);
        put_u64(&mut body, self.boot_epoch);
        put_u64(&mut body, self.fact_counter);
        put_u32(&mut body, len_u32(self.facts.len()));
        for f in &self.facts {
            put_str(&mut body, f.key.as_str());
            put_str(&mut body, &f.kind);
            match &f.principal {
                Some(p) => {
                    body.push(1);
                    put_str(&mut body, p);
                }
                None => body.push(0),
            }
            put_str(&mut body, &f.payload.to_string());
            put_u64(&mut body, f.tick);
        }
        put_u64(&mut body, self.zone.len() as u64);
        body.extend_from_slice(&self.zone);
        put_u32(&mut body, self.next_player);
        put_u32(&mut body, len_u32(self.roster.len()));
        for p in &self.roster {
            put_u32(&mut body, p.id.0);
            put_str(&mut body, p.principal.as_str());
            body.push(match p.role {
                Role::Player => 0,
                Role::Observer => 1,
            });
            put_str(
                &mut body,
                &serde_json::Value::Object(p.claims.clone()).to_string(),
            );
            match p.last_seq {
                Some(seq) => {
                    body.push(1);
                    put_u32(&mut body, seq);
                }
                None => body.push(0),
            }
        }

        put_links(&mut body, links);
        put_u32(&mut body, self.state_version);
        put_str(&mut body, &self.build);
        put_u32(&mut body, len_u32(self.characters.len()));
        for (id, data) in &self.characters {
            put_u32(&mut body, id.0);
            put_u64(&mut body, data.len() as u64);
            body.extend_from_slice(data);
        }
        put_u32(&mut body, len_u32(self.calls.len()));
        for c in &self.calls {
            put_str(&mut body, c.key.as_str());
            put_str(&mut body, &c.function);
            put_str(&mut body, &c.args.to_string());
            put_u64(&mut body, c.tick);
        }

        let mut out = Vec::with_capacity(HEADER_LEN + body.len() + CHECKSUM_LEN);
        out.extend_from_slice(&SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        put_u64(&mut out, body.len() as u64);
        out.extend_from_slice(&body);
        let sum = checksum(&out);
        put_u64(&mut out, sum);
        out
    }

    /// Decodes an envelope; every malformed input is a [`SnapshotError`].
    pub fn decode(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
        Self::decode_with_links(bytes).map(|(s, _)| s)
    }

    /// Decodes an envelope and the zone's links (empty before version 3).
    pub fn decode_with_links(bytes: &[u8]) -> Result<(Snapshot, SavedLinks), SnapshotError> {
        // Magic first: a foreign blob is "not ours", whatever its length.
        let head = bytes.get(..4).unwrap_or(bytes);
        if head != &SNAPSHOT_MAGIC[..head.len()] {
            return Err(SnapshotError::BadMagic);
        }
        if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
            return Err(SnapshotError::Truncated);
        }
        let mut r = Reader { bytes, pos: 4 };
        let version = r.u16()?;
        if !(1..=SNAPSHOT_VERSION).contains(&version) {
            return Err(SnapshotError::UnsupportedVersion(version));
        }
        let flags = r.u16()?;
        if flags != 0 {
            return Err(SnapshotError::Malformed(format!(
                "unknown flags {flags:#x}"
            )));
        }
        let body_len = usize::try_from(r.u64()?).map_err(|_| SnapshotError::Truncated)?;
        let end = HEADER_LEN
            .checked_add(body_len)
            .ok_or(SnapshotError::Truncated)?;
        if bytes.len() != end.saturating_add(CHECKSUM_LEN) {
            return Err(if bytes.len() < end.saturating_add(CHECKSUM_LEN) {
                SnapshotError::Truncated
            } else {
                SnapshotError::Malformed("trailing bytes after checksum".into())
            });
        }
        let covered = bytes.get(..end).ok_or(SnapshotError::Truncated)?;
        let mut sum_reader = Reader { bytes, pos: end };
        if sum_reader.u64()? != checksum(covered) {
            return Err(SnapshotError::Checksum);
        }

        let mut r = Reader {
            bytes: covered,
            pos: HEADER_LEN,
        };
        let tick = r.u64()?;
        let boot_epoch = r.u64()?;
        let fact_counter = r.u64()?;
        let count = r.u32()?;
        // Each fact takes at least 21 bytes, so the count cannot make us
        // reserve more than the input justifies.
        let mut facts = Vec::with_capacity((count as usize).min(r.remaining() / 21));
        for _ in 0..count {
            let key = r.string()?;
            let kind = r.string()?;
            let principal = match r.u8()? {
                0 => None,
                1 => Some(r.string()?),
                b => return Err(SnapshotError::Malformed(format!("principal flag {b}"))),
            };
            let payload_text = r.string()?;
            let payload = serde_json::from_str(&payload_text)
                .map_err(|e| SnapshotError::Malformed(format!("fact payload: {e}")))?;
            let tick = r.u64()?;
            facts.push(Fact {
                key: FactKey(key),
                kind,
                payload,
                principal,
                tick,
            });
        }
        let zone_len = usize::try_from(r.u64()?).map_err(|_| SnapshotError::Truncated)?;
        let zone = r.take(zone_len)?.to_vec();
        let (next_player, roster) = if version >= 2 {
            read_roster(&mut r)?
        } else {
            (0, Vec::new())
        };
        let links = if version >= 3 {
            read_links(&mut r)?
        } else {
            SavedLinks::default()
        };
        let (state_version, build) = if version >= 4 {
            (r.u32()?, r.string()?)
        } else {
            (1, String::new())
        };
        let mut characters = Vec::new();
        if version >= 4 {
            let count = r.u32()?;
            for _ in 0..count {
                let id = PlayerId(r.u32()?);
                let len = usize::try_from(r.u64()?).map_err(|_| SnapshotError::Truncated)?;
                characters.push((id, r.take(len)?.to_vec()));
            }
        }
        let mut calls = Vec::new();
        if version >= 5 {
            let count = r.u32()?;
            for _ in 0..count {
                let key = CallKey(r.string()?);
                let function = r.string()?;
                let args = serde_json::from_str(&r.string()?)
                    .map_err(|e| SnapshotError::Malformed(format!("call arguments: {e}")))?;
                let tick = r.u64()?;
                calls.push(Call {
                    key,
                    function,
                    args,
                    tick,
                });
            }
        }
        if r.remaining() != 0 {
            return Err(SnapshotError::Malformed("trailing bytes in body".into()));
        }
        Ok((
            Snapshot {
                tick,
                boot_epoch,
                fact_counter,
                facts,
                zone,
                next_player,
                roster,
                state_version,
                build,
                characters,
                calls,
            },
            links,
        ))
    }
}

/// The version-2 roster: next id, then the participants.
fn read_roster(r: &mut Reader<'_>) -> Result<(u32, Vec<SavedParticipant>), SnapshotError> {
    let next_player = r.u32()?;
    let count = r.u32()?;
    // Each participant takes at least 14 bytes: the count cannot over-reserve.
    let mut roster = Vec::with_capacity((count as usize).min(r.remaining() / 14));
    for _ in 0..count {
        let id = PlayerId(r.u32()?);
        let principal = Principal::new(r.string()?);
        let role = match r.u8()? {
            0 => Role::Player,
            1 => Role::Observer,
            b => return Err(SnapshotError::Malformed(format!("participant role {b}"))),
        };
        let claims = match serde_json::from_str(&r.string()?) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => {
                return Err(SnapshotError::Malformed(
                    "participant claims are not a JSON object".into(),
                ))
            }
        };
        let last_seq = match r.u8()? {
            0 => None,
            1 => Some(r.u32()?),
            b => return Err(SnapshotError::Malformed(format!("sequence flag {b}"))),
        };
        roster.push(SavedParticipant {
            id,
            principal,
            role,
            claims,
            last_seq,
        });
    }
    Ok((next_player, roster))
}

fn checksum(bytes: &[u8]) -> u64 {
    let mut h = StateHasher::new();
    h.write(bytes);
    h.finish()
}

fn len_u32(n: usize) -> u32 {
    // Lengths beyond u32 cannot occur: facts are bounded by config and
    // strings by MAX_FACT_ID_LEN / JSON sizes far below 4 GiB.
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, len_u32(s.len()));
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        let end = self.pos.checked_add(n).ok_or(SnapshotError::Truncated)?;
        let s = self
            .bytes
            .get(self.pos..end)
            .ok_or(SnapshotError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, SnapshotError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, SnapshotError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn string(&mut self) -> Result<String, SnapshotError> {
        let len = self.u32()? as usize;
        let s = self.take(len)?;
        String::from_utf8(s.to_vec())
            .map_err(|_| SnapshotError::Malformed("string is not UTF-8".into()))
    }
}

#[cfg(test)]
mod tests;
