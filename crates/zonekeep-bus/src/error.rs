//! Why the bus could not take or deliver something.

use thiserror::Error;

/// What the sender sees when a message could not be delivered: returned at once by the
/// non-blocking calls, or reported later to the sending zone as an [`Undeliverable`] notice.
///
/// [`Undeliverable`]: crate::Undeliverable
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum BusError {
    /// The host's outgoing queue is full: the bus is slower than its senders.
    #[error("the host's outgoing bus queue is full")]
    QueueFull,
    /// The receiving zone's inbox on this host is full (in-process bus).
    #[error("zone {0}'s inbox is full")]
    ReceiverFull(String),
    /// NATS is not connected; the message was not published.
    #[error("bus unavailable: {0}")]
    Unavailable(String),
    /// NATS did not acknowledge the publish within the bound.
    #[error("bus publish not acknowledged in time")]
    Timeout,
    /// The receiving zone is owned by another host and this host has no bus to reach it.
    #[error("no bus configured: start every host with --bus nats://…")]
    NoBus,
    /// No host runs or can start the receiving zone.
    #[error("unknown zone {0}")]
    UnknownZone(String),
    /// A name or body outside the bus's limits.
    #[error("invalid envelope: {0}")]
    Invalid(&'static str),
    /// Setting the bus up failed (connection, stream or bucket).
    #[error("bus set-up failed: {0}")]
    Setup(String),
    /// The bus is shutting down.
    #[error("the bus is shut down")]
    Closed,
}

impl BusError {
    /// A short fixed label for metrics (`zonekeep_bus_undeliverable_total{reason}`): the label
    /// set is these values, never anything a zone or the network chose.
    pub fn label(&self) -> &'static str {
        match self {
            BusError::QueueFull => "queue_full",
            BusError::ReceiverFull(_) => "receiver_full",
            BusError::Unavailable(_) => "unavailable",
            BusError::Timeout => "timeout",
            BusError::NoBus => "no_bus",
            BusError::UnknownZone(_) => "unknown_zone",
            BusError::Invalid(_) => "invalid",
            BusError::Setup(_) => "setup",
            BusError::Closed => "closed",
        }
    }

    /// Every label [`BusError::label`] can return, in a fixed order.
    pub const LABELS: [&'static str; 9] = [
        "queue_full",
        "receiver_full",
        "unavailable",
        "timeout",
        "no_bus",
        "unknown_zone",
        "invalid",
        "setup",
        "closed",
    ];
}
