//! Issue 33, item 5: a password given in the server URL (supported and
//! documented) was written to the log at DEBUG on every connection
//! attempt: async-nats logs the address it connects to, and the address
//! still carried the userinfo. No secret reaches a log at any level. (Its
//! own test binary: it installs the process's tracing subscriber, at
//! TRACE, for every crate.)

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use proscenium_remote::{Remote, RemoteSettings};
use support::{require_nats, system, Cmd, Counter, NatsServer, ServerOptions, GUARD};

/// Everything logged, kept.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_password_in_the_server_url_reaches_no_log() {
    require_nats!();
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .init();
    let (user, password) = ("node", "s3cret-in-the-url");
    let server =
        NatsServer::start_with_options(ServerOptions::args(&["--user", user, "--pass", password]));
    let url = format!("nats://{user}:{password}@127.0.0.1:{}", server.port);
    let sys = system("l");
    let remote = Remote::connect(&sys, RemoteSettings::new(url, "l", "a")).expect("connect");
    let counter = sys.spawn(Counter::props("a"), "counter").expect("spawn");
    remote.expose(&counter, "counter").expect("expose");
    let far = remote.actor_ref::<Cmd>("counter").expect("ref");
    assert_eq!(far.ask(Cmd::Get, GUARD).wait(), Ok(0));
    drop(remote);
    assert!(sys.terminate().wait_timeout(GUARD).is_some());
    let log = String::from_utf8_lossy(&captured.0.lock().expect("log")).into_owned();
    // The client's connection attempt was logged (the test sees the log).
    assert!(
        log.contains("127.0.0.1"),
        "nothing logged of the connection:\n{log}"
    );
    assert!(
        !log.contains(password),
        "the password is in the log:\n{}",
        log.lines()
            .filter(|l| l.contains(password))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
