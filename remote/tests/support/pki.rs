//! Keys, certificates and JWTs the security tests need, made by the tests
//! themselves (CI needs no openssl, cfssl or nsc): a CA with a server and
//! a client certificate (rcgen), nkeys, and an operator-mode server's
//! operator, account and user JWTs (NATS's decentralized auth) with the
//! user's `.creds` file.

use std::path::PathBuf;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::TempDir;

/// A test CA and the certificates it signed, as PEM files in `dir`.
pub struct Pki {
    pub dir: TempDir,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl Pki {
    /// A CA, a server certificate for 127.0.0.1 and localhost, and a
    /// client certificate, all fresh.
    pub fn new() -> Pki {
        let dir = TempDir::new("pki");
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "proscenium test CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca, ca_key);

        let leaf = |sans: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().expect("key");
            let mut params = CertificateParams::new(sans).expect("params");
            params.distinguished_name.push(DnType::CommonName, cn);
            params.extended_key_usages = vec![usage];
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            let cert = params.signed_by(&key, &issuer).expect("certificate");
            (cert.pem(), key.serialize_pem())
        };
        let (server_pem, server_key_pem) = leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            "nats-server",
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_pem, client_key_pem) = leaf(
            Vec::new(),
            "proscenium-node",
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        Pki {
            ca: dir.write("ca.pem", ca_cert.pem()),
            server_cert: dir.write("server.pem", server_pem),
            server_key: dir.write("server-key.pem", server_key_pem),
            client_cert: dir.write("client.pem", client_pem),
            client_key: dir.write("client-key.pem", client_key_pem),
            dir,
        }
    }

    /// A nats-server `tls { }` block with these files; `verify`: the
    /// server requires and verifies a client certificate (mutual TLS).
    pub fn server_tls_block(&self, verify: bool) -> String {
        format!(
            "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  ca_file: \"{}\"\n  verify: {verify}\n  timeout: 5\n}}\n",
            self.server_cert.display(),
            self.server_key.display(),
            self.ca.display(),
        )
    }
}

/// A fresh user nkey: (public key `U...`, seed `SU...`).
pub fn user_nkey() -> (String, String) {
    let kp = nkeys::KeyPair::new_user();
    (kp.public_key(), kp.seed().expect("a seed"))
}

/// An operator-mode nats-server's configuration (a memory resolver with
/// one account) and a `.creds` file of one user of that account, in `dir`.
pub struct Operator {
    pub config: String,
    pub creds: PathBuf,
}

impl Operator {
    pub fn new(dir: &TempDir) -> Operator {
        let operator = nkeys::KeyPair::new_operator();
        let account = nkeys::KeyPair::new_account();
        let user = nkeys::KeyPair::new_user();
        let unlimited = serde_json::json!({
            "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
            "wildcards": true, "conn": -1, "leaf": -1
        });
        let op_jwt = jwt(
            &operator,
            &operator.public_key(),
            "test-operator",
            serde_json::json!({ "type": "operator", "version": 2 }),
        );
        let acc_jwt = jwt(
            &operator,
            &account.public_key(),
            "test-account",
            serde_json::json!({
                "limits": unlimited,
                "default_permissions": { "pub": {}, "sub": {} },
                "type": "account", "version": 2
            }),
        );
        let user_jwt = jwt(
            &account,
            &user.public_key(),
            "test-user",
            serde_json::json!({
                "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                "type": "user", "version": 2
            }),
        );
        let creds = format!(
            "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\
             NKEYs are sensitive and should be treated as secrets.\n\n\
             -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
            user.seed().expect("a seed")
        );
        Operator {
            config: format!(
                "operator: \"{op_jwt}\"\nresolver: MEMORY\nresolver_preload: {{\n  {}: \"{acc_jwt}\"\n}}\n",
                account.public_key()
            ),
            creds: dir.write("user.creds", creds),
        }
    }
}

/// A NATS JWT (v2): `iss` signs a claim about `sub` with `nats` claims.
fn jwt(issuer: &nkeys::KeyPair, sub: &str, name: &str, nats: serde_json::Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(r#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let iat = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let claims = serde_json::json!({
        // Unique per JWT; the server does not check how it was made.
        "jti": format!("{sub}{iat}{name}"),
        "iat": iat,
        "iss": issuer.public_key(),
        "name": name,
        "sub": sub,
        "nats": nats,
    });
    let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{header}.{claims}");
    let sig = issuer.sign(signed.as_bytes()).expect("sign");
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig))
}
