//! [`ClusterSettings`]: the timing of node leases and the limits of the
//! regions, one set per node (every node of a cluster should use the
//! same).

use std::time::Duration;

use crate::error::ClusterError;

/// How a node takes part in sharding. Defaults after Akka's, where Akka
/// has the setting (`number-of-shards`, `buffer-size`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClusterSettings {
    /// Shards per entity type (default 1,000, Akka's: about ten times the
    /// most nodes planned). Stored in the bucket by the first node that
    /// starts a region of the type; a node configured with another number
    /// refuses to start the region ([`ClusterError::ShardCountMismatch`]).
    pub shards: u32,
    /// How long a node's lease lives without a renewal (default 6 s). A
    /// node that cannot renew stops its entities before this has passed
    /// since its last renewal was sent; other nodes take its shards once
    /// they have seen the lease unchanged this long, on their own clocks.
    /// The gap after a crash is about this long.
    pub lease_timeout: Duration,
    /// How often a node renews its lease (default 1 s; well below
    /// `lease_timeout`, so that a lost renewal or two fence nobody).
    pub lease_renew_interval: Duration,
    /// How much earlier than `lease_timeout` after its last renewal was
    /// sent a node fences itself (default 1 s): room for the clocks of two
    /// nodes running at slightly different rates, and for its entities'
    /// stop.
    pub fence_margin: Duration,
    /// Messages a region holds for shards not yet located (being allocated,
    /// or moving), all shards together (default 100,000, Akka's
    /// `buffer-size`). Past it a message is a dead letter.
    pub buffer_size: usize,
    /// An entity sent no message for this long is passivated (stopped; its
    /// next message starts it again): default 2 minutes (Akka's). `None`:
    /// never by idleness.
    pub passivate_idle: Option<Duration>,
    /// The most entities a region runs at once: starting one more
    /// passivates the least recently used. Default: no limit.
    pub max_active_entities: Option<usize>,
    /// Remember-entities: each entity's id is kept in the bucket while it
    /// runs (written before it starts: its first messages wait for the
    /// write), and when its shard moves (a node's crash or leave), its new
    /// owner starts it again without waiting for a message. Automatic
    /// passivation is then off (as Akka's); an entity that stops itself is
    /// forgotten. Default: off.
    pub remember_entities: bool,
    /// How often each type's coordinator considers a rebalance (default
    /// 10 s, Akka's `rebalance-interval`).
    pub rebalance_interval: Duration,
    /// How long the membership must have stayed the same before a
    /// rebalance (default 3 s): no storm while nodes come and go.
    pub rebalance_stable_for: Duration,
    /// The fewest live nodes for a rebalance (default 1; Akka's
    /// `min-nr-of-members`).
    pub min_nodes: usize,
    /// Replicas of the bucket when this node is the one that creates it
    /// (default 1; 3 in production, on a NATS cluster of three servers or
    /// more: JetStream's RAFT majority is then what decides ownership).
    pub bucket_replicas: usize,
    /// How long a hand-off (a rebalance, or a graceful leave) lets a
    /// shard's entities handle what they were sent before their stop
    /// message (default 8 s, within the 10 s of the
    /// `cluster-sharding-shutdown-region` phase): past it they are stopped
    /// at once (what is left in their mailboxes is then a dead letter).
    pub handoff_timeout: Duration,
    /// A [`ReliableEntityRef`](crate::ReliableEntityRef)'s messages not
    /// confirmed this long after the last progress are sent again (default
    /// 1 s): across a lost message, a move, or a crash of the owner.
    pub reliable_resend_after: Duration,
}

impl Default for ClusterSettings {
    fn default() -> ClusterSettings {
        ClusterSettings {
            shards: 1000,
            lease_timeout: Duration::from_secs(6),
            lease_renew_interval: Duration::from_secs(1),
            fence_margin: Duration::from_secs(1),
            buffer_size: 100_000,
            passivate_idle: Some(Duration::from_secs(120)),
            max_active_entities: None,
            remember_entities: false,
            rebalance_interval: Duration::from_secs(10),
            rebalance_stable_for: Duration::from_secs(3),
            min_nodes: 1,
            bucket_replicas: 1,
            handoff_timeout: Duration::from_secs(8),
            reliable_resend_after: Duration::from_secs(1),
        }
    }
}

impl ClusterSettings {
    /// Sets the number of shards per entity type.
    pub fn shards(mut self, shards: u32) -> ClusterSettings {
        self.shards = shards;
        self
    }

    /// Sets the lease's timeout, renewal interval and fencing margin.
    pub fn lease(
        mut self,
        timeout: Duration,
        renew: Duration,
        margin: Duration,
    ) -> ClusterSettings {
        self.lease_timeout = timeout;
        self.lease_renew_interval = renew;
        self.fence_margin = margin;
        self
    }

    /// Sets passivation: after `idle` without a message (`None`: never),
    /// and past `max_active` entities per region (`None`: no limit).
    pub fn passivation(
        mut self,
        idle: Option<Duration>,
        max_active: Option<usize>,
    ) -> ClusterSettings {
        self.passivate_idle = idle;
        self.max_active_entities = max_active;
        self
    }

    /// Turns remember-entities on or off (see
    /// [`remember_entities`](Self::remember_entities)).
    pub fn remember_entities(mut self, on: bool) -> ClusterSettings {
        self.remember_entities = on;
        self
    }

    /// Sets the rebalance's interval, the membership's stable time before
    /// one, and the fewest nodes for one.
    pub fn rebalance(
        mut self,
        interval: Duration,
        stable_for: Duration,
        min_nodes: usize,
    ) -> ClusterSettings {
        self.rebalance_interval = interval;
        self.rebalance_stable_for = stable_for;
        self.min_nodes = min_nodes;
        self
    }

    /// Sets the replicas of the bucket, when this node creates it (R3 in
    /// production: a NATS cluster of three servers or more; default 1).
    pub fn bucket_replicas(mut self, replicas: usize) -> ClusterSettings {
        self.bucket_replicas = replicas;
        self
    }

    /// Sets the hand-off's timeout (see
    /// [`handoff_timeout`](Self::handoff_timeout)).
    pub fn handoff_timeout(mut self, timeout: Duration) -> ClusterSettings {
        self.handoff_timeout = timeout;
        self
    }

    /// Sets when unconfirmed reliable messages are sent again (see
    /// [`reliable_resend_after`](Self::reliable_resend_after)).
    pub fn reliable_resend_after(mut self, after: Duration) -> ClusterSettings {
        self.reliable_resend_after = after;
        self
    }

    /// Checks the settings: at least one shard, a renewal interval and a
    /// margin that leave a renewal time to land before the fence.
    pub fn validate(&self) -> Result<(), ClusterError> {
        let bad = |key: &str, expected: &str| {
            Err(ClusterError::Settings(format!(
                "cluster.{key}: expected {expected}"
            )))
        };
        if self.shards == 0 {
            return bad("shards", "a positive number of shards");
        }
        if self.lease_renew_interval.is_zero() {
            return bad("lease-renew-interval", "a positive duration");
        }
        if self.fence_margin >= self.lease_timeout {
            return bad("fence-margin", "a duration shorter than lease-timeout");
        }
        if self.lease_renew_interval * 2 > self.lease_timeout - self.fence_margin {
            return bad(
                "lease-renew-interval",
                "at most half of lease-timeout less fence-margin (a lost renewal must not fence)",
            );
        }
        if self.passivate_idle.is_some_and(|d| d.is_zero()) {
            return bad("passivate-idle", "a positive duration");
        }
        if self.max_active_entities == Some(0) {
            return bad("max-active-entities", "a positive number of entities");
        }
        if self.rebalance_interval.is_zero() {
            return bad("rebalance-interval", "a positive duration");
        }
        if self.buffer_size == 0 {
            return bad("buffer-size", "a positive number of messages");
        }
        if self.handoff_timeout.is_zero() {
            return bad("handoff-timeout", "a positive duration");
        }
        if self.reliable_resend_after.is_zero() {
            return bad("reliable-resend-after", "a positive duration");
        }
        if self.bucket_replicas == 0 || self.bucket_replicas > 5 {
            return bad("bucket-replicas", "1 to 5 (JetStream's limit)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_would_fence_a_healthy_node_are_refused() {
        assert!(ClusterSettings::default().validate().is_ok());
        let s = |t, r, m| {
            ClusterSettings::default()
                .lease(
                    Duration::from_millis(t),
                    Duration::from_millis(r),
                    Duration::from_millis(m),
                )
                .validate()
        };
        assert!(s(6000, 1000, 1000).is_ok());
        assert!(s(6000, 3000, 1000).is_err(), "one lost renewal would fence");
        assert!(s(1000, 100, 1000).is_err(), "the margin eats the lease");
        assert!(s(1000, 0, 100).is_err());
        assert!(ClusterSettings::default().shards(0).validate().is_err());
    }
}
