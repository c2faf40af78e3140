//! The gallery's wire formats: the shot a page sends and the verdict the zone sends back.
//!
//! Both are little-endian and fixed-size. The page (`web/src/gallery.ts`) and the bench's aiming
//! bots encode and decode exactly these bytes.

/// Bytes of an encoded [`Shot`].
pub const SHOT_LEN: usize = 9;
/// [`Shot`] flag: judge the shot against the world as the shooter drew it (lag compensation).
pub const FLAG_COMPENSATED: u8 = 1;

/// One hitscan shot at a point of the gallery wall, in world units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shot {
    /// Where the shooter aimed, x.
    pub x: f32,
    /// Where the shooter aimed, y.
    pub y: f32,
    /// Whether to judge it against what the shooter saw (`true`) or against the world as it is
    /// when the shot arrives (`false`).
    pub compensated: bool,
}

/// Why shot bytes were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ShotError {
    /// Not [`SHOT_LEN`] bytes.
    #[error("a shot is {SHOT_LEN} bytes, not {0}")]
    Length(usize),
    /// A flag bit this version does not know.
    #[error("unknown shot flags {0:#04x}")]
    Flags(u8),
    /// A coordinate is NaN or infinite.
    #[error("the aim point is not finite")]
    NotFinite,
}

impl Shot {
    /// The shot as sent: `flags: u8`, `x: f32`, `y: f32`.
    pub fn encode(&self) -> [u8; SHOT_LEN] {
        let mut out = [0u8; SHOT_LEN];
        out[0] = if self.compensated {
            FLAG_COMPENSATED
        } else {
            0
        };
        out[1..5].copy_from_slice(&self.x.to_le_bytes());
        out[5..9].copy_from_slice(&self.y.to_le_bytes());
        out
    }

    /// Reads a shot; any other length, an unknown flag or a non-finite coordinate is refused.
    /// A point off the wall is a valid shot (it simply hits nothing).
    pub fn decode(bytes: &[u8]) -> Result<Shot, ShotError> {
        let b: &[u8; SHOT_LEN] = bytes
            .try_into()
            .map_err(|_| ShotError::Length(bytes.len()))?;
        let flags = b[0];
        if flags & !FLAG_COMPENSATED != 0 {
            return Err(ShotError::Flags(flags));
        }
        let x = f32::from_le_bytes([b[1], b[2], b[3], b[4]]);
        let y = f32::from_le_bytes([b[5], b[6], b[7], b[8]]);
        if !x.is_finite() || !y.is_finite() {
            return Err(ShotError::NotFinite);
        }
        Ok(Shot {
            x,
            y,
            compensated: flags & FLAG_COMPENSATED != 0,
        })
    }
}

/// What became of a shot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing was where the shot landed.
    Miss = 0,
    /// A target was hit (and respawns elsewhere).
    Hit = 1,
    /// The shooter had not been sent the world yet (no view tick, or no frame sent), so there
    /// was nothing it could have aimed at: the shot is not judged and not counted.
    Unjudged = 2,
    /// The shot hit a target as the shooter drew it, but someone else's shot had already taken
    /// that target down: a fair shot, beaten to it. Counted as a shot, not a hit.
    Taken = 3,
}

/// Bytes of an encoded [`Verdict`].
pub const VERDICT_LEN: usize = 20;

/// The zone's answer to one shot, sent to the shooter only (event topic
/// [`TOPIC_VERDICT`](super::TOPIC_VERDICT)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// The shot's input sequence number (what the client's `sendInput` returned).
    pub seq: u32,
    /// Hit, miss, taken or not judged.
    pub outcome: Outcome,
    /// Whether it was judged against what the shooter saw.
    pub compensated: bool,
    /// The target hit (its entity id; for [`Outcome::Taken`] the one already down), 0 when none.
    pub target: u32,
    /// How many ticks behind the tick it was applied in the shot was judged (0 when judged
    /// against the present).
    pub ticks_behind: u16,
    /// The shooter's hits so far.
    pub hits: u32,
    /// The shooter's judged shots so far.
    pub shots: u32,
}

/// Why verdict bytes could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VerdictError {
    /// Not [`VERDICT_LEN`] bytes.
    #[error("a verdict is {VERDICT_LEN} bytes, not {0}")]
    Length(usize),
    /// An outcome this version does not know.
    #[error("unknown shot outcome {0}")]
    Outcome(u8),
}

impl Verdict {
    /// `seq: u32`, `outcome: u8`, `flags: u8` (bit 0: compensated), `target: u32`,
    /// `ticks_behind: u16`, `hits: u32`, `shots: u32`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(VERDICT_LEN);
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.push(self.outcome as u8);
        out.push(if self.compensated {
            FLAG_COMPENSATED
        } else {
            0
        });
        out.extend_from_slice(&self.target.to_le_bytes());
        out.extend_from_slice(&self.ticks_behind.to_le_bytes());
        out.extend_from_slice(&self.hits.to_le_bytes());
        out.extend_from_slice(&self.shots.to_le_bytes());
        out
    }

    /// Reads a verdict (what a client does with the event's payload).
    pub fn decode(bytes: &[u8]) -> Result<Verdict, VerdictError> {
        let b: &[u8; VERDICT_LEN] = bytes
            .try_into()
            .map_err(|_| VerdictError::Length(bytes.len()))?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let outcome = match b[4] {
            0 => Outcome::Miss,
            1 => Outcome::Hit,
            2 => Outcome::Unjudged,
            3 => Outcome::Taken,
            other => return Err(VerdictError::Outcome(other)),
        };
        Ok(Verdict {
            seq: u32_at(0),
            outcome,
            compensated: b[5] & FLAG_COMPENSATED != 0,
            target: u32_at(6),
            ticks_behind: u16::from_le_bytes([b[10], b[11]]),
            hits: u32_at(12),
            shots: u32_at(16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shots_round_trip_and_bad_bytes_are_refused() {
        let s = Shot {
            x: 12.5,
            y: -3.25,
            compensated: true,
        };
        assert_eq!(Shot::decode(&s.encode()), Ok(s));
        assert_eq!(Shot::decode(&[]), Err(ShotError::Length(0)));
        assert_eq!(Shot::decode(&[0; 10]), Err(ShotError::Length(10)));
        let mut bad = s.encode();
        bad[0] = 0x81;
        assert_eq!(Shot::decode(&bad), Err(ShotError::Flags(0x81)));
        let mut nan = s.encode();
        nan[5..9].copy_from_slice(&f32::NAN.to_le_bytes());
        assert_eq!(Shot::decode(&nan), Err(ShotError::NotFinite));
        let mut inf = s.encode();
        inf[1..5].copy_from_slice(&f32::INFINITY.to_le_bytes());
        assert_eq!(Shot::decode(&inf), Err(ShotError::NotFinite));
    }

    #[test]
    fn verdicts_round_trip_and_bad_bytes_are_refused() {
        let v = Verdict {
            seq: 7,
            outcome: Outcome::Hit,
            compensated: true,
            target: 42,
            ticks_behind: 13,
            hits: 3,
            shots: 5,
        };
        let bytes = v.encode();
        assert_eq!(bytes.len(), VERDICT_LEN);
        assert_eq!(Verdict::decode(&bytes), Ok(v));
        assert_eq!(Verdict::decode(&bytes[1..]), Err(VerdictError::Length(19)));
        let mut bad = bytes.clone();
        bad[4] = 9;
        assert_eq!(Verdict::decode(&bad), Err(VerdictError::Outcome(9)));
        let mut taken = bytes.clone();
        taken[4] = 3;
        assert_eq!(
            Verdict::decode(&taken).map(|v| v.outcome),
            Ok(Outcome::Taken)
        );
    }
}
