//! [`Host`]: its bus, transfers and fleet membership, and the accept loop.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::config::ServerConfig;
use crate::metrics::Metrics;
use crate::net::conn_limit::{Admission, ConnLimiter};
use crate::persist::Persistence;
use crate::{admin, dev};

use super::routes::{bound_plain_requests, metrics_handler, webtransport_handler, ws_handler};
use super::{ConnInfo, HostBuilder, HostError, Shared};

/// A Zonekeep host.
pub struct Host {
    pub(super) shared: Arc<Shared>,
}

impl Host {
    /// Starts the host's cross-zone bus: NATS with `--bus`, in process otherwise (in a fleet
    /// without `--bus`, one WARN: other hosts' zones cannot be messaged).
    async fn start_bus(&self) -> Result<(), HostError> {
        let shared = &self.shared;
        if shared.sim.bus.get().is_some() {
            return Ok(());
        }
        let save_every = shared
            .sim
            .persist
            .as_ref()
            .map(|p| p.config().save_every)
            .unwrap_or(Duration::from_secs(5));
        let host = shared
            .fleet
            .get()
            .map(|f| f.host_id.clone())
            .unwrap_or_else(|| "local".to_owned());
        let config = zonekeep_bus::BusConfig {
            host,
            // Zones acknowledge at their saves: a redelivery before the next save is waste.
            ack_wait: (save_every * 3).max(Duration::from_secs(10)),
            inbox_capacity: zonekeep_core::message::MAX_INBOX,
            ..zonekeep_bus::BusConfig::default()
        };
        let bus = match &shared.config.bus {
            Some(url) => {
                let bus = zonekeep_bus::BusHandle::connect(url, config)
                    .await
                    .map_err(|e| HostError::Io(std::io::Error::other(e.to_string())))?;
                tracing::info!(url = %url, "cross-zone bus on NATS JetStream");
                bus
            }
            None => {
                let fleet = shared.fleet.get().is_some();
                if fleet {
                    tracing::warn!("no bus configured: zone messages reach only this host's zones; start every host with --bus nats://…");
                }
                let locator = Arc::new(crate::bus::HostLocator {
                    registry: shared.registry.clone(),
                    fleet,
                });
                zonekeep_bus::BusHandle::local(config, locator)
                    .map_err(|e| HostError::Io(std::io::Error::other(e.to_string())))?
            }
        };
        let _ = shared.sim.bus.set(bus);
        Ok(())
    }

    /// Installs the store's module deploys for this host's module kinds now, then follows them
    /// (see [`crate::code`]) until the host leaves. Nothing to do without a store or modules.
    async fn follow_module_deploys(&self) {
        let shared = &self.shared;
        let (Some(code), Some(p)) = (shared.code.clone(), shared.sim.persist.as_ref()) else {
            return;
        };
        let store = p.store().clone();
        if let Err(e) = crate::code::sync_once(&code, &store, &self.upgrader()).await {
            tracing::warn!(error = %e, "reading module deploys from the store");
        }
        tokio::spawn(crate::code::follow(
            code,
            store,
            self.upgrader(),
            shared.fleet_stop.clone(),
        ));
    }

    /// A handle that upgrades this host's running zones to their kind's current game code
    /// (see [`crate::upgrade`]).
    pub fn upgrader(&self) -> crate::upgrade::Upgrader {
        crate::upgrade::Upgrader {
            shared: self.shared.clone(),
        }
    }

    /// Start building a host.
    pub fn builder() -> HostBuilder {
        HostBuilder::new()
    }

    /// The configuration in force.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    /// The metrics registry (also served at `/metrics`).
    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// The host's persistence, if it has one.
    pub fn persistence(&self) -> Option<&Arc<Persistence>> {
        self.shared.sim.persist.as_ref()
    }

    /// Mint a ticket with the host's first active key.
    pub fn mint_ticket(
        &self,
        req: &crate::ticket::MintRequest,
    ) -> Result<String, crate::ticket::MintError> {
        let key = self
            .shared
            .verifier
            .keys()
            .primary()
            .ok_or(crate::ticket::MintError::Random)?;
        crate::ticket::mint(key, req, crate::ticket::unix_now())
    }

    /// Starts the transfer worker (once), with transfer records in memory for a host that keeps
    /// nothing.
    async fn start_transfers(&self) -> Result<(), HostError> {
        let shared = &self.shared;
        if shared.sim.persist.is_none() && shared.memory_transfers.get().is_none() {
            let store = zonekeep_store::SqliteStore::open(":memory:")
                .await
                .map_err(|e| {
                    HostError::Io(std::io::Error::other(format!("transfer records: {e}")))
                })?;
            let _ = shared.memory_transfers.set(Arc::new(store));
        }
        if let Some(jobs) = shared.sim.transfers.take_receiver() {
            tokio::spawn(crate::transfer::run(Arc::clone(shared), jobs));
        }
        // Moves between hosts: the notes the bus brings this host's zones.
        if let Some(notes) = shared
            .sim
            .bus
            .get()
            .and_then(|b| b.take_transfer_deliveries())
        {
            tokio::spawn(crate::transfer::serve_notes(Arc::clone(shared), notes));
        }
        // Messages waiting for a zone that does not run here wake it, or are refused.
        tokio::spawn(crate::bus::wake::run(Arc::clone(shared)));
        Ok(())
    }

    /// Joins the fleet (a host with a store): registers in the directory with `bound` as the
    /// default advertised address and lands the first heartbeat. [`serve`](Self::serve) does it
    /// when it was not done before; call it first to know the host is a fleet member before
    /// announcing it.
    pub async fn join_fleet(&self, bound: std::net::SocketAddr) -> Result<(), HostError> {
        if self.shared.fleet().is_none() {
            crate::fleet::start(&self.shared, bound).await?;
        }
        Ok(())
    }

    /// Every route of the host (zones, metrics, admin, dev).
    pub fn router(&self) -> Router {
        let shared = self.shared.clone();
        let mut r = Router::new()
            .route("/zones/{zone_id}", get(ws_handler))
            .route(
                "/relay/{zone_id}",
                get(crate::net::relay::origin::link_handler),
            )
            .route("/metrics", get(metrics_handler))
            .route(
                "/admin/zones/{id}/messages",
                axum::routing::post(crate::bus::post_message).layer(
                    axum::middleware::from_fn_with_state(shared.clone(), crate::admin::auth),
                ),
            )
            .route("/healthz", get(|| async { "ok" }))
            .route("/webtransport", get(webtransport_handler))
            .merge(admin::router(&shared))
            .merge(crate::lobby::router(&shared))
            .merge(crate::matchmaker::router(&shared))
            .merge(crate::boards::router(&shared))
            .merge(crate::presence::router(&shared))
            .merge(crate::chat::routes::router())
            .merge(admin::console::router());
        if shared.config.dev {
            r = r.merge(dev::router());
        }
        r.with_state(shared)
    }

    /// Serve until `shutdown` resolves (or an operator asks for it with `POST /admin/drain`),
    /// then shut down gracefully: each zone
    /// stops ticking, its final save is confirmed by the store, and only then
    /// are its clients kicked with SHUTTING_DOWN, all within
    /// `shutdown_timeout_ms`. Returns [`HostError::StateLost`] when a final
    /// save was refused, dropped or not confirmed in time.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), HostError> {
        self.serve_with(listener, Router::new(), shutdown).await
    }

    /// Like [`serve`](Self::serve), with `extra` routes merged in (e.g. static pages).
    ///
    /// HTTP/1.1 only: the WebSocket endpoint and the small JSON routes gain nothing from HTTP/2,
    /// and HTTP/1.1 alone lets one timer bound every socket until it has sent a request head
    /// (`header_read_timeout_ms`, from accept and between kept-alive requests). An HTTP/2
    /// preface is refused by closing the connection.
    pub async fn serve_with(
        self,
        listener: TcpListener,
        extra: Router,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), HostError> {
        let shared = self.shared.clone();
        let cfg = &shared.config;
        let app = self
            .router()
            .merge(extra)
            .layer(axum::middleware::from_fn_with_state(
                Duration::from_millis(cfg.request_timeout_ms),
                bound_plain_requests,
            ));
        let limiter = ConnLimiter::new(
            cfg.max_connections,
            cfg.max_connections_per_ip,
            shared.metrics.connections_gauge(),
        );
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_millis(cfg.header_read_timeout_ms));
        let conns = TaskTracker::new();
        if shared.ws_io.get().is_none() {
            let io = crate::net::ws::io::WsIo::start(
                cfg.ws_io_thread_count(),
                "zonekeep-ws-io",
                crate::net::ws::io::IoSettings::of(cfg),
                &shared.metrics,
                &shared,
                tokio::runtime::Handle::current(),
            )?;
            let _ = shared.ws_io.set(io);
            let end = shared.clone();
            tokio::spawn(async move {
                end.sessions_end.cancelled().await;
                if let Some(io) = end.ws_io.get() {
                    io.shutdown();
                }
            });
        }
        // A host with a store serves only as a fleet member holding a lease.
        self.join_fleet(listener.local_addr()?).await?;
        let base = match shared.fleet() {
            Some(f) => f.url.clone(),
            None => crate::fleet::config::advertise_url(cfg, listener.local_addr()?),
        };
        let _ = shared.base_url.set(base);
        // WebTransport on UDP: where configured, or in dev mode on the HTTP port's number.
        let wt_addr = cfg
            .webtransport
            .or_else(|| cfg.dev.then(|| listener.local_addr().ok()).flatten());
        if let Some(addr) = wt_addr {
            crate::net::webtransport::start(&shared, addr, limiter.clone(), &conns)
                .await
                .map_err(|e| HostError::Io(std::io::Error::other(e.to_string())))?;
        }
        self.follow_module_deploys().await;
        self.start_bus().await?;
        self.start_transfers().await?;
        // Halted lasting worlds start again here once their store answers.
        if shared.sim.persist.is_some() {
            tokio::spawn(crate::halt::run(Arc::clone(&shared)));
        }
        tracing::info!(addr = %listener.local_addr()?, "zonekeep host listening");
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => break,
                // `POST /admin/drain`: the same graceful shutdown, asked for over the admin API.
                () = shared.drain_requested.cancelled() => {
                    tracing::info!("drain requested over the admin API");
                    break;
                }
                x = crate::net::accept(&listener) => x,
            };
            let (guard, over_ip_cap) = match limiter.admit(peer.ip()) {
                Admission::Normal(g) => (g, false),
                Admission::OverIpCap(g) => {
                    shared.metrics.connection_refused("per_ip");
                    (g, true)
                }
                Admission::Refuse(reason) => {
                    shared.metrics.connection_refused(reason);
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            if cfg.socket_send_buffer > 0 {
                let _ =
                    socket2::SockRef::from(&stream).set_send_buffer_size(cfg.socket_send_buffer);
            }
            let info = ConnInfo {
                over_ip_cap,
                guard: Arc::new(guard),
            };
            let app = app.clone();
            // Whether a request head ever arrived: a header timeout before the first one is a
            // silent socket (counted), after it an idle kept-alive connection closing (not).
            let served = Arc::new(AtomicBool::new(false));
            let seen = served.clone();
            let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                seen.store(true, Ordering::Relaxed);
                req.extensions_mut().insert(info.clone());
                app.clone().oneshot(req)
            });
            let conn = builder
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades();
            let stop = shared.shutdown.clone();
            let metrics = shared.metrics.clone();
            conns.spawn(async move {
                tokio::pin!(conn);
                let r = tokio::select! {
                    r = conn.as_mut() => r,
                    _ = stop.cancelled() => {
                        // Finish the request in flight, then close; an idle socket closes now.
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    }
                };
                if let Err(e) = r {
                    if e.is_timeout() && !served.load(Ordering::Relaxed) {
                        metrics.connection_refused("header_timeout");
                    } else if e.is_parse_version_h2() {
                        metrics.connection_refused("http2");
                    }
                    tracing::debug!(%peer, error = %e, "http connection ended with an error");
                }
            });
        }
        drop(listener);
        conns.close();
        // Leaving the fleet is the drain's last phase, within the same bound.
        let report = crate::drain::shutdown_host(&shared, &conns).await;
        shared.fleet_stop.cancel();
        if report.is_complete() {
            Ok(())
        } else {
            Err(HostError::StateLost {
                unsaved: report.unsaved,
                unfrozen_threads: report.unfrozen_threads,
            })
        }
    }
}
