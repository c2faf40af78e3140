//! A player's display name and colour.
//!
//! The name comes from the ticket claim `name` (the only identity input besides the principal,
//! and still untrusted text): it is cut to a short, printable form. The colour is a hue derived
//! from the principal, so the same player keeps its colour everywhere.

/// Longest display name, in bytes (and the `name` field's wire limit).
pub const MAX_NAME: usize = 16;

/// The principal's stable hash (FNV-1a 64): the same on every platform and in every build, so a
/// player's colour never changes.
fn principal_hash(principal: &str) -> u64 {
    principal.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The drones' hue in degrees: the page draws them red (`#e0605e`).
pub const DRONE_HUE: u32 = 1;

/// No player gets a hue closer than this to [`DRONE_HUE`], in degrees: a red player would read as
/// a drone.
pub const DRONE_BAND: u32 = 30;

/// Whether `h` is too close to the drones' red for a player.
fn near_drones(h: u32) -> bool {
    hue_gap(h, DRONE_HUE) < DRONE_BAND
}

/// The player's hue in degrees (`0..360`), from the principal, outside the drones' band.
pub fn hue(principal: &str) -> u32 {
    let span = u64::from(360 - 2 * DRONE_BAND);
    (DRONE_HUE + DRONE_BAND + (principal_hash(principal) % span) as u32) % 360
}

/// A display name from the `name` claim: letters, digits, space, `-`, `_` and `.` only (other
/// characters dropped), runs of spaces collapsed, trimmed, at most [`MAX_NAME`] bytes. An empty
/// or missing claim gives `guest-XXXX` from the principal's hash.
pub fn display_name(claim: Option<&str>, principal: &str) -> String {
    let mut out = String::new();
    if let Some(raw) = claim {
        for c in raw.chars() {
            let keep = c.is_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.');
            if !keep || c.is_control() {
                continue;
            }
            if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
                continue;
            }
            if out.len() + c.len_utf8() > MAX_NAME {
                break;
            }
            out.push(c);
        }
    }
    let trimmed = out.trim_end().to_owned();
    if trimmed.is_empty() {
        format!("guest-{:04x}", principal_hash(principal) & 0xffff)
    } else {
        trimmed
    }
}

/// Smallest hue difference, in degrees, at which two players' colours read as different at a glance.
pub const MIN_HUE_GAP: u32 = 30;

/// Candidates tried after the preferred hue: steps of the golden angle spread any number of
/// players around the colour wheel.
const HUE_CANDIDATES: u32 = 24;

/// Circular distance between two hues, in degrees.
fn hue_gap(a: u32, b: u32) -> u32 {
    let d = a.abs_diff(b) % 360;
    d.min(360 - d)
}

/// A hue for a newcomer: `preferred` (the principal's own, so a player usually keeps its colour)
/// unless it is within [`MIN_HUE_GAP`] of a present player's; then the first golden-angle step
/// from it that is clear of all of them, or, in a crowd where none is, the one farthest from its
/// nearest neighbour.
pub fn distinct_hue(preferred: u32, taken: &[u32]) -> u32 {
    let nearest = |h: u32| taken.iter().map(|&t| hue_gap(h, t)).min().unwrap_or(180);
    let mut best: Option<(u32, u32)> = None;
    for i in 0..=HUE_CANDIDATES {
        // 137.508° in tenths of a degree, rounded to whole degrees.
        let h = (preferred + (i * 1375 + 5) / 10) % 360;
        if near_drones(h) {
            continue;
        }
        let gap = nearest(h);
        if gap >= MIN_HUE_GAP {
            return h;
        }
        if best.is_none_or(|(g, _)| gap > g) {
            best = Some((gap, h));
        }
    }
    // Some golden-angle step always leaves the band; the opposite of the drones is the last resort.
    best.map_or((DRONE_HUE + 180) % 360, |(_, h)| h)
}

/// `name`, or, when a present player already has it, `name-2`, `name-3`… (cut so the whole stays
/// within [`MAX_NAME`] bytes): two players are never shown under the same name.
pub fn distinct_name(name: &str, taken: &[String]) -> String {
    if !taken.iter().any(|t| t == name) {
        return name.to_owned();
    }
    // One of the first `taken.len() + 1` suffixes is free, so the loop always returns.
    for n in 2..=taken.len() + 2 {
        let suffix = format!("-{n}");
        let mut base = name.to_owned();
        while base.len() + suffix.len() > MAX_NAME {
            base.pop();
        }
        let candidate = format!("{base}{suffix}");
        if !taken.contains(&candidate) {
            return candidate;
        }
    }
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_and_bounded() {
        assert_eq!(display_name(Some("  Ada   Lovelace "), "p"), "Ada Lovelace");
        assert_eq!(
            display_name(Some("<script>x</script>"), "p"),
            "scriptxscript"
        );
        assert_eq!(display_name(Some("a\u{0}b\nc\u{202e}d"), "p"), "abcd");
        assert_eq!(
            display_name(Some("0123456789abcdefXYZ"), "p"),
            "0123456789abcdef"
        );
        // Multi-byte characters are never split.
        let long = display_name(Some("ééééééééééé"), "p");
        assert!(long.len() <= MAX_NAME && long.chars().all(|c| c == 'é'));
        let guest = display_name(Some("!!!"), "alice");
        assert!(guest.starts_with("guest-") && guest.len() == 10);
        assert_eq!(display_name(None, "alice"), guest);
        assert_ne!(display_name(None, "bob"), guest);
    }

    #[test]
    fn hue_is_stable_per_principal() {
        assert_eq!(hue("alice"), hue("alice"));
        assert!(hue("alice") < 360 && hue("bob") < 360);
        let distinct: std::collections::BTreeSet<u32> =
            (0..50).map(|i| hue(&format!("p{i}"))).collect();
        assert!(distinct.len() > 30);
    }

    #[test]
    fn names_are_made_distinct_from_present_players() {
        let taken = vec!["ann".to_owned(), "ann-2".to_owned()];
        assert_eq!(distinct_name("bob", &taken), "bob");
        assert_eq!(distinct_name("ann", &taken), "ann-3");
        let long = "0123456789abcdef".to_owned();
        let renamed = distinct_name(&long, std::slice::from_ref(&long));
        assert_eq!(renamed, "0123456789abcd-2");
        assert!(renamed.len() <= MAX_NAME);
        // Multi-byte names are cut on a character boundary.
        let wide = "éééééééé".to_owned();
        let renamed = distinct_name(&wide, std::slice::from_ref(&wide));
        assert!(
            renamed.len() <= MAX_NAME && renamed.ends_with("-2"),
            "{renamed}"
        );
    }

    #[test]
    fn no_player_is_given_the_drones_red() {
        for i in 0..2000 {
            let h = hue(&format!("guest:p{i}:{i:x}"));
            assert!(hue_gap(h, DRONE_HUE) >= DRONE_BAND, "{h}");
        }
        // Even asked for red, or crowded, a newcomer's hue stays out of the band.
        let mut taken = Vec::new();
        for _ in 0..20 {
            let h = distinct_hue(DRONE_HUE, &taken);
            assert!(hue_gap(h, DRONE_HUE) >= DRONE_BAND, "{h} among {taken:?}");
            taken.push(h);
        }
    }

    #[test]
    fn hues_are_kept_apart_from_present_players() {
        assert_eq!(distinct_hue(100, &[]), 100);
        assert_eq!(distinct_hue(100, &[200]), 100);
        // Too close to a present player: moved, and clear of everyone.
        let h = distinct_hue(100, &[110]);
        assert_ne!(h, 100);
        assert!(hue_gap(h, 110) >= MIN_HUE_GAP);
        // Seven players who all prefer the same hue still get seven clearly different colours
        // (the eighth finds no room: the drones' band leaves 300° of the wheel).
        let mut hues = Vec::new();
        for _ in 0..7 {
            hues.push(distinct_hue(42, &hues));
        }
        for (i, a) in hues.iter().enumerate() {
            for b in &hues[i + 1..] {
                assert!(hue_gap(*a, *b) >= MIN_HUE_GAP, "{hues:?}");
            }
        }
        // A full wheel still answers a hue.
        let crowd: Vec<u32> = (0..36).map(|i| i * 10).collect();
        assert!(distinct_hue(5, &crowd) < 360);
    }
}
