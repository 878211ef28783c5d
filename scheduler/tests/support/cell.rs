//! A minimal actor cell: a real `proscenium-mailbox` run as a `Runnable` on
//! the scheduler, the way the engine will wire the two layers. Shared by the
//! `mailbox_cells` test and the `cells` example.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use proscenium_mailbox::{Dequeued, Enqueued, Mailbox, Release, TrySendError};
use proscenium_scheduler::{Budget, Handle, RunOutcome, Runnable};

/// The system lane of this minimal cell.
#[derive(Debug)]
pub enum Signal {
    /// Close the mailbox; what is left goes to dead letters.
    Stop,
}

/// A cell whose behaviour is a closure over its messages.
pub struct Cell<M: Send + 'static> {
    mailbox: Mailbox<Signal, M>,
    handle: Handle,
    /// Touched only by the run holder: the lock is never contended; it is
    /// there so the cell is `Sync` without an `unsafe impl`.
    behaviour: Mutex<Box<dyn FnMut(M) + Send>>,
    /// Set while a run is in progress: proves runs never overlap.
    running: AtomicBool,
    dead_letters: AtomicU64,
}

impl<M: Send + 'static> Cell<M> {
    pub fn new(handle: &Handle, behaviour: impl FnMut(M) + Send + 'static) -> Arc<Cell<M>> {
        Arc::new(Cell {
            mailbox: Mailbox::new(),
            handle: handle.clone(),
            behaviour: Mutex::new(Box::new(behaviour)),
            running: AtomicBool::new(false),
            dead_letters: AtomicU64::new(0),
        })
    }

    /// Sends a user message; a closed cell hands it back.
    pub fn tell(self: &Arc<Self>, msg: M) -> Result<(), M> {
        match self.mailbox.enqueue_user(msg) {
            Ok(won) => {
                self.schedule_if(won);
                Ok(())
            }
            Err(TrySendError::Closed(m) | TrySendError::Full(m)) => Err(m),
        }
    }

    /// Sends a system signal (ahead of queued user messages).
    pub fn signal(self: &Arc<Self>, signal: Signal) {
        if let Ok(won) = self.mailbox.enqueue_system(signal) {
            self.schedule_if(won);
        }
    }

    fn schedule_if(self: &Arc<Self>, won: Enqueued) {
        if won == Enqueued::MustSchedule {
            self.handle
                .submit(self.clone())
                .unwrap_or_else(|_| panic!("the scheduler is shut down"));
        }
    }

    /// Messages that reached the cell after it stopped.
    pub fn dead_letters(&self) -> u64 {
        self.dead_letters.load(Ordering::Relaxed)
    }

    /// Whether the cell is idle now (a hint).
    pub fn is_scheduled(&self) -> bool {
        self.mailbox.snapshot().is_scheduled()
    }
}

impl<M: Send + 'static> Runnable for Cell<M> {
    fn run(self: Arc<Self>, budget: &mut Budget) -> RunOutcome {
        // Relaxed suffices: an overlap would be a bug in the hand-off, and
        // the flag only makes it loud.
        assert!(
            !self.running.swap(true, Ordering::Relaxed),
            "two runs of one cell overlap"
        );
        let mut behaviour = self.behaviour.lock().expect("behaviour never panics");
        let outcome = loop {
            if budget.is_exhausted() {
                // Keep the run; the scheduler requeues us at the back.
                break RunOutcome::Yield;
            }
            // SAFETY: this run was submitted by the winner of MustSchedule (or
            // by us after Reschedule/Yield): we hold the mailbox's run.
            let dequeued = unsafe { self.mailbox.dequeue() };
            if !matches!(dequeued, Dequeued::Empty | Dequeued::Retry) {
                // Spent with the message in hand (see `Budget::consume`).
                let _ = budget.consume();
            }
            match dequeued {
                // SAFETY: as above.
                Dequeued::System(Signal::Stop) => unsafe { self.mailbox.close() },
                Dequeued::User(_) if self.mailbox.is_closed() => {
                    self.dead_letters.fetch_add(1, Ordering::Relaxed);
                }
                Dequeued::User(m) => behaviour(m),
                Dequeued::Empty | Dequeued::Retry => {
                    self.running.store(false, Ordering::Relaxed);
                    // SAFETY: as above; after Idle we touch nothing.
                    return match unsafe { self.mailbox.release() } {
                        Release::Idle => RunOutcome::Done,
                        Release::Reschedule => RunOutcome::Yield,
                    };
                }
            }
        };
        self.running.store(false, Ordering::Relaxed);
        outcome
    }
}
