//! Which shard an entity id belongs to: a stable hash of the id modulo a
//! fixed number of shards per entity type (Akka's default 1,000). The hash
//! is FNV-1a (64 bits) over the id's UTF-8 bytes: defined by its two
//! constants, the same on every platform, build and version (std's
//! `Hasher`s promise none of that), and the tests pin it with a golden
//! vector. Changing it, or a type's number of shards, moves every entity:
//! a node configured with another number refuses to start
//! (`ClusterError::ShardCountMismatch`).

/// FNV-1a's 64-bit offset basis.
const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a's 64-bit prime.
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// The FNV-1a hash of `bytes`.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// The shard of entity `id` among `shards` (at least 1).
pub fn shard_of(id: &str, shards: u32) -> u32 {
    // The remainder is below `shards`, so it fits a u32.
    (fnv1a64(id.as_bytes()) % u64::from(shards.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a's published test vectors (the empty string, "a", "foobar"),
    /// then the golden vector of ids to shards among 1,000: an entity's
    /// shard never changes between versions.
    #[test]
    fn the_hash_and_the_shards_are_pinned() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        // Computed once by an independent implementation (Python,
        // `h = (h ^ b) * 0x100000001b3 mod 2^64` from 0xcbf29ce484222325).
        let golden = [
            ("", 37),
            ("0", 79),
            ("1", 868),
            ("user-1", 708),
            ("user-2", 341),
            ("order/2026/11/28/0001", 386),
            ("\u{1f980}", 910),
            ("cart:9f1c2a", 497),
        ];
        let got: Vec<(&str, u32)> = golden
            .iter()
            .map(|(id, _)| (*id, shard_of(id, 1000)))
            .collect();
        assert_eq!(got, golden);
        // One shard: everything in shard 0; zero is taken as one.
        assert_eq!(shard_of("x", 1), 0);
        assert_eq!(shard_of("x", 0), 0);
    }
}
