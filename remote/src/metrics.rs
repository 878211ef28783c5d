//! The `metrics` feature: the node's counters through the `metrics`
//! facade, each labelled `node` (docs/metrics.md). [`Remote::connect`]
//! adds the node to its system's `publish_metrics`.
//!
//! Sampled: a publication reads the node's drop counters (kept with or
//! without the feature), the NATS client's own statistics (messages and
//! bytes in and out, connects) and the two counters this feature adds:
//! messages sent to remote actors and delivered to exposed ones (one
//! relaxed add each, only with the feature).
//!
//! [`Remote::connect`]: crate::Remote::connect

use std::sync::atomic::{AtomicU64, Ordering};

use ::metrics::{describe_counter, Label, Unit};

use crate::shared::Shared;

/// The two per-message counters of the feature. Written by any sending
/// thread (`sent`) and by the exposed names' tasks (`received`).
#[derive(Debug, Default)]
pub(crate) struct MessageCounters {
    sent: AtomicU64,
    received: AtomicU64,
}

impl MessageCounters {
    /// A message for a remote actor was queued for the server (a tell, an
    /// ask's request, a forwarded message, a reliable message the
    /// producer's buffer took; replies and control notices are not
    /// counted).
    pub(crate) fn sent(&self) {
        // Relaxed: a statistic, read on its own by a publication; nothing
        // is published through it (it pairs with nothing).
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// A message for an exposed name verified, decoded and was told to
    /// its actor.
    pub(crate) fn received(&self) {
        // Relaxed: as `sent`.
        self.received.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a publication reads, in one place (so the publishing itself is
/// tested without a server).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) sent: u64,
    pub(crate) received: u64,
    pub(crate) dropped_slow_consumer: u64,
    pub(crate) dropped_replies: u64,
    pub(crate) rejected: u64,
    /// Connections established, the first included.
    pub(crate) connects: u64,
    pub(crate) nats_messages_in: u64,
    pub(crate) nats_messages_out: u64,
    pub(crate) nats_bytes_in: u64,
    pub(crate) nats_bytes_out: u64,
}

impl Counts {
    /// The node's counters now.
    pub(crate) fn of(shared: &Shared) -> Counts {
        let stats = shared.client.statistics();
        // Relaxed: statistics, each read on its own (this module's and the
        // NATS client's, which it updates with Relaxed adds).
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Counts {
            sent: load(&shared.messages.sent),
            received: load(&shared.messages.received),
            dropped_slow_consumer: load(&shared.slow_consumer_drops),
            dropped_replies: shared.lanes.dropped_replies(),
            rejected: load(&shared.rejected),
            // The client's counters are portable-atomic's (the same
            // relaxed loads).
            connects: stats.connects.load(Ordering::Relaxed),
            nats_messages_in: stats.in_messages.load(Ordering::Relaxed),
            nats_messages_out: stats.out_messages.load(Ordering::Relaxed),
            nats_bytes_in: stats.in_bytes.load(Ordering::Relaxed),
            nats_bytes_out: stats.out_bytes.load(Ordering::Relaxed),
        }
    }

    /// Sets them in the current recorder, labelled `node`.
    pub(crate) fn publish(&self, node: &str) {
        let labels = || vec![Label::new("node", node.to_owned())];
        let counters = [
            (
                "proscenium_remote_messages_sent_total",
                "Messages for remote actors queued for the server.",
                self.sent,
            ),
            (
                "proscenium_remote_messages_received_total",
                "Messages for exposed names delivered to their actors.",
                self.received,
            ),
            (
                "proscenium_remote_reconnects_total",
                "Connections to the NATS server re-established after a loss.",
                self.connects.saturating_sub(1),
            ),
            (
                "proscenium_remote_nats_messages_in_total",
                "NATS messages received (all of the node's traffic).",
                self.nats_messages_in,
            ),
            (
                "proscenium_remote_nats_messages_out_total",
                "NATS messages sent (all of the node's traffic).",
                self.nats_messages_out,
            ),
            (
                "proscenium_remote_nats_bytes_in_total",
                "Payload bytes received over NATS.",
                self.nats_bytes_in,
            ),
            (
                "proscenium_remote_nats_bytes_out_total",
                "Payload bytes sent over NATS.",
                self.nats_bytes_out,
            ),
        ];
        for (name, help, value) in counters {
            let unit = if name.contains("_bytes_") {
                Unit::Bytes
            } else {
                Unit::Count
            };
            describe_counter!(name, unit, help);
            ::metrics::counter!(name, labels()).absolute(value);
        }
        let dropped = "proscenium_remote_dropped_total";
        describe_counter!(
            dropped,
            Unit::Count,
            "Messages dropped, by reason: slow_consumer (an exposed name's buffer was full), \
             reply_outbound_full (a reply past outbound-capacity), rejected (did not verify, \
             or a replay)."
        );
        for (reason, value) in [
            ("slow_consumer", self.dropped_slow_consumer),
            ("reply_outbound_full", self.dropped_replies),
            ("rejected", self.rejected),
        ] {
            let mut labels = labels();
            labels.push(Label::new("reason", reason));
            ::metrics::counter!(dropped, labels).absolute(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Counts;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    /// A published counter: name, labels, value.
    type Published = (String, Vec<(String, String)>, u64);

    #[test]
    fn publish_sets_every_counter_with_its_labels() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let counts = Counts {
            sent: 7,
            received: 5,
            dropped_slow_consumer: 3,
            dropped_replies: 2,
            rejected: 1,
            connects: 4,
            nats_messages_in: 40,
            nats_messages_out: 50,
            nats_bytes_in: 400,
            nats_bytes_out: 500,
        };
        ::metrics::with_local_recorder(&recorder, || counts.publish("n1"));
        let mut values: Vec<Published> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, description, value)| {
                assert!(description.is_some(), "{key:?} is described");
                let DebugValue::Counter(n) = value else {
                    panic!("{key:?}: not a counter");
                };
                let key = key.key();
                let labels = key
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                (key.name().to_owned(), labels, n)
            })
            .collect();
        values.sort();
        let node = |extra: Option<&str>| {
            let mut labels = vec![("node".to_owned(), "n1".to_owned())];
            if let Some(reason) = extra {
                labels.push(("reason".to_owned(), reason.to_owned()));
            }
            labels
        };
        let mut expected = vec![
            ("proscenium_remote_messages_sent_total", node(None), 7),
            ("proscenium_remote_messages_received_total", node(None), 5),
            // Four connects: the first and three reconnects.
            ("proscenium_remote_reconnects_total", node(None), 3),
            ("proscenium_remote_nats_messages_in_total", node(None), 40),
            ("proscenium_remote_nats_messages_out_total", node(None), 50),
            ("proscenium_remote_nats_bytes_in_total", node(None), 400),
            ("proscenium_remote_nats_bytes_out_total", node(None), 500),
            (
                "proscenium_remote_dropped_total",
                node(Some("slow_consumer")),
                3,
            ),
            (
                "proscenium_remote_dropped_total",
                node(Some("reply_outbound_full")),
                2,
            ),
            ("proscenium_remote_dropped_total", node(Some("rejected")), 1),
        ]
        .into_iter()
        .map(|(name, labels, n)| (name.to_owned(), labels, n))
        .collect::<Vec<_>>();
        expected.sort();
        assert_eq!(values, expected);
    }

    #[test]
    fn no_connect_yet_is_no_reconnect() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        ::metrics::with_local_recorder(&recorder, || Counts::default().publish("n0"));
        let reconnects = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find(|(key, ..)| key.key().name() == "proscenium_remote_reconnects_total")
            .map(|(.., value)| value);
        assert_eq!(reconnects, Some(DebugValue::Counter(0)));
    }
}
