//! An axum `Router`, served as it is by `Http::bind_service` on the actor
//! system's workers: no tokio runtime (axum built without its `tokio`
//! feature), HTTP/1.1 and HTTP/2 on one port, the graceful termination
//! on SIGTERM or Ctrl-C.
//!
//! ```sh
//! cargo run -p proscenium-http --features tower --example axum    # PORT=8080
//! curl 'localhost:8080/users/7?greeting=hi'    # Path, Query: hi, user 7
//! curl -d '{"name":"ada"}' -H 'content-type: application/json' localhost:8080/users
//! curl -X POST localhost:8080/count            # State: asks the counter actor: 1
//! curl localhost:8080/count                    # 1
//! curl --http2-prior-knowledge localhost:8080/runtime   # served on axum-0 (a worker)
//! curl -i localhost:8080/panic                 # 500, and the server goes on
//! curl -i localhost:8080/nowhere               # the fallback: 404
//! curl 'localhost:8080/slow?ms=1000' & kill -TERM <pid>  # finishes, then it exits
//! curl -i 'localhost:8080/slow?ms=5000' & kill -TERM <pid>  # 503 at the 2 s deadline
//! ```
//!
//! Options: `--port N` (or `PORT`; 0 for any free port), `--deadline-ms N`
//! (the termination's hard deadline, default 2000). It prints `listening
//! on ADDR` once it serves. On SIGTERM or Ctrl-C the coordinated shutdown
//! unbinds the port, lets requests in flight finish (new ones on open
//! connections get 503) until the deadline, then stops the system and
//! exits.

use axum::extract::{MatchedPath, Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{routing, Json, Router};
use proscenium::prelude::*;
use proscenium::Handle;
use proscenium_http::{Http, ServerSettings};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::time::Duration;

/// The counter actor's messages.
enum CounterMsg {
    Add(Reply<u64>),
    Get(Reply<u64>),
}

struct Counter(u64);

impl Actor for Counter {
    type Msg = CounterMsg;
    fn receive(&mut self, _: &mut Context<Self>, msg: CounterMsg) -> Outcome {
        match msg {
            CounterMsg::Add(reply) => {
                self.0 += 1;
                reply.send(self.0);
            }
            CounterMsg::Get(reply) => reply.send(self.0),
        }
        Ok(())
    }
}

/// What the handlers share (`State<AppState>`): the counter, and the
/// scheduler's handle for its timers.
#[derive(Clone)]
struct AppState {
    counter: ActorRef<CounterMsg>,
    scheduler: Handle,
}

#[derive(Deserialize)]
struct Greeting {
    greeting: Option<String>,
}

#[derive(Deserialize)]
struct NewUser {
    name: String,
}

#[derive(Serialize)]
struct User {
    id: u32,
    name: String,
}

async fn user(
    Path(id): Path<u32>,
    Query(greeting): Query<Greeting>,
    matched: MatchedPath,
) -> Response {
    if id == 0 {
        return (StatusCode::NOT_FOUND, "no user 0\n").into_response();
    }
    let greeting = greeting.greeting.as_deref().unwrap_or("hello");
    format!("{greeting}, user {id} (route {})\n", matched.as_str()).into_response()
}

async fn create(Json(new): Json<NewUser>) -> (StatusCode, Json<User>) {
    let user = User {
        id: 7,
        name: new.name,
    };
    (StatusCode::CREATED, Json(user))
}

/// Asks the counter actor (the ask is a future; no worker is held while
/// the actor answers).
async fn add(State(state): State<AppState>) -> Result<String, StatusCode> {
    let count = state.counter.ask(CounterMsg::Add, Duration::from_secs(5));
    let count = count.await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    Ok(format!("{count}\n"))
}

async fn count(State(state): State<AppState>) -> Result<String, StatusCode> {
    let count = state.counter.ask(CounterMsg::Get, Duration::from_secs(5));
    let count = count.await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    Ok(format!("{count}\n"))
}

#[derive(Deserialize)]
struct Wait {
    ms: Option<u64>,
}

/// Answers after `ms` milliseconds (default 1000) of the scheduler's
/// sleep: tokio's `sleep` would panic here (no tokio runtime).
async fn slow(State(state): State<AppState>, Query(wait): Query<Wait>) -> String {
    let ms = wait.ms.unwrap_or(1000).min(600_000);
    state.scheduler.sleep(Duration::from_millis(ms)).await;
    format!("slept {ms} ms\n")
}

/// Where this handler runs: a worker thread of the system (named after
/// it: `axum-0`, `axum-1`, ...).
async fn runtime() -> String {
    let thread = std::thread::current();
    format!(
        "served on {}\n",
        thread.name().unwrap_or("an unnamed thread")
    )
}

async fn panics() -> &'static str {
    panic!("/panic panics on purpose: the server answers 500 and goes on")
}

async fn fallback(uri: Uri) -> (StatusCode, String) {
    (StatusCode::NOT_FOUND, format!("nothing at {uri}\n"))
}

/// `--name VALUE` on the command line.
fn option(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).cloned()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = match option("--port").or_else(|| std::env::var("PORT").ok()) {
        Some(port) => port.parse()?,
        None => 8080,
    };
    let deadline = Duration::from_millis(match option("--deadline-ms") {
        Some(ms) => ms.parse()?,
        None => 2000,
    });
    // SIGTERM and SIGINT run the coordinated shutdown (the default), and
    // the process exits once the system has terminated. The drain's phase
    // gets the hard deadline and a second more.
    let config = ShutdownConfig::default().exit_process(true).phase(
        Phase::SERVICE_REQUESTS_DONE,
        PhaseConfig::new().timeout(deadline + Duration::from_secs(1)),
    );
    let system = ActorSystem::builder()
        .name("axum")
        .coordinated_shutdown(config)
        .build()?;
    let state = AppState {
        counter: system.spawn(Props::new(|| Counter(0)), "counter")?,
        scheduler: system.scheduler_handle().clone(),
    };
    let app = Router::new()
        .route("/users", routing::post(create))
        .route("/users/{id}", routing::get(user))
        .route("/count", routing::get(count).post(add))
        .route("/slow", routing::get(slow))
        .route("/runtime", routing::get(runtime))
        .route("/panic", routing::get(panics))
        .fallback(fallback)
        .with_state(state);

    let binding = Http::bind_service(
        &system,
        ([127, 0, 0, 1], port).into(),
        ServerSettings::default(),
        app,
    )?;
    binding.add_to_coordinated_shutdown(system.coordinated_shutdown(), deadline)?;

    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", binding.local_addr())?;
    out.flush()?;
    drop(out);
    // Until SIGTERM or Ctrl-C: the shutdown's exit thread ends the process.
    system.when_terminated().wait();
    Ok(())
}
