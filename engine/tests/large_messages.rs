//! Messages of any size by value. A message goes by value through a dozen
//! frames on its way into a mailbox and out to the handler, and in a debug
//! build each keeps a copy (for a 600 KiB message, measured: about 23 on
//! the sending thread, 27 to 40 on the worker), so with std's 2 MiB thread
//! stack a message of a few hundred KiB aborted the process. A message
//! type over 8 KiB now takes the engine's large path (decision 0022): the
//! send boxes it at once and the rest of the send, and the actor's runs,
//! go on a stack with room for it. The tests with default settings below
//! aborted the test binary before ("has overflowed its stack").
//!
//! The sending thread still holds the caller's own copy: the 4 MiB
//! messages are built on a thread with the 8 MiB stack a process's main
//! thread has by default (a test thread has 2 MiB).
//!
//! The older tests, with larger worker stacks (`worker_stack_size`, or
//! `stack-size` in TOML), check that setting, which still applies.

mod support;

use std::time::Duration;

use proscenium::prelude::*;
use proscenium::TrySendError;
use support::{shutdown, PATIENCE};

const MIB: usize = 1 << 20;
const KIB: usize = 1 << 10;

/// A message of `N` bytes by value: summed, counted, or held.
enum Sized<const N: usize> {
    /// Answered with the sum of its bytes.
    Sum([u8; N], Reply<u64>),
    /// Counted only.
    Count([u8; N]),
    /// How many `Count`s so far.
    Counted(Reply<u64>),
}

struct SizedSummer<const N: usize> {
    counted: u64,
}

impl<const N: usize> Actor for SizedSummer<N> {
    type Msg = Sized<N>;
    fn receive(&mut self, _ctx: &mut Context<Self>, msg: Sized<N>) -> Outcome {
        // By reference: the handler's own frame keeps no copy either.
        match &msg {
            Sized::Sum(data, _) => {
                let sum = data.iter().map(|&b| u64::from(b)).sum();
                if let Sized::Sum(_, reply) = msg {
                    reply.send(sum);
                }
            }
            Sized::Count(_) => self.counted += 1,
            Sized::Counted(_) => {
                if let Sized::Counted(reply) = msg {
                    reply.send(self.counted);
                }
            }
        }
        Ok(())
    }
}

/// Asks for the sum of `N` bytes; the message is built by the closure,
/// which `ask` runs where the message has room (no copy here).
fn ask_sum<const N: usize>(to: &ActorRef<Sized<N>>, byte: u8) -> Result<u64, AskError> {
    to.ask(|reply| Sized::Sum([byte; N], reply), PATIENCE)
        .wait()
}

// Each of these builds its message by value in its own frame (a debug
// build keeps the array and the enum: two copies), so that the test's
// frames do not add them up.

#[inline(never)]
fn tell_count<const N: usize>(to: &ActorRef<Sized<N>>, byte: u8) {
    to.tell(Sized::Count([byte; N]));
}

#[inline(never)]
fn try_tell_count<const N: usize>(to: &ActorRef<Sized<N>>, byte: u8) -> Option<u8> {
    match to.try_tell(Sized::Count([byte; N])) {
        Ok(()) => None,
        Err(TrySendError::Closed(Sized::Count(data)) | TrySendError::Full(Sized::Count(data))) => {
            Some(data[N - 1])
        }
        Err(_) => panic!("handed back another message"),
    }
}

/// Every way a large message goes through the engine, with default
/// settings: `ask`, `tell`, `try_tell`, a message sent behind a PoisonPill
/// (a dead letter at the stop, on the worker, unless the stop came first),
/// one sent after the stop (a dead letter on the sender), and one that
/// `try_tell` hands back.
fn every_path_with_default_settings<const N: usize>() {
    let system = support::system();
    let dead = support::dead_letter_probe(&system, |d| d.downcast_ref::<Sized<N>>().is_some());
    let summer = system
        .spawn(Props::new(|| SizedSummer::<N> { counted: 0 }), "summer")
        .expect("summer");
    assert_eq!(ask_sum(&summer, 1), Ok(N as u64));
    tell_count(&summer, 2);
    assert_eq!(try_tell_count(&summer, 3), None);
    assert_eq!(summer.ask(Sized::Counted, PATIENCE).wait(), Ok(2));
    // Behind a PoisonPill: a dead letter, from the stopping run's drain (or
    // from this thread, if the actor has stopped already).
    let stopped = summer.when_terminated();
    summer.poison_pill();
    tell_count(&summer, 4);
    assert!(stopped.wait_timeout(PATIENCE));
    assert!(dead.next(), "the message behind the PoisonPill");
    tell_count(&summer, 5);
    assert!(dead.next(), "a message to the stopped actor");
    assert_eq!(try_tell_count(&summer, 6), Some(6), "handed back");
    drop(summer);
    shutdown(system);
}

/// Runs `f` on a plain thread with a stack of `bytes`.
fn on_a_thread_of(bytes: usize, f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(bytes)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic");
}

/// 600 KiB: the workers' stacks are std's default (2 MiB). The test's
/// thread sends from a stack of 8 MiB, a process's main thread's default,
/// with room for the copies its own code makes; `ask` also works from the
/// test thread itself (2 MiB), where the message is built in `ask`'s
/// closure.
#[test]
fn a_600_kib_message_by_value_with_default_settings() {
    on_a_thread_of(8 * MIB, every_path_with_default_settings::<{ 600 * KIB }>);
    let system = support::system();
    let summer = system
        .spawn(
            Props::new(|| SizedSummer::<{ 600 * KIB }> { counted: 0 }),
            "summer",
        )
        .expect("summer");
    assert_eq!(ask_sum(&summer, 1), Ok(600 * KIB as u64));
    drop(summer);
    shutdown(system);
}

/// 4 MiB, twice a worker's whole stack: handled on a stack grown for it.
/// The sending thread needs room for its own copies: in a debug build
/// `try_tell_count` keeps four (the array, the enum, the result, the
/// bytes handed back), and `try_tell` one more (its argument): 32 MiB.
#[test]
fn a_4_mib_message_by_value_with_default_settings() {
    on_a_thread_of(32 * MIB, every_path_with_default_settings::<{ 4 * MIB }>);
}

/// The other places that move a message by value outside its actor's
/// runs, for a 600 KiB message with default settings: a timer (fired on
/// the timer thread), a narrowed reference (mapped in the adapter's run),
/// an event-stream subscription (mapped on the publishing thread), a
/// future piped to the actor (mapped on the worker that completes it), and
/// a PoisonPill and Kill sent to its mailbox.
#[test]
fn a_600_kib_message_by_timer_adapter_subscription_and_pipe() {
    const N: usize = 600 * KIB;
    /// Pipes a future whose output is mapped to a 600 KiB message, and
    /// counts those that come back.
    struct Piper {
        piped: u64,
    }
    impl Actor for Piper {
        type Msg = Sized<N>;
        fn receive(&mut self, ctx: &mut Context<Self>, msg: Sized<N>) -> Outcome {
            match msg {
                Sized::Sum(_, reply) => {
                    drop(ctx.pipe_to_self(async { 9u8 }, |b| Sized::Count([b; N])));
                    reply.send(0);
                }
                Sized::Count(data) => self.piped += u64::from(data[N - 1] == 9),
                Sized::Counted(reply) => reply.send(self.piped),
            }
            Ok(())
        }
    }
    /// Asks `to` for its count until it is `n` (each ask waits on the
    /// answer; the deadline bounds a count that never comes).
    fn until_counted<const N: usize>(to: &ActorRef<Sized<N>>, n: u64) {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let counted = to.ask(Sized::Counted, PATIENCE).wait().expect("counted");
            if counted == n {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{counted} of {n}");
        }
    }
    let system = support::system();
    let summer = system
        .spawn(Props::new(|| SizedSummer::<N> { counted: 0 }), "summer")
        .expect("summer");
    let _timer = summer.tell_after(std::time::Duration::from_millis(1), Sized::Count([1; N]));
    let adapted: ActorRef<u8> = summer.adapt(|b| Sized::Count([b; N])).expect("adapter");
    adapted.tell(2);
    system
        .event_stream()
        .subscribe_actor(&summer, |b: &u16| Sized::Count([*b as u8; N]));
    assert_eq!(system.event_stream().publish(3_u16), 1);
    // The timer's, the adapter's and the subscription's, in any order.
    until_counted(&summer, 3);
    let piper = system
        .spawn(Props::new(|| Piper { piped: 0 }), "piper")
        .expect("piper");
    assert_eq!(ask_sum(&piper, 0), Ok(0));
    until_counted(&piper, 1);
    piper.kill();
    summer.poison_pill();
    assert!(piper.when_terminated().wait_timeout(PATIENCE));
    assert!(summer.when_terminated().wait_timeout(PATIENCE));
    drop((summer, adapted, piper));
    shutdown(system);
}

/// From a worker: an actor builds a 600 KiB message by value in its
/// handler (its own frame holds it, on the worker's default 2 MiB stack)
/// and tells it to another; the spawn, the send and the receive all run
/// on workers.
#[test]
fn a_600_kib_message_built_on_a_worker_with_default_settings() {
    struct Builder {
        to: Option<ActorRef<Sized<{ 600 * KIB }>>>,
    }
    impl Actor for Builder {
        type Msg = Reply<u64>;
        fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
            let summer = Props::new(|| SizedSummer::<{ 600 * KIB }> { counted: 0 });
            self.to = Some(ctx.spawn(summer, "summer")?);
            Ok(())
        }
        fn receive(&mut self, _ctx: &mut Context<Self>, reply: Reply<u64>) -> Outcome {
            let to = self.to.as_ref().ok_or("started without a summer")?;
            to.tell(Sized::Sum([1; 600 * KIB], reply));
            Ok(())
        }
    }
    let system = support::system();
    let builder = system
        .spawn(Props::new(|| Builder { to: None }), "builder")
        .expect("builder");
    assert_eq!(builder.ask(|r| r, PATIENCE).wait(), Ok(600 * KIB as u64));
    drop(builder);
    shutdown(system);
}

enum BigMsg {
    /// One MiB by value; answered with the sum of its bytes.
    Big([u8; MIB], Reply<u64>),
}

struct Summer;

impl Actor for Summer {
    type Msg = BigMsg;
    fn receive(&mut self, _ctx: &mut Context<Self>, msg: BigMsg) -> Outcome {
        let BigMsg::Big(data, reply) = msg;
        reply.send(data.iter().map(|&b| u64::from(b)).sum());
        Ok(())
    }
}

enum RelayMsg {
    /// Build a 1 MiB message here, on a worker, and send it to the summer
    /// with this reply inside.
    Go(Reply<u64>),
}

/// Spawns the summer and sends it the large message, both from a worker:
/// a mailbox for a 1 MiB message type is built by value too, so the
/// spawn, the send and the receive all run on worker stacks (the test
/// thread has std's 2 MiB).
struct Relay {
    to: Option<ActorRef<BigMsg>>,
}

impl Actor for Relay {
    type Msg = RelayMsg;
    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        self.to = Some(ctx.spawn(Props::new(|| Summer), "summer")?);
        Ok(())
    }
    fn receive(&mut self, _ctx: &mut Context<Self>, msg: RelayMsg) -> Outcome {
        let RelayMsg::Go(reply) = msg;
        let to = self.to.as_ref().ok_or("started without a summer")?;
        to.tell(BigMsg::Big([1; MIB], reply));
        Ok(())
    }
}

/// Sends one 1 MiB message from an actor to an actor on `system` and
/// checks the answer.
fn one_mib_round_trip(system: ActorSystem) {
    let relay = system
        .spawn(Props::new(|| Relay { to: None }), "relay")
        .expect("relay");
    let sum = relay.ask(RelayMsg::Go, PATIENCE).wait();
    assert_eq!(sum, Ok(MIB as u64));
    drop(relay);
    shutdown(system);
}

#[test]
fn a_one_mib_message_by_value_reaches_an_actor_on_larger_worker_stacks() {
    let system = ActorSystem::builder()
        .name("large")
        .workers(2)
        .pin_workers(false)
        .dead_letter_logging(0, Duration::from_secs(1))
        .worker_stack_size(64 * MIB)
        .build()
        .expect("the system starts");
    one_mib_round_trip(system);
}

#[test]
fn the_worker_stack_size_is_read_from_toml() {
    let system = ActorSystem::builder()
        .name("large-toml")
        .from_toml_str(
            r#"
            [scheduler]
            workers = 2
            pin-workers = "off"
            stack-size = "64 MiB"
            "#,
        )
        .expect("valid settings")
        .dead_letter_logging(0, Duration::from_secs(1))
        .build()
        .expect("the system starts");
    one_mib_round_trip(system);
}

#[test]
fn a_worker_stack_size_below_the_minimum_is_a_typed_error_naming_the_setting() {
    let err = ActorSystem::builder()
        .workers(1)
        .pin_workers(false)
        .worker_stack_size(1024)
        .build()
        .expect_err("1 KiB is too small");
    assert!(
        matches!(
            err,
            proscenium::SystemError::Scheduler(
                proscenium_scheduler::BuildError::StackSizeTooSmall {
                    requested: 1024,
                    ..
                }
            )
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("scheduler.stack-size"), "{err}");
}
