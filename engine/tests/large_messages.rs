//! Messages too large for a worker's default stack. A message is moved by
//! value through a few frames on its way into a mailbox and out to the
//! handler; with a 1 MiB array inside, that overflows std's default 2 MiB
//! thread stack (and aborts the process), so these systems give their
//! workers more (`worker_stack_size`, or `stack-size` in TOML).
//!
//! How much more: in this unoptimised test build the receive path alone
//! keeps some 25 copies of the message in its frames (measured with gdb:
//! `Driver::invoke` 8, `run` 6, the `catch_unwind` wrappers most of the
//! rest), so a 1 MiB message needs between 24 and 32 MiB of stack; 64 MiB
//! leaves room. Optimised builds elide most of those copies.

mod support;

use std::time::Duration;

use proscenium::prelude::*;
use support::{shutdown, PATIENCE};

const MIB: usize = 1 << 20;

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
