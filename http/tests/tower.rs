//! A tower `Service` served (feature `tower`, issue 24): readiness
//! awaited, each request to a clone, an error answered 500.
#![cfg(feature = "tower")]
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Request, Response, StatusCode};
use proscenium_http::{Body, Http, ServerSettings};
use std::future::{ready, Ready};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use support::{connect, get, read_answer, system};

/// Answers with how many times it was found ready; `/fail` is an error.
#[derive(Clone, Default)]
struct Counting(Arc<AtomicUsize>);

impl tower_service::Service<Request<Body>> for Counting {
    type Response = Response<Body>;
    type Error = String;
    type Future = Ready<Result<Response<Body>, String>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), String>> {
        // SeqCst: a test counter.
        self.0.fetch_add(1, Ordering::SeqCst);
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if request.uri().path() == "/fail" {
            return ready(Err("failed on purpose".to_string()));
        }
        // SeqCst: a test counter.
        let readied = self.0.load(Ordering::SeqCst);
        ready(Ok(Response::new(Body::from(readied.to_string()))))
    }
}

#[test]
fn a_tower_service_answers_and_its_errors_are_500() {
    let system = system();
    let binding = Http::bind_service(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        ServerSettings::default(),
        Counting::default(),
    )
    .unwrap();
    let mut c = connect(&binding);
    get(&mut c, "/a");
    assert_eq!(read_answer(&mut c).body, "1");
    get(&mut c, "/fail");
    assert_eq!(read_answer(&mut c).status, 500);
    get(&mut c, "/b");
    assert_eq!(read_answer(&mut c).body, "3");
    assert_eq!(
        binding
            .metrics()
            .responses_with(StatusCode::INTERNAL_SERVER_ERROR),
        1
    );
    system.terminate().wait();
}
