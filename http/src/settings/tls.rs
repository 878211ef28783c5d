//! The certificate a binding serves HTTPS with (feature `tls`): [`Tls`],
//! a rustls server configuration with its ALPN list, and [`TlsError`].
//! A part of the settings
//! ([`ServerSettings::tls`](crate::ServerSettings::tls)); the handshake is
//! `protocol/tls.rs`'s.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A binding's TLS: a rustls server configuration, its ALPN list set to
/// what the server speaks. Given to
/// [`ServerSettings::tls`](crate::ServerSettings::tls); every
/// connection of the binding is then a TLS connection (Akka HTTP's
/// `enableHttps(ConnectionContext.httpsServer(...))`).
///
/// ```no_run
/// use http::{Request, Response};
/// use proscenium::ActorSystem;
/// use proscenium_http::{Body, Http, ServerSettings, Tls};
///
/// let system = ActorSystem::builder().build()?;
/// let tls = Tls::from_pem_files("server.crt", "server.key")?;
/// let settings = ServerSettings::default().tls(tls);
/// let binding = Http::bind_with(&system, "0.0.0.0:8443".parse()?, settings, |_: Request<Body>| async {
///     Response::new(Body::from("hello over TLS"))
/// })?;
/// binding.add_to_coordinated_shutdown(system.coordinated_shutdown(), std::time::Duration::from_secs(10))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Tls {
    config: Arc<rustls::ServerConfig>,
}

/// Why a [`Tls`] could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate chain has no certificate, or its PEM is malformed.
    #[error("no certificate in the certificate chain: {0}")]
    Certificate(String),
    /// No private key (PKCS #8, PKCS #1 or SEC1), or its PEM is malformed.
    #[error("no private key: {0}")]
    PrivateKey(String),
    /// rustls refused the certificate and key (a key that does not match
    /// the certificate, an unsupported key type, ...).
    #[error("the certificate and key were refused: {0}")]
    Refused(#[from] rustls::Error),
}

/// The protocols a connection may choose with ALPN, the first preferred.
fn alpn() -> Vec<Vec<u8>> {
    let mut protocols = Vec::new();
    if cfg!(feature = "http2") {
        protocols.push(b"h2".to_vec());
    }
    protocols.push(b"http/1.1".to_vec());
    protocols
}

impl Tls {
    /// From a certificate chain (the server's certificate first) and its
    /// private key, in PEM files.
    pub fn from_pem_files(
        certificate_chain: impl AsRef<Path>,
        private_key: impl AsRef<Path>,
    ) -> Result<Tls, TlsError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read {
                path: path.to_path_buf(),
                source,
            })
        };
        let chain = read(certificate_chain.as_ref())?;
        let key = read(private_key.as_ref())?;
        Tls::from_pem(&chain, &key)
    }

    /// From a certificate chain (the server's certificate first) and its
    /// private key, in PEM.
    pub fn from_pem(certificate_chain: &[u8], private_key: &[u8]) -> Result<Tls, TlsError> {
        let chain = CertificateDer::pem_slice_iter(certificate_chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Certificate(e.to_string()))?;
        if chain.is_empty() {
            return Err(TlsError::Certificate("the PEM has none".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(private_key)
            .map_err(|e| TlsError::PrivateKey(e.to_string()))?;
        Tls::from_der(chain, key)
    }

    /// From a DER certificate chain (the server's certificate first) and
    /// its private key, with rustls's safe defaults (TLS 1.2 and 1.3, no
    /// client authentication) on its ring provider.
    pub fn from_der(
        certificate_chain: Vec<CertificateDer<'static>>,
        private_key: PrivateKeyDer<'static>,
    ) -> Result<Tls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certificate_chain, private_key)?;
        Ok(Tls::from_config(config))
    }

    /// From a rustls configuration the application made (client
    /// certificates, a certificate resolver, session resumption, ...). An
    /// empty ALPN list is set to what the server speaks (`h2`, with the
    /// `http2` feature, then `http/1.1`); a list the application set is
    /// kept, and a connection that chooses no protocol is HTTP/1.1.
    pub fn from_config(mut config: rustls::ServerConfig) -> Tls {
        if config.alpn_protocols.is_empty() {
            config.alpn_protocols = alpn();
        }
        Tls {
            config: Arc::new(config),
        }
    }

    /// The rustls configuration connections are accepted with.
    pub fn config(&self) -> &Arc<rustls::ServerConfig> {
        &self.config
    }
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // No key material: only what the server offers.
        let alpn: Vec<_> = self
            .config
            .alpn_protocols
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        f.debug_struct("Tls")
            .field("alpn", &alpn)
            .finish_non_exhaustive()
    }
}
