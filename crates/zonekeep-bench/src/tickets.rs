//! Tickets for bots: minted locally with the host's own ticket code from a shared secret, or
//! fetched from an application's join endpoint. Every join and every reconnect gets a fresh ticket
//! (tickets are single-use: the host refuses a replayed `jti`).

use serde::Deserialize;
use serde_json::{Map, Value};
use zonekeep_core::Role;
use zonekeep_ticket::{mint, unix_now, MintRequest, TicketKey};

use crate::config::Auth;
use crate::error::BenchError;
use crate::http::Http;

/// Ticket lifetime: well under the host's default maximum of 10 minutes.
const TTL_SECS: u64 = 300;

/// A source of tickets for one run.
#[derive(Debug, Clone)]
pub struct Tickets {
    key: Option<TicketKey>,
    join: Option<String>,
    http: Http,
    kind: Option<String>,
    params: Option<Value>,
    /// The role minted tickets admit.
    role: Role,
}

/// What the `--join` endpoint answers.
#[derive(Debug, Deserialize)]
struct JoinAnswer {
    zone: String,
    ticket: String,
}

impl Tickets {
    /// Tickets per `auth`; minted ones ask for zone `kind` created with `params` when the zone is
    /// not running yet.
    pub fn new(
        auth: &Auth,
        kind: Option<String>,
        params: Option<Value>,
    ) -> Result<Self, BenchError> {
        let (key, join) = match auth {
            Auth::Secret { secret, kid } => (
                Some(
                    TicketKey::new(kid.clone(), secret.as_bytes().to_vec(), false)
                        .map_err(|e| BenchError::Ticket(e.to_string()))?,
                ),
                None,
            ),
            Auth::Join { url } => (None, Some(url.clone())),
        };
        Ok(Self {
            key,
            join,
            http: Http::default(),
            kind,
            params,
            role: Role::Player,
        })
    }

    /// Minted tickets admit bots as `role` (observers: a crowd watching the zone).
    pub fn with_role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }

    /// A fresh ticket for bot `bot` to `zone`; returns the zone to join (the join endpoint may
    /// pick another) and the ticket. The principal is `bot-<bot>`; the claims carry `{"bot": bot}`.
    pub async fn ticket(&self, bot: u32, zone: &str) -> Result<(String, String), BenchError> {
        if let Some(key) = &self.key {
            let mut claims = Map::new();
            claims.insert("bot".into(), Value::from(bot));
            if let Some(kind) = &self.kind {
                claims.insert("kind".into(), Value::from(kind.clone()));
            }
            let req = MintRequest {
                sub: format!("bot-{bot}"),
                zone: zone.to_owned(),
                role: self.role,
                ttl_secs: TTL_SECS,
                params: self.params.clone(),
                claims,
            };
            let t = mint(key, &req, unix_now()).map_err(|e| BenchError::Ticket(e.to_string()))?;
            return Ok((zone.to_owned(), t));
        }
        let base = self.join.as_deref().unwrap_or_default();
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}bot={bot}&zone={zone}");
        let text = self.http.get_text(&url).await?;
        let a: JoinAnswer = serde_json::from_str(&text)
            .map_err(|e| BenchError::Ticket(format!("join endpoint answer: {e}")))?;
        Ok((a.zone, a.ticket))
    }
}
