//! TCP on the reactor (`proscenium_scheduler::net`), through the public API
//! on a 2-worker unpinned scheduler: echo, many connections, half-close,
//! reset, quiesce with pending I/O, and no descriptor left open.
#![cfg(not(loom))] // the API is not built under loom (see src/sync.rs)
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use futures_io::AsyncRead;
use futures_util::io::{AsyncReadExt, AsyncWriteExt};
use proscenium_scheduler::net::{TcpListener, TcpStream};
use proscenium_scheduler::{Handle, Scheduler};
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::sync::{mpsc, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

/// The descriptor-counting test takes this for writing; every other test
/// for reading, so no other test opens sockets while it counts.
static FDS: RwLock<()> = RwLock::new(());

fn shared_fds() -> RwLockReadGuard<'static, ()> {
    FDS.read().unwrap_or_else(|e| e.into_inner())
}

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Echoes until EOF.
async fn echo(mut stream: TcpStream) -> io::Result<u64> {
    let mut buf = [0u8; 4096];
    let mut total = 0;
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        stream.write_all(&buf[..n]).await?;
        total += n as u64;
    }
}

/// Accepts forever, echoing each connection on its own task; ends with the
/// error that stops it (the scheduler's shutdown).
async fn echo_server(handle: Handle, listener: TcpListener) -> io::Error {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => handle.spawn_detached(echo(stream)),
            Err(e) => return e,
        }
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn is_shut_down_error(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Other && e.to_string() == "scheduler shut down"
}

#[test]
fn echo_server_and_client() {
    let _fds = shared_fds();
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let listener = TcpListener::bind(&handle, any_port()).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = handle.spawn(async move {
        let (stream, peer) = listener.accept().await?;
        assert_eq!(peer, stream.peer_addr()?);
        echo(stream).await
    });
    let h = handle.clone();
    let client = handle.spawn(async move {
        let mut stream = TcpStream::connect(&h, addr).await?;
        stream.set_nodelay(true)?;
        assert!(stream.nodelay()?);
        assert_eq!(stream.peer_addr()?, addr);
        let mut got = Vec::new();
        for i in 0..100u32 {
            let msg = format!("message {i}");
            stream.write_all(msg.as_bytes()).await?;
            let mut buf = vec![0u8; msg.len()];
            stream.read_exact(&mut buf).await?;
            got.push(String::from_utf8(buf).unwrap());
        }
        io::Result::Ok(got)
    });
    let got = client.wait().unwrap().unwrap();
    assert_eq!(got.len(), 100);
    assert_eq!(got[99], "message 99");
    // The client's stream was dropped: the server read EOF.
    let echoed = server.wait().unwrap().unwrap();
    assert_eq!(echoed, got.iter().map(|m| m.len() as u64).sum::<u64>());
}

#[test]
fn a_thousand_concurrent_connections_each_echo_a_few_messages() {
    let _fds = shared_fds();
    const CONNECTIONS: usize = 1000;
    const MESSAGES: usize = 5;
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let listener = TcpListener::bind(&handle, any_port()).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = handle.spawn(echo_server(handle.clone(), listener));
    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            let h = handle.clone();
            handle.spawn(async move {
                let mut stream = TcpStream::connect(&h, addr).await?;
                for m in 0..MESSAGES {
                    let msg = vec![(c + m) as u8; 100 + m * 1000];
                    stream.write_all(&msg).await?;
                    let mut buf = vec![0u8; msg.len()];
                    stream.read_exact(&mut buf).await?;
                    assert_eq!(buf, msg, "connection {c} message {m}");
                }
                io::Result::Ok(())
            })
        })
        .collect();
    for (c, client) in clients.into_iter().enumerate() {
        if let Err(e) = client.wait().unwrap() {
            panic!("connection {c}: {e}");
        }
    }
    // A quiesce runs the accept loop once more, to its error (a drop would
    // drop the woken task unrun: its handle would say cancelled).
    let report = s.quiesce(Instant::now() + support::FAILSAFE);
    assert!(report.drained, "{report:?}");
    assert!(is_shut_down_error(&server.wait().unwrap()));
}

#[test]
fn a_half_closed_connection_still_carries_the_reply() {
    let _fds = shared_fds();
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let listener = TcpListener::bind(&handle, any_port()).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = handle.spawn(async move {
        let (mut stream, _) = listener.accept().await?;
        let mut request = Vec::new();
        // Read to EOF: the client shut its write half.
        stream.read_to_end(&mut request).await?;
        stream.write_all(b"got: ").await?;
        stream.write_all(&request).await?;
        stream.shutdown(Shutdown::Write)?;
        io::Result::Ok(request.len())
    });
    let h = handle.clone();
    let client = handle.spawn(async move {
        let mut stream = TcpStream::connect(&h, addr).await?;
        stream.write_all(b"request").await?;
        // AsyncWrite::poll_close shuts down the write half only.
        stream.close().await?;
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await?;
        io::Result::Ok(reply)
    });
    assert_eq!(client.wait().unwrap().unwrap(), b"got: request");
    assert_eq!(server.wait().unwrap().unwrap(), 7);
}

/// A read that returns fewer bytes than it asked for clears the
/// readiness (no `WouldBlock` round trip, `Registration::poll_io_sized`);
/// when the peer's data and its FIN came in one edge, the EOF must still
/// be read after that short read, not waited for (a hang here).
#[test]
fn data_and_eof_in_one_edge_are_both_read() {
    let _fds = shared_fds();
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let listener = TcpListener::bind(&handle, any_port()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (sent_tx, sent_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    handle.spawn_detached(async move {
        let result = async move {
            let (mut stream, _) = listener.accept().await?;
            // The client has written and shut down before the first read:
            // its data and its FIN are both in the socket.
            let _ = sent_rx.recv();
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).await?;
            let eof = stream.read(&mut buf).await?;
            io::Result::Ok((buf[..n].to_vec(), eof))
        }
        .await;
        let _ = done_tx.send(result);
    });
    let mut client = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(&mut client, b"hello").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    // On loopback a write and a shutdown reach the peer's socket before
    // they return (delivery runs in the sender's context), so the data and
    // the FIN are both queued when the server reads. (Were the FIN to come
    // later, it would be an edge of its own and the test would not fail
    // for the bug it is after.)
    sent_tx.send(()).unwrap();
    let (data, eof) = done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the EOF after a short read was never seen")
        .unwrap();
    assert_eq!(data, b"hello");
    assert_eq!(eof, 0);
    drop(client);
}

#[test]
fn a_peer_that_resets_gives_an_error_not_a_panic() {
    let _fds = shared_fds();
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let listener = TcpListener::bind(&handle, any_port()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted_tx, accepted_rx) = mpsc::channel();
    let server = handle.spawn(async move {
        let (mut stream, _) = listener.accept().await?;
        accepted_tx.send(()).unwrap();
        let mut buf = [0u8; 64];
        // Reads until the reset shows; if a read sees EOF first, writes
        // until the reset shows there.
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Ok(e),
            }
        }
        loop {
            if let Err(e) = stream.write_all(&[0u8; 1024]).await {
                return io::Result::Ok(e);
            }
        }
    });
    let peer = std::net::TcpStream::connect(addr).unwrap();
    accepted_rx.recv_timeout(support::FAILSAFE).unwrap();
    socket2::SockRef::from(&peer)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(peer); // RST instead of FIN
    let error = server.wait().unwrap().unwrap();
    assert!(
        matches!(
            error.kind(),
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
        ),
        "{error:?}"
    );
}

#[test]
fn connecting_to_a_closed_port_is_refused() {
    let _fds = shared_fds();
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    // A port that was free a moment ago and has no listener now.
    let addr = std::net::TcpListener::bind(any_port())
        .unwrap()
        .local_addr()
        .unwrap();
    let h = handle.clone();
    let result = handle
        .spawn(async move { TcpStream::connect(&h, addr).await.map(drop) })
        .wait()
        .unwrap();
    assert_eq!(result.unwrap_err().kind(), io::ErrorKind::ConnectionRefused);
}

/// Names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

#[test]
fn io_works_when_every_worker_was_parked_before_the_first_registration() {
    let _fds = shared_fds();
    let s = Scheduler::builder()
        .workers(2)
        .pin_workers(false)
        .thread_name("lazyio")
        .build()
        .unwrap();
    let ran = s.handle().spawn(async { 1 }).wait();
    assert_eq!(ran, Ok(1));
    // Both parked on their condvars: the registration that creates the
    // poll must wake one, or nobody ever polls.
    support::wait_until("every worker to park", || s.handle().parked_workers() == 2);
    let listener = TcpListener::bind(s.handle(), any_port()).unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = s
        .handle()
        .spawn(async move { listener.accept().await.map(|_| ()) });
    let _peer = std::net::TcpStream::connect(addr).unwrap();
    assert!(accepted.wait().unwrap().is_ok());
    // No thread of its own: the workers poll.
    assert!(!thread_names().iter().any(|n| n == "lazyio-io"));
}

/// Pending forever-ish: wakes itself and yields until `stop` is set.
struct BusyUntil(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl std::future::Future for BusyUntil {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0.load(std::sync::atomic::Ordering::Acquire) {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

#[test]
fn io_is_polled_while_every_worker_is_busy() {
    let _fds = shared_fds();
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let listener = TcpListener::bind(&handle, any_port()).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_accept = std::sync::Arc::clone(&stop);
    let accepted = handle.spawn(async move {
        let accepted = listener.accept().await.map(|_| ());
        stop_accept.store(true, std::sync::atomic::Ordering::Release);
        accepted
    });
    // Both workers busy (they never park) until the accept completes.
    let busy: Vec<_> = (0..2)
        .map(|_| handle.spawn(BusyUntil(std::sync::Arc::clone(&stop))))
        .collect();
    support::wait_until("both workers to be busy", || handle.parked_workers() == 0);
    let _peer = std::net::TcpStream::connect(addr).unwrap();
    assert!(accepted.wait().unwrap().is_ok());
    for b in busy {
        b.wait().unwrap();
    }
}

#[test]
fn quiesce_fails_pending_accept_and_read_and_leaves_no_descriptor_open() {
    let _fds = FDS.write().unwrap_or_else(|e| e.into_inner());
    let before = open_fds();
    let s = support::scheduler(2);
    let handle = s.handle().clone();

    // An accept nobody connects to.
    let idle_listener = TcpListener::bind(&handle, any_port()).unwrap();
    let accept = handle.spawn(async move { idle_listener.accept().await.map(drop) });

    // A read from a peer that never writes.
    let listener = TcpListener::bind(&handle, any_port()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted_tx, accepted_rx) = mpsc::channel();
    let read = handle.spawn(async move {
        let (mut stream, _) = listener.accept().await?;
        accepted_tx.send(()).unwrap();
        let mut buf = [0u8; 16];
        stream.read(&mut buf).await
    });
    let silent_peer = std::net::TcpStream::connect(addr).unwrap();
    accepted_rx.recv_timeout(support::FAILSAFE).unwrap();

    let report = s.quiesce(Instant::now() + support::FAILSAFE);
    assert!(report.drained, "{report:?}");
    let accept_error = accept.wait().unwrap().unwrap_err();
    assert!(is_shut_down_error(&accept_error), "{accept_error:?}");
    let read_error = read.wait().unwrap().unwrap_err();
    assert!(is_shut_down_error(&read_error), "{read_error:?}");

    // Registering after the shutdown fails the same way.
    let late = TcpListener::bind(&handle, any_port()).unwrap_err();
    assert!(is_shut_down_error(&late), "{late:?}");

    drop(silent_peer);
    drop(handle);
    assert_eq!(open_fds(), before, "descriptors left open");
}

/// Each worker polls its own shard of the reactor (decision record 0022),
/// so a socket's events are seen by the worker whose shard it joined. If
/// that worker is stuck in one long run, the stall monitor polls its shard
/// for it: a task waiting on that socket runs on another worker meanwhile,
/// instead of after the long run. Here the long run waits for exactly that
/// (with a failsafe): without the rescue it would spin to the failsafe.
#[test]
fn a_socket_of_a_worker_stuck_in_a_long_run_is_polled_for_it() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let _fds = shared_fds();
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let server = std::net::TcpListener::bind(any_port()).unwrap();
    let addr = server.local_addr().unwrap();
    let got = Arc::new(AtomicBool::new(false));
    let (waiting_tx, waiting_rx) = mpsc::channel();

    // Connected here, registered in the task below: with no await between
    // the registration and the long run, the run is on the worker whose
    // shard the stream joined (an await could resume the task elsewhere).
    let client = std::net::TcpStream::connect(addr).unwrap();
    let (mut peer, _) = server.accept().unwrap();
    let spawner = handle.clone();
    let got_in_run = Arc::clone(&got);
    let long_run = handle.spawn(async move {
        // Registered from this worker: the stream joins its shard.
        let mut stream = TcpStream::from_std(&spawner, client).unwrap();
        let got_in_reader = Arc::clone(&got_in_run);
        let reader = spawner.spawn(async move {
            let mut byte = [0u8; 1];
            // The first read finds nothing and waits for an event on the
            // stuck worker's shard.
            let read = std::future::poll_fn(|cx| {
                let polled = std::pin::Pin::new(&mut stream).poll_read(cx, &mut byte);
                if polled.is_pending() {
                    let _ = waiting_tx.send(());
                }
                polled
            })
            .await;
            got_in_reader.store(true, Ordering::Release);
            read
        });
        // One long run on this worker, until the reader got its byte.
        let start = Instant::now();
        while !got_in_run.load(Ordering::Acquire) && start.elapsed() < support::FAILSAFE {
            std::hint::spin_loop();
        }
        (got_in_run.load(Ordering::Acquire), reader)
    });
    // The reader waits (its first poll ran on the other worker, once the
    // monitor took it from the stuck worker's LIFO slot): now the byte.
    waiting_rx.recv_timeout(support::FAILSAFE).unwrap();
    std::io::Write::write_all(&mut peer, b"x").unwrap();
    let (read_during_the_run, reader) = long_run.wait().unwrap();
    assert!(read_during_the_run, "the read waited for the long run");
    assert_eq!(reader.wait().unwrap().unwrap(), 1);
    assert!(handle.metrics().total().io_rescued >= 1);
}
