//! Handlers that return `Result` (issue 24): an error is answered 500 and
//! logged in the request's span; the server goes on.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Request, Response};
use proscenium_http::{Body, Http};
use support::{capture, connect, get, read_answer, system};

#[test]
fn a_handlers_error_is_answered_500_and_logged() {
    let system = system();
    let binding = Http::bind(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        |request: Request<Body>| async move {
            if request.uri().path() == "/fail" {
                return Err(std::io::Error::other("no such thing"));
            }
            Ok(Response::new(Body::from("fine")))
        },
    )
    .unwrap();
    let capture = capture();
    let mark = capture.mark();
    let mut c = connect(&binding);
    let peer = c.local_addr().unwrap();
    get(&mut c, "/fail");
    let a = read_answer(&mut c);
    assert_eq!(a.status, 500);
    assert!(a.body.is_empty());
    // Logged, with the error, in the request's span.
    capture.wait_for(|r| {
        r.events_on(mark, peer)
            .into_iter()
            .find(|e| e.fields.get("error").map(String::as_str) == Some("no such thing"))
            .map(|_| ())
    });
    // The connection and the server go on.
    get(&mut c, "/ok");
    let a = read_answer(&mut c);
    assert_eq!((a.status, a.body.as_str()), (200, "fine"));
    assert_eq!(
        binding
            .metrics()
            .responses_with(http::StatusCode::INTERNAL_SERVER_ERROR),
        1
    );
    system.terminate().wait();
}
