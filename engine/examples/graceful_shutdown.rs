//! A server-shaped program that shuts down in order on SIGTERM or SIGINT
//! (Ctrl-C): the coordinated shutdown, configured from TOML with Akka's key
//! names, runs a process hook, then every phase in order (a task in each
//! phase the program cares about, an actor-termination task, a custom phase
//! hooked into the DAG), terminates the actor system (every actor stopped,
//! children first; the workers drained and joined) and exits the process
//! with the configured exit code.
//!
//! Run it with `cargo run --release -p proscenium --example graceful_shutdown`,
//! then press Ctrl-C (or `kill -TERM <pid>`); it prints each step and exits
//! with code 3. `engine/tests/signals.rs` runs it as a child process.
//! With a number as argument, it shuts itself down after that many
//! milliseconds; with `--stuck-hook`, its process hook never returns, and a
//! second Ctrl-C (or SIGTERM) ends the process with the signal's default
//! action.

use std::io::Write;
use std::time::Duration;

use proscenium::prelude::*;

const CONFIG: &str = r#"
[coordinated-shutdown]
exit-process = "on"
exit-code = 3
default-phase-timeout = "5 s"

# An application phase between service-stop and before-cluster-shutdown.
[coordinated-shutdown.phases.flush-caches]
depends-on = ["service-stop"]
timeout = "2 s"

[coordinated-shutdown.phases.before-cluster-shutdown]
depends-on = ["flush-caches"]
"#;

/// Prints a line and flushes it at once (the test reads it as it comes).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A worker with children: shows that children stop before their parent.
struct Worker {
    name: &'static str,
}

enum WorkerMsg {
    Spawn(&'static str),
    Work,
    Drain,
}

impl Actor for Worker {
    type Msg = WorkerMsg;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: WorkerMsg) -> Outcome {
        match msg {
            WorkerMsg::Spawn(name) => {
                ctx.spawn(Props::new(move || Worker { name }), name)?;
            }
            WorkerMsg::Work => {}
            WorkerMsg::Drain => {
                say(&format!("actor {} drained; stopping", self.name));
                ctx.stop_self();
            }
        }
        Ok(())
    }
    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        say(&format!("post_stop {}", self.name));
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = ShutdownConfig::from_toml_str(CONFIG)?;
    let system = ActorSystem::builder()
        .name("server")
        .workers(2)
        .pin_workers(false)
        .coordinated_shutdown(config)
        .build()?;
    let cs = system.coordinated_shutdown();

    let pool = system.spawn(Props::new(|| Worker { name: "pool" }), "pool")?;
    pool.tell(WorkerMsg::Spawn("pool-child"));
    let queue = system.spawn(Props::new(|| Worker { name: "queue" }), "queue")?;
    for _ in 0..1000 {
        queue.tell(WorkerMsg::Work);
    }

    // `--stuck-hook`: a hook that never returns, to show that a second
    // signal still ends the process (the signal's default action).
    let stuck_hook = std::env::args().any(|a| a == "--stuck-hook");
    cs.add_process_hook("app-hook", move || {
        if stuck_hook {
            say("process hook (stuck)");
            loop {
                std::thread::park();
            }
        }
        say("process hook");
    })?;
    let step = |phase: &'static str| {
        move || async move {
            say(&format!("phase {phase}"));
            Ok(())
        }
    };
    cs.add_task(
        Phase::BEFORE_SERVICE_UNBIND,
        "announce",
        step("before-service-unbind"),
    )?;
    cs.add_task(Phase::SERVICE_UNBIND, "unbind", step("service-unbind"))?;
    cs.add_task(
        Phase::SERVICE_REQUESTS_DONE,
        "requests",
        step("service-requests-done"),
    )?;
    cs.add_task(Phase::SERVICE_STOP, "close", step("service-stop"))?;
    cs.add_task("flush-caches", "flush", step("flush-caches"))?;
    cs.add_actor_termination_task(
        Phase::BEFORE_CLUSTER_SHUTDOWN,
        "drain-queue",
        &queue,
        Some(WorkerMsg::Drain),
    )?;
    cs.add_task(
        Phase::BEFORE_ACTOR_SYSTEM_TERMINATE,
        "last-words",
        step("before-actor-system-terminate"),
    )?;

    system.register_on_termination(|report| {
        say(&format!(
            "terminated: clean={} dead_letters={}",
            report.clean(),
            report.dead_letters
        ));
    });

    let phases = cs.phases().join(" > ");
    say(&format!("phases: {phases}"));
    say(&format!("ready pid={}", std::process::id()));

    if let Some(ms) = std::env::args().nth(1).and_then(|a| a.parse::<u64>().ok()) {
        std::thread::sleep(Duration::from_millis(ms));
        say("shutting down by itself");
        drop(cs.run(proscenium::Reason::User("demo timer".into())));
    }

    // A server's main thread would serve here. With exit-process on, the
    // shutdown's exit thread ends the process with the configured code once
    // the system has terminated (after the callback above).
    loop {
        std::thread::park();
    }
}
