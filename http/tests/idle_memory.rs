//! Finding 4 of issue 24: what an idle keep-alive connection holds after
//! a large request body. A counting allocator (this test binary's alone)
//! measures the heap the server keeps.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Request, Response};
use proscenium_http::{Body, Http, ServerSettings};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicIsize, Ordering};
use support::{connect, get, read_answer, system};

/// The system allocator, counting the bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call forwards to `System` with the caller's arguments, so
// `System`'s guarantees are the caller's; the counter has no bearing on
// them.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a statistic read after the work it measures has been
        // waited for (the responses), no ordering with other data.
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Relaxed: as in `alloc`.
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `alloc` above, i.e. by `System`,
        // with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    // Relaxed: see `Counting::alloc`.
    LIVE.load(Ordering::Relaxed)
}

/// The issue: "20 idle connections past one 8 MB POST each hold 156 MiB
/// until they close (the defaults allow 1024 x 8 MiB)". Here 20
/// connections each post 1 MiB, then a small request (so each connection
/// has gone back to waiting for a next request), and stay open: what the
/// server holds for them must not grow with the body they once received.
///
/// Before: each idle connection kept a read buffer of at least the body's
/// size, 20 MiB and more in all (the assertion's figure).
#[test]
fn an_idle_connection_does_not_keep_the_buffer_of_a_large_body() {
    const CONNECTIONS: usize = 20;
    const BODY: usize = 1024 * 1024;
    let system = system();
    let binding = Http::bind_with(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        ServerSettings::default(),
        |req: Request<Body>| async move { Response::new(Body::from(req.body().len().to_string())) },
    )
    .unwrap();
    // A first exchange, so that what the server allocates once (worker
    // caches, the date cache) is in the baseline.
    let mut warm = connect(&binding);
    get(&mut warm, "/");
    assert_eq!(read_answer(&mut warm).body, "0");
    let before = live();
    let mut connections = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut c = connect(&binding);
        let mut request =
            format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {BODY}\r\n\r\n").into_bytes();
        request.resize(request.len() + BODY, b'a');
        c.write_all(&request).unwrap();
        drop(request);
        assert_eq!(read_answer(&mut c).body, BODY.to_string());
        // Served after the large one: the connection is past it and waits
        // for its next request once this is answered.
        get(&mut c, "/");
        assert_eq!(read_answer(&mut c).body, "0");
        connections.push(c);
    }
    let held = live() - before;
    // 64 KiB a connection covers its socket, buffers of a few KiB, its
    // task and its entry; a kept body buffer is 1 MiB or more.
    let bound = (CONNECTIONS * 64 * 1024) as isize;
    assert!(
        held < bound,
        "{CONNECTIONS} idle connections hold {held} bytes (bound {bound})"
    );
    drop(connections);
    system.terminate().wait();
}
