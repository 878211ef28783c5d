//! The trust model's example server (`examples/nats-server.conf`), its
//! keys and certificates, and the settings of its nodes.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Duration;

use proscenium_remote::RemoteSettings;

use super::pki::{user_nkey, Pki};
use super::{NatsServer, ServerOptions};

/// The cluster key of the example's nodes.
pub const KEY: &str = "the shop cluster's key, 32 bytes or more";

/// The example configuration, its keys and certificates.
pub struct Shop {
    pub server: NatsServer,
    pub pki: Pki,
    pub seeds: HashMap<&'static str, String>,
}

pub fn shop() -> Shop {
    let pki = Pki::new();
    let config = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/nats-server.conf"
    ))
    .expect("examples/nats-server.conf");
    let mut options = ServerOptions::config(config);
    let mut seeds = HashMap::new();
    for (user, var) in [
        ("a", "SHOP_NODE_A"),
        ("b", "SHOP_NODE_B"),
        ("intruder", "SHOP_INTRUDER"),
        ("other", "OTHER_APP"),
    ] {
        let (public, seed) = user_nkey();
        options.env.push((var.to_owned(), public));
        seeds.insert(user, seed);
    }
    for (var, path) in [
        ("NATS_TLS_CERT", &pki.server_cert),
        ("NATS_TLS_KEY", &pki.server_key),
        ("NATS_TLS_CA", &pki.ca),
    ] {
        options
            .env
            .push((var.to_owned(), path.display().to_string()));
    }
    Shop {
        server: NatsServer::start_with_options(options),
        pki,
        seeds,
    }
}

impl Shop {
    pub fn settings(&self, node: &'static str) -> RemoteSettings {
        RemoteSettings::new(self.server.url(), "shop", node)
            .nkey_seed(self.seeds[node].as_str())
            .tls_ca_file(&self.pki.ca)
            .tls_client_cert(&self.pki.client_cert, &self.pki.client_key)
            .tls_required(true)
            .cluster_key(KEY)
            .failure_detector(Duration::from_millis(100), Duration::from_secs(60))
    }

    /// A plain client with `user`'s credentials; the server's errors (a
    /// permissions violation) come out of the receiver.
    pub fn raw(
        &self,
        user: &str,
    ) -> (
        tokio::runtime::Runtime,
        async_nats::Client,
        mpsc::Receiver<String>,
    ) {
        let rt = tokio::runtime::Runtime::new().expect("rt");
        let (tx, errors) = mpsc::channel();
        let client = rt
            .block_on(
                async_nats::ConnectOptions::with_nkey(self.seeds[user].clone())
                    .add_root_certificates(self.pki.ca.clone())
                    .add_client_certificate(
                        self.pki.client_cert.clone(),
                        self.pki.client_key.clone(),
                    )
                    .require_tls(true)
                    .event_callback(move |e| {
                        if let async_nats::Event::ServerError(e) = e {
                            let _ = tx.send(e.to_string());
                        }
                        async {}
                    })
                    .connect(self.server.url()),
            )
            .expect("raw client");
        (rt, client, errors)
    }
}

impl Shop {
    /// A `[remote]` TOML file for `node` in this server's directory, its
    /// secrets in files of their own (`nkey-seed-file`, `cluster-key-file`).
    pub fn node_toml(&self, node: &'static str) -> std::path::PathBuf {
        let dir = self.server.dir();
        let seed = dir.write(&format!("{node}.nk"), &self.seeds[node]);
        let key = dir.write("cluster.key", KEY);
        let toml = format!(
            "[remote]\nservers = \"{}\"\ncluster = \"shop\"\nnode = \"{node}\"\n\
             nkey-seed-file = \"{}\"\ntls-ca-file = \"{}\"\ntls-cert-file = \"{}\"\n\
             tls-key-file = \"{}\"\ntls-required = true\ncluster-key-file = \"{}\"\n",
            self.server.url(),
            seed.display(),
            self.pki.ca.display(),
            self.pki.client_cert.display(),
            self.pki.client_key.display(),
            key.display()
        );
        dir.write(&format!("{node}.toml"), toml)
    }
}
