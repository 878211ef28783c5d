//! Observability: what the system tells about itself. Nothing here runs an
//! actor; the runtime publishes into it.

/// Undeliverable messages: counted, published, logged with a rate limit.
pub(crate) mod dead_letters;
/// Publish/subscribe by event type, for system and user events.
pub(crate) mod event_stream;
/// The system's own events: lifecycle, supervision, unhandled messages.
pub(crate) mod events;
/// The `metrics` feature: the system's counters through the facade.
#[cfg(feature = "metrics")]
pub(crate) mod metrics;
