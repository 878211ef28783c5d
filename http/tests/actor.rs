//! Actor handlers (`Http::bind_actor`): an actor receives each request with
//! a `Reply`, and a request it cannot answer still gets a response (500 for
//! a dropped `Reply`, 503 for a request that went to dead letters, the deadline-exceeded
//! response for a reply that misses the termination's hard deadline).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Method, Request, Response, StatusCode};
use proscenium::prelude::*;
use proscenium_http::{Body, Http, ServerSettings};
use std::io::Write;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;
use support::{connect, get, read_answer, system, PATIENCE};

/// The counter's message: a request and its reply (built by the server
/// through `From`).
struct Http1(Request<Body>, Reply<Response<Body>>);

impl From<(Request<Body>, Reply<Response<Body>>)> for Http1 {
    fn from((request, reply): (Request<Body>, Reply<Response<Body>>)) -> Http1 {
        Http1(request, reply)
    }
}

/// `POST /counter` adds one and answers the new count, `GET /counter`
/// answers the count; `/drop` drops the `Reply` unsent; `/hold` keeps it
/// (never answered) and reports on `held`.
struct Counter {
    count: u64,
    held: Vec<Reply<Response<Body>>>,
    on_hold: Mutex<mpsc::Sender<()>>,
}

impl Actor for Counter {
    type Msg = Http1;

    fn receive(&mut self, _: &mut Context<Self>, Http1(request, reply): Http1) -> Outcome {
        match (request.method(), request.uri().path()) {
            (&Method::POST, "/counter") => {
                self.count += 1;
                reply.send(Response::new(Body::from(self.count.to_string())));
            }
            (&Method::GET, "/counter") => {
                reply.send(Response::new(Body::from(self.count.to_string())));
            }
            (_, "/drop") => drop(reply),
            (_, "/hold") => {
                self.held.push(reply);
                self.on_hold.lock().unwrap().send(()).unwrap();
            }
            _ => {
                let mut response = Response::new(Body::empty());
                *response.status_mut() = StatusCode::NOT_FOUND;
                reply.send(response);
            }
        }
        Ok(())
    }
}

fn counter(system: &ActorSystem) -> (ActorRef<Http1>, mpsc::Receiver<()>) {
    let (tx, held) = mpsc::channel();
    let tx = Mutex::new(tx);
    let actor = system
        .spawn(
            Props::new(move || Counter {
                count: 0,
                held: Vec::new(),
                on_hold: Mutex::new(tx.lock().unwrap().clone()),
            }),
            "counter",
        )
        .unwrap();
    (actor, held)
}

#[test]
fn an_actor_backed_counter_answers_in_order_on_keep_alive_and_across_connections() {
    let system = system();
    let (actor, _) = counter(&system);
    let binding = Http::bind_actor(&system, "127.0.0.1:0".parse().unwrap(), actor).unwrap();

    // One keep-alive connection: three POSTs pipelined, then a GET.
    let mut stream = connect(&binding);
    for _ in 0..3 {
        write!(
            stream,
            "POST /counter HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        )
        .unwrap();
    }
    for expected in 1..=3 {
        let answer = read_answer(&mut stream);
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, expected.to_string());
    }
    // Four threads, each on its own connection, five POSTs each: the actor
    // handles one message at a time, so no increment is lost.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let binding = binding.clone();
            std::thread::spawn(move || {
                let mut stream = connect(&binding);
                for _ in 0..5 {
                    write!(
                        stream,
                        "POST /counter HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
                    )
                    .unwrap();
                    assert_eq!(read_answer(&mut stream).status, 200);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    get(&mut stream, "/counter");
    assert_eq!(read_answer(&mut stream).body, "23");
    get(&mut stream, "/elsewhere");
    assert_eq!(read_answer(&mut stream).status, 404);

    binding.terminate(PATIENCE).wait().unwrap();
    system.terminate().wait();
}

#[test]
fn a_reply_dropped_unsent_is_answered_500_and_the_connection_goes_on() {
    let system = system();
    let (actor, _) = counter(&system);
    let binding = Http::bind_actor(&system, "127.0.0.1:0".parse().unwrap(), actor).unwrap();

    let mut stream = connect(&binding);
    get(&mut stream, "/drop");
    let answer = read_answer(&mut stream);
    assert_eq!(answer.status, 500);
    assert_eq!(answer.body, "");
    // The same connection, and the same actor, go on.
    write!(
        stream,
        "POST /counter HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    assert_eq!(read_answer(&mut stream).body, "1");

    binding.terminate(PATIENCE).wait().unwrap();
    system.terminate().wait();
}

/// The `Reply` of a request the actor did get, handed to other code that
/// drops it unsent only after the actor has stopped: still the
/// application's fault, 500. The binding used to ask `is_terminated()`
/// when the ask failed, and answered 503 here.
#[test]
fn a_reply_dropped_after_its_actor_stopped_is_answered_500() {
    /// Hands each `Reply` out, then stops.
    struct Courier {
        out: Mutex<mpsc::Sender<Reply<Response<Body>>>>,
    }
    impl Actor for Courier {
        type Msg = Http1;
        fn receive(&mut self, ctx: &mut Context<Self>, Http1(_, reply): Http1) -> Outcome {
            self.out.lock().unwrap().send(reply).unwrap();
            ctx.stop_self();
            Ok(())
        }
    }
    let system = system();
    let (out, replies) = mpsc::channel();
    let out = Mutex::new(out);
    let actor = system
        .spawn(
            Props::new(move || Courier {
                out: Mutex::new(out.lock().unwrap().clone()),
            }),
            "courier",
        )
        .unwrap();
    let stopped = actor.when_terminated();
    let binding = Http::bind_actor(&system, "127.0.0.1:0".parse().unwrap(), actor.clone()).unwrap();

    let mut stream = connect(&binding);
    get(&mut stream, "/anything");
    let reply = replies.recv_timeout(PATIENCE).unwrap();
    assert!(stopped.wait_timeout(PATIENCE), "the actor stopped");
    assert!(actor.is_terminated());
    drop(reply);
    let answer = read_answer(&mut stream);
    assert_eq!(answer.status, 500);
    assert_eq!(answer.body, "");

    binding.terminate(PATIENCE).wait().unwrap();
    system.terminate().wait();
}

#[test]
fn a_stopped_actor_is_answered_503_and_the_server_goes_on() {
    let system = system();
    let (actor, _) = counter(&system);
    let binding = Http::bind_actor(&system, "127.0.0.1:0".parse().unwrap(), actor.clone()).unwrap();

    let mut stream = connect(&binding);
    write!(
        stream,
        "POST /counter HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    assert_eq!(read_answer(&mut stream).body, "1");

    assert!(actor.graceful_stop(PATIENCE).wait(), "the actor stopped");
    // Its requests now go to dead letters, which drop the Reply: 503, on
    // the same connection and on a new one, and the server stays up.
    get(&mut stream, "/counter");
    let answer = read_answer(&mut stream);
    assert_eq!(answer.status, 503);
    assert_eq!(answer.body, "");
    let mut other = connect(&binding);
    get(&mut other, "/counter");
    assert_eq!(read_answer(&mut other).status, 503);
    assert_eq!(binding.metrics().responses.server_error, 2);

    binding.terminate(PATIENCE).wait().unwrap();
    system.terminate().wait();
}

#[test]
fn a_reply_held_past_the_hard_deadline_gets_the_deadline_exceeded_response() {
    let system = system();
    let (actor, held) = counter(&system);
    let mut exceeded = Response::new(Body::empty());
    *exceeded.status_mut() = StatusCode::GATEWAY_TIMEOUT;
    let settings = ServerSettings::default()
        .termination_deadline_exceeded_response(exceeded)
        .unwrap();
    let binding =
        Http::bind_actor_with(&system, "127.0.0.1:0".parse().unwrap(), settings, actor).unwrap();

    let mut stream = connect(&binding);
    get(&mut stream, "/hold");
    held.recv_timeout(PATIENCE)
        .expect("the actor got the request");
    // Seed: "if user code does not reply with a response within the
    // deadline we produce a special [...] terminationDeadlineExceededResponse
    // HTTP response (e.g. 503 Service Unavailable)": the actor keeps its
    // Reply, the server does not wait for it past the deadline.
    let terminated = binding
        .terminate(Duration::from_millis(200))
        .wait()
        .unwrap();
    let answer = read_answer(&mut stream);
    assert_eq!(answer.status, 504);
    assert_eq!(answer.header("connection"), Some("close"));
    assert_eq!(terminated.forced_connections, 1);
    system.terminate().wait();
}
