//! A matchmaking queue as configured (`--match-queue NAME:size=N:kind=KIND[:max_rtt_ms=M][:widen_secs=S]`).

/// One queue: what matches it forms and how far it lets players be from their region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    /// Its name, as clients ask for it.
    pub name: String,
    /// Players per match (2..=64).
    pub size: u32,
    /// The zone kind a match's zone runs.
    pub kind: String,
    /// The longest round trip to a match's region a player starts with, ms (default 150).
    pub max_rtt_ms: u32,
    /// After this long in the queue a player also takes any region within twice its best round
    /// trip or 50 ms over it, seconds (default 10; docs/MATCHMAKING.md).
    pub widen_secs: u64,
}

impl QueueSpec {
    /// Parses `NAME:size=N:kind=KIND[:max_rtt_ms=M][:widen_secs=S]`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = text.split(':');
        let name = parts.next().unwrap_or_default();
        if !super::valid_label(name) {
            return Err(format!(
                "queue {text:?}: the name must be 1..=64 bytes of letters, digits, '_', '-' and '.'"
            ));
        }
        let mut q = QueueSpec {
            name: name.to_owned(),
            size: 0,
            kind: String::new(),
            max_rtt_ms: 150,
            widen_secs: 10,
        };
        for part in parts {
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!("queue {name}: {part:?} is not key=value"));
            };
            let number = |max: u64| -> Result<u64, String> {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|v| *v <= max)
                    .ok_or_else(|| format!("queue {name}: {key} must be a number 0..={max}"))
            };
            match key {
                "size" => q.size = u32::try_from(number(64)?).unwrap_or(0),
                "kind" => {
                    if !super::valid_label(value) {
                        return Err(format!("queue {name}: kind {value:?} is not a kind name"));
                    }
                    q.kind = value.to_owned();
                }
                "max_rtt_ms" => q.max_rtt_ms = u32::try_from(number(10_000)?).unwrap_or(0),
                "widen_secs" => q.widen_secs = number(3600)?,
                other => return Err(format!("queue {name}: unknown setting {other:?}")),
            }
        }
        if q.size < 2 {
            return Err(format!("queue {name}: size must be 2..=64"));
        }
        if q.kind.is_empty() {
            return Err(format!(
                "queue {name}: kind is required (the zone kind of its matches)"
            ));
        }
        if q.max_rtt_ms == 0 {
            return Err(format!("queue {name}: max_rtt_ms must be at least 1"));
        }
        Ok(q)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_parsed_with_its_defaults() {
        let q = QueueSpec::parse("duel:size=2:kind=arena").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            q,
            QueueSpec {
                name: "duel".into(),
                size: 2,
                kind: "arena".into(),
                max_rtt_ms: 150,
                widen_secs: 10,
            }
        );
        let q = QueueSpec::parse("squad:size=4:kind=arena:max_rtt_ms=80:widen_secs=30")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((q.max_rtt_ms, q.widen_secs), (80, 30));
    }

    #[test]
    fn malformed_queues_are_refused_with_the_reason() {
        for (text, says) in [
            ("", "name"),
            ("duel", "size"),
            ("duel:size=2", "kind"),
            ("duel:size=1:kind=arena", "size"),
            ("duel:size=65:kind=arena", "size"),
            ("duel:size=two:kind=arena", "size"),
            ("duel:size=2:kind=arena:colour=red", "unknown"),
            ("duel:size=2:kind=a b", "kind"),
            ("duel:size=2:kind=arena:max_rtt_ms=0", "max_rtt_ms"),
            ("du el:size=2:kind=arena", "name"),
            ("duel:size", "key=value"),
        ] {
            let e = QueueSpec::parse(text).err().unwrap_or_default();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }
}
