//! Where a mute or ban reaches ([`ChatScope`]: one zone, one zone group — a world — or the
//! whole fleet), as sessions and channels meet it.

use zonekeep_store::ChatScope;

use super::channel::{Channel, Seat};

/// Parses `fleet`, `zone:<id>` or `group:<name>`.
pub(crate) fn parse(s: &str) -> Result<ChatScope, String> {
    s.parse::<ChatScope>().map_err(|e| e.to_string())
}

/// Whether a ban in `scope` keeps `seat` out of its zone.
pub(crate) fn bars(scope: &ChatScope, seat: &Seat<'_>) -> bool {
    match scope {
        ChatScope::Fleet => true,
        ChatScope::Zone(z) => z == seat.zone,
        ChatScope::Group(g) => seat.groups.iter().any(|x| x == g),
    }
}

/// Whether a mute in `scope` silences `seat` on `channel`.
pub(crate) fn silences(scope: &ChatScope, seat: &Seat<'_>, channel: &Channel) -> bool {
    match (scope, channel) {
        (ChatScope::Fleet, _) => true,
        (ChatScope::Zone(z), Channel::Zone(c)) => z == c,
        (ChatScope::Group(g), Channel::Group(c)) => g == c,
        // A world's mute holds in the channels of its zones too.
        (ChatScope::Group(g), Channel::Zone(c)) => {
            c == seat.zone && seat.groups.iter().any(|x| x == g)
        }
        _ => false,
    }
}

/// Whether a moderator whose ticket admits zones by `pattern` may act in `scope`: a zone the
/// pattern admits; groups and the fleet only for a moderator of every zone (`*`).
pub(crate) fn within(scope: &ChatScope, pattern: &str) -> bool {
    match scope {
        ChatScope::Zone(z) => zonekeep_ticket::zone_matches(pattern, z),
        ChatScope::Group(_) | ChatScope::Fleet => pattern == "*",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn seat<'a>(zone: &'a str, groups: &'a [String]) -> Seat<'a> {
        Seat {
            principal: "ann",
            zone,
            groups,
        }
    }

    #[test]
    fn scopes_parse_and_print_back() {
        for s in ["fleet", "zone:arena-1", "group:world-7"] {
            assert_eq!(parse(s).unwrap().to_string(), s);
        }
        for bad in ["", "zone:", "dm:bob", "world", "fleet:x"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bans_and_mutes_reach_as_far_as_their_scope() {
        let groups = vec!["w".to_owned()];
        let in_w = seat("z1", &groups);
        let alone = seat("z2", &[]);
        let w = ChatScope::Group("w".into());
        assert!(bars(&w, &in_w));
        assert!(!bars(&w, &alone));
        assert!(bars(&ChatScope::Zone("z2".into()), &alone));
        assert!(bars(&ChatScope::Fleet, &alone));

        let dm = Channel::direct("ann", "bob").unwrap();
        assert!(silences(&w, &in_w, &Channel::Zone("z1".into())));
        assert!(silences(&w, &in_w, &Channel::Group("w".into())));
        assert!(!silences(&w, &in_w, &dm));
        assert!(!silences(&w, &alone, &Channel::Zone("z2".into())));
        assert!(silences(&ChatScope::Fleet, &alone, &dm));
        let z1 = ChatScope::Zone("z1".into());
        assert!(!silences(&z1, &in_w, &Channel::Group("w".into())));
    }

    #[test]
    fn a_moderator_acts_within_its_ticket() {
        assert!(within(&ChatScope::Zone("arena-3".into()), "arena-*"));
        assert!(!within(&ChatScope::Zone("lobby".into()), "arena-*"));
        assert!(!within(&ChatScope::Fleet, "arena-*"));
        assert!(within(&ChatScope::Fleet, "*"));
        assert!(within(&ChatScope::Group("w".into()), "*"));
    }
}
