//! The fleet's part of the host configuration: identity, advertised URL, capacity, route mode.

use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;

use crate::config::{invalid, ConfigError, ServerConfig};

/// What a host does with a client whose zone another host owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteMode {
    /// Answer the Hello with a `Redirect` carrying the zone's URL at its owner (default).
    #[default]
    Redirect,
    /// Forward the WebSocket to the owner, for deployments where only one address is public.
    Proxy,
}

impl std::str::FromStr for RouteMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "redirect" => Ok(RouteMode::Redirect),
            "proxy" => Ok(RouteMode::Proxy),
            other => Err(format!("must be redirect or proxy, not {other:?}")),
        }
    }
}

/// Longest advertised URL (PROTOCOL.md: a Redirect's URL is at most 512 bytes, and the zone path
/// and hop count follow it).
const MAX_ADVERTISE: usize = 256;

/// Checks the fleet settings of `c` (called by [`ServerConfig::validate`]).
pub(crate) fn validate_config(c: &ServerConfig) -> Result<(), ConfigError> {
    if let Some(id) = &c.host_id {
        if !crate::valid_zone_id(id) {
            return Err(invalid(
                "host_id",
                "must be 1..=128 characters of A-Z a-z 0-9 . _ : -",
            ));
        }
    }
    if let Some(url) = &c.advertise {
        check_advertise(url).map_err(|p| invalid("advertise", p))?;
    }
    if c.capacity == Some(0) {
        return Err(invalid("capacity", "must be greater than 0"));
    }
    Ok(())
}

/// An advertised base URL: `ws://` or `wss://`, a host, no path, query or fragment.
pub(crate) fn check_advertise(url: &str) -> Result<(), String> {
    if url.len() > MAX_ADVERTISE {
        return Err(format!("must be at most {MAX_ADVERTISE} bytes"));
    }
    let rest = url
        .strip_prefix("ws://")
        .or_else(|| url.strip_prefix("wss://"))
        .ok_or("must start with ws:// or wss://")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Err("names no host".into());
    }
    if rest
        .chars()
        .any(|c| matches!(c, '/' | '?' | '#' | ' ') || c.is_control())
    {
        return Err("must be a base URL (scheme, host and port only)".into());
    }
    Ok(())
}

/// The advertised base URL: the configured one, or `ws://` and the bound address.
pub(crate) fn advertise_url(c: &ServerConfig, bound: SocketAddr) -> String {
    if let Some(url) = &c.advertise {
        return url.trim_end_matches('/').to_owned();
    }
    let mut addr = bound;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    format!("ws://{addr}")
}

/// File in the data dir holding the host id made for a host started without one.
pub const HOST_ID_FILE: &str = "host-id";

/// The configured host id, or the one kept in `data_dir/host-id` (made on first start).
pub(crate) fn host_id(c: &ServerConfig) -> std::io::Result<String> {
    if let Some(id) = &c.host_id {
        return Ok(id.clone());
    }
    load_or_make_id(&c.data_dir)
}

fn load_or_make_id(dir: &Path) -> std::io::Result<String> {
    let path = dir.join(HOST_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(s) if crate::valid_zone_id(s.trim()) => return Ok(s.trim().to_owned()),
        Ok(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} does not hold a valid host id", path.display()),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(dir)?;
    let id = format!("host-{}", random_hex(6)?);
    std::fs::write(&path, format!("{id}\n"))?;
    Ok(id)
}

/// `n` random bytes as lowercase hex.
pub(crate) fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn advertised_urls_are_base_websocket_urls() {
        assert!(check_advertise("ws://10.0.0.7:7350").is_ok());
        assert!(check_advertise("wss://play.example.com/").is_ok());
        assert!(check_advertise("http://x").is_err());
        assert!(check_advertise("ws://").is_err());
        assert!(check_advertise("ws://x/zones").is_err());
        assert!(check_advertise("ws://x?a=b").is_err());
        assert!(check_advertise(&format!("ws://{}", "a".repeat(300))).is_err());
    }

    #[test]
    fn the_default_advertised_url_is_the_bound_address() {
        let c = ServerConfig::default();
        let any: SocketAddr = "0.0.0.0:7351".parse().unwrap();
        assert_eq!(advertise_url(&c, any), "ws://127.0.0.1:7351");
    }

    #[test]
    fn a_host_keeps_the_id_it_made() {
        let dir = tempfile::tempdir().unwrap();
        let c = ServerConfig {
            data_dir: dir.path().to_path_buf(),
            ..ServerConfig::default()
        };
        let first = host_id(&c).unwrap();
        assert!(crate::valid_zone_id(&first));
        assert_eq!(host_id(&c).unwrap(), first);
        std::fs::write(dir.path().join(HOST_ID_FILE), "bad id!").unwrap();
        assert!(
            host_id(&c).is_err(),
            "a damaged id file is an error, not a new id"
        );
    }
}
