//! Names on NATS. Zone ids and groups may contain `.`, `*` and `>`, which are syntax in NATS
//! subjects, so they appear hex-encoded in subjects and keys, and hashed where NATS limits a
//! name's length (consumer names become file names on the server).

use sha2::{Digest, Sha256};

/// Lowercase hex of `s`'s bytes: safe in any subject token or key.
pub fn hex(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0xF), 16).unwrap_or('0'));
    }
    out
}

/// The inverse of [`hex`]; `None` for anything [`hex`] cannot have written.
pub fn unhex(s: &str) -> Option<String> {
    if s.len() % 2 != 0 {
        return None;
    }
    let bytes = s
        .as_bytes()
        .chunks(2)
        .map(|pair| {
            let hi = char::from(pair[0]).to_digit(16)?;
            let lo = char::from(pair[1]).to_digit(16)?;
            Some((hi * 16 + lo) as u8)
        })
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// A fixed-length name for `s`: hex of its SHA-256, cut to 32 characters (128 bits), short
/// enough for a consumer name or a message id whatever the zone id's length.
pub fn digest(s: &str) -> String {
    let hash = Sha256::digest(s.as_bytes());
    let mut out = String::with_capacity(32);
    for b in &hash[..16] {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0xF), 16).unwrap_or('0'));
    }
    out
}

/// Where one namespace's objects live on the NATS server. Tests give each run its own
/// namespace so runs sharing a server never see each other's zones.
#[derive(Debug, Clone)]
pub struct Names {
    /// The stream holding every zone's envelopes, e.g. `ZK_ZONES`.
    pub stream: String,
    /// The subject prefix, e.g. `zk.zone`; a zone's subject is `<prefix>.<hex(zone)>`.
    pub subject_prefix: String,
    /// The key-value bucket of group membership, e.g. `zk_groups`.
    pub groups_bucket: String,
    /// The prefix of hosts' own subjects (plain NATS, outside the stream), e.g. `zk.host`.
    pub host_prefix: String,
}

impl Names {
    /// The names of `namespace` (1..=32 ASCII letters, digits, `-` or `_`; else `None`).
    pub fn new(namespace: &str) -> Option<Self> {
        if namespace.is_empty()
            || namespace.len() > 32
            || !namespace
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return None;
        }
        Some(Names {
            stream: format!("{}_ZONES", namespace.to_ascii_uppercase()),
            subject_prefix: format!("{namespace}.zone"),
            groups_bucket: format!("{namespace}_groups"),
            host_prefix: format!("{namespace}.host"),
        })
    }

    /// The subject a zone's envelopes are published on.
    pub fn zone_subject(&self, zone: &str) -> String {
        format!("{}.{}", self.subject_prefix, hex(zone))
    }

    /// The subject a host hears its transfer notes on.
    pub fn host_subject(&self, host: &str) -> String {
        format!("{}.{}", self.host_prefix, hex(host))
    }

    /// The durable consumer that delivers a zone's envelopes to the host running it.
    pub fn consumer(&self, zone: &str) -> String {
        format!("z{}", digest(zone))
    }

    /// The membership key of `zone` in `group`.
    pub fn group_key(group: &str, zone: &str) -> String {
        format!("{}.{}", hex(group), hex(zone))
    }

    /// The (group, zone) of a membership key; `None` for a key this code did not write.
    pub fn parse_group_key(key: &str) -> Option<(String, String)> {
        let (g, z) = key.split_once('.')?;
        Some((unhex(g)?, unhex(z)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_survives_subject_syntax() {
        for s in ["a.b", "*", ">", "zone:1", "é"] {
            assert!(hex(s).bytes().all(|b| b.is_ascii_hexdigit()));
            assert_eq!(unhex(&hex(s)).as_deref(), Some(s));
        }
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("abc"), None);
        let key = Names::group_key("g.*", "z>1");
        assert_eq!(
            Names::parse_group_key(&key),
            Some(("g.*".to_string(), "z>1".to_string()))
        );
    }

    #[test]
    fn namespaces_are_checked() {
        assert!(Names::new("zk").is_some());
        assert!(Names::new("a.b").is_none());
        assert!(Names::new("").is_none());
        assert_eq!(
            Names::new("zk").map(|n| n.stream),
            Some("ZK_ZONES".to_string())
        );
    }
}
