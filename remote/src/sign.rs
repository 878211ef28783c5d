//! Signatures with the cluster key, and unguessable ids.
//!
//! With a cluster key ([`RemoteSettings::cluster_key`](crate::RemoteSettings::cluster_key))
//! every message a node publishes (control notices, where-answers,
//! replies, messages to actors) starts with a tag: the first
//! [`TAG_LEN`] bytes of HMAC-SHA256 under that key over the subject, the
//! reply subject, the error header and the body; the receiver recomputes
//! it and drops what does not verify (counted: `Remote::rejected_messages`).
//! A client without the key cannot make a node act on anything it
//! publishes. See docs/decisions/0023-remote-security.md.

use bytes::{Bytes, BytesMut};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use crate::auth::Secret;

/// The length of a tag: HMAC-SHA256 truncated to 128 bits (NIST SP
/// 800-107 allows truncation to 64 bits and more; 128 leaves a forger one
/// chance in 2^128 per try, and each try costs a publish).
pub(crate) const TAG_LEN: usize = 16;

/// The least key length, in bytes: as long as the hash (RFC 2104: less
/// weakens the MAC; more adds nothing).
pub(crate) const MIN_KEY_LEN: usize = 32;

/// Separates this MAC's inputs from any other use of the key.
const DOMAIN: &[u8] = b"proscenium-remote/1\0";

/// The cluster key, ready to sign: HMAC's inner and outer states are
/// computed once.
pub(crate) struct ClusterKey(hmac::Key);

impl ClusterKey {
    pub(crate) fn new(secret: &Secret) -> ClusterKey {
        ClusterKey(hmac::Key::new(
            hmac::HMAC_SHA256,
            secret.reveal().as_bytes(),
        ))
    }

    /// The tag of a message: what it is published on, with which reply
    /// subject and error header, and its body. Each part is length-framed,
    /// so no two different messages feed the MAC the same bytes.
    pub(crate) fn tag(
        &self,
        subject: &str,
        reply: Option<&str>,
        error: Option<&str>,
        body: &[u8],
    ) -> [u8; TAG_LEN] {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(DOMAIN);
        frame(&mut ctx, subject.as_bytes());
        frame(&mut ctx, reply.unwrap_or("").as_bytes());
        match error {
            Some(e) => {
                ctx.update(&[1]);
                frame(&mut ctx, e.as_bytes());
            }
            None => ctx.update(&[0]),
        }
        ctx.update(body);
        let full = ctx.sign();
        let mut tag = [0; TAG_LEN];
        tag.copy_from_slice(&full.as_ref()[..TAG_LEN]);
        tag
    }

    /// Whether `payload` is a tag followed by a body, and the tag is that
    /// of this message (compared in constant time).
    pub(crate) fn verify(
        &self,
        subject: &str,
        reply: Option<&str>,
        error: Option<&str>,
        payload: &[u8],
    ) -> bool {
        let Some((tag, body)) = payload.split_first_chunk::<TAG_LEN>() else {
            return false;
        };
        ct_eq(tag, &self.tag(subject, reply, error, body))
    }
}

fn frame(ctx: &mut hmac::Context, bytes: &[u8]) {
    // A subject is far below 4 GiB; a longer one would be refused by the
    // server anyway, and saturating keeps the framing total.
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    ctx.update(&len.to_be_bytes());
    ctx.update(bytes);
}

/// Equal, in time that does not depend on where they differ.
fn ct_eq(a: &[u8; TAG_LEN], b: &[u8; TAG_LEN]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // black_box: the compiler may not turn the fold into an early exit.
    std::hint::black_box(diff) == 0
}

/// `body` as published under `key`: the tag first (over `subject`,
/// `reply`, `error`), or the body alone without a key.
pub(crate) fn seal(
    key: Option<&ClusterKey>,
    subject: &str,
    reply: Option<&str>,
    error: Option<&str>,
    body: &[u8],
) -> Bytes {
    match key {
        None => Bytes::copy_from_slice(body),
        Some(key) => {
            let mut out = BytesMut::with_capacity(TAG_LEN + body.len());
            out.extend_from_slice(&key.tag(subject, reply, error, body));
            out.extend_from_slice(body);
            out.freeze()
        }
    }
}

/// A random `u64` from the operating system's CSPRNG: reply ids, which an
/// attacker must not guess.
pub(crate) fn random_u64() -> u64 {
    let mut bytes = [0; 8];
    fill(&mut bytes);
    u64::from_le_bytes(bytes)
}

/// 128 random bits in hex: a node's inbox token and incarnation.
pub(crate) fn random_hex128() -> String {
    let mut bytes = [0; 16];
    fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn fill(bytes: &mut [u8]) {
    SystemRandom::new()
        .fill(bytes)
        .expect("the operating system's random number generator failed");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> ClusterKey {
        ClusterKey::new(&Secret::new(s))
    }

    #[test]
    fn a_tag_binds_subject_reply_error_and_body() {
        let k = key("0123456789abcdef0123456789abcdef");
        let sealed = seal(Some(&k), "c.actor.x", Some("r"), None, b"body");
        assert!(k.verify("c.actor.x", Some("r"), None, &sealed));
        // Any part changed: refused.
        assert!(!k.verify("c.actor.y", Some("r"), None, &sealed));
        assert!(!k.verify("c.actor.x", None, None, &sealed));
        assert!(!k.verify("c.actor.x", Some("r"), Some("e"), &sealed));
        let mut flipped = sealed.to_vec();
        *flipped.last_mut().expect("a body") ^= 1;
        assert!(!k.verify("c.actor.x", Some("r"), None, &flipped));
        // Framing: moving bytes between subject and reply changes the tag.
        assert_ne!(
            k.tag("ab", Some("c"), None, b""),
            k.tag("a", Some("bc"), None, b"")
        );
        // Another key, or too short a payload: refused.
        assert!(!key("another key, 32 bytes long......").verify(
            "c.actor.x",
            Some("r"),
            None,
            &sealed
        ));
        assert!(!k.verify("c.actor.x", None, None, &sealed[..TAG_LEN - 1]));
        // Without a key the body goes as it is.
        assert_eq!(&seal(None, "s", None, None, b"body")[..], b"body");
    }

    #[test]
    fn ids_differ() {
        assert_ne!(random_u64(), random_u64());
        let a = random_hex128();
        assert_eq!(a.len(), 32);
        assert_ne!(a, random_hex128());
    }
}
