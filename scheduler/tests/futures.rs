//! Futures: spawn, join (blocking and as a future), wakers, block_on.
#![cfg(not(loom))] // the API is not built under loom (see src/sync.rs)
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use proscenium_scheduler::{block_on, current_worker, Handle, JoinError};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

#[test]
fn spawn_and_wait() {
    let s = support::scheduler(2);
    let h = s.handle().spawn(async { current_worker().is_some() });
    assert_eq!(h.wait(), Ok(true));
}

#[test]
fn join_handles_are_futures_for_any_executor() {
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let n = if cfg!(miri) { 10 } else { 1_000 };
    let total = block_on(async move {
        let mut sum = 0u64;
        let joins: Vec<_> = (0..n).map(|i| handle.spawn(async move { i })).collect();
        for j in joins {
            sum += j.await.unwrap();
        }
        sum
    });
    assert_eq!(total, (0..n).sum::<u64>());
}

#[test]
fn tasks_spawn_tasks_and_await_them_on_the_scheduler() {
    let s = support::scheduler(2);
    let handle = s.handle().clone();
    let outer = handle.spawn(async {
        let h = Handle::current().expect("on a worker");
        let inner: Vec<_> = (0..100u32).map(|i| h.spawn(async move { i * 2 })).collect();
        let mut sum = 0;
        for j in inner {
            sum += j.await.unwrap();
        }
        sum
    });
    assert_eq!(outer.wait(), Ok((0..100u32).map(|i| i * 2).sum()));
}

/// A one-shot channel with a waker slot, to wake tasks from outside.
#[derive(Default)]
struct Slot {
    value: Option<u32>,
    waker: Option<Waker>,
}

struct Recv(Arc<Mutex<Slot>>);

impl Future for Recv {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        let mut slot = self.0.lock().unwrap();
        match slot.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

fn send(slot: &Arc<Mutex<Slot>>, v: u32) {
    let waker = {
        let mut s = slot.lock().unwrap();
        s.value = Some(v);
        s.waker.take()
    };
    if let Some(w) = waker {
        w.wake();
    }
}

#[test]
fn a_task_woken_from_another_thread_runs_again() {
    let s = support::scheduler(2);
    let rounds = if cfg!(miri) { 10 } else { 10_000 };
    let slot = Arc::new(Mutex::new(Slot::default()));
    let ack = Arc::new(Mutex::new(Slot::default()));
    let (slot2, ack2) = (slot.clone(), ack.clone());
    let task = s.handle().spawn(async move {
        let mut sum = 0u64;
        for _ in 0..rounds {
            let v = Recv(slot2.clone()).await;
            sum += u64::from(v);
            send(&ack2, v);
        }
        sum
    });
    block_on(async {
        for i in 0..rounds {
            send(&slot, i);
            assert_eq!(Recv(ack.clone()).await, i);
        }
    });
    assert_eq!(task.wait(), Ok((0..rounds).map(u64::from).sum()));
}

/// Wakes itself `n` times from inside its own poll.
struct SelfWake(u32);

impl Future for SelfWake {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn a_task_woken_during_its_own_poll_is_polled_again() {
    let s = support::scheduler(1);
    let h = s.handle().spawn(SelfWake(1_000));
    assert_eq!(h.wait(), Ok(()));
}

#[test]
fn tasks_left_at_quiesce_resolve_as_cancelled() {
    let s = support::scheduler(1);
    let never = Arc::new(Mutex::new(Slot::default()));
    let n2 = never.clone();
    let pending = s.handle().spawn(Recv(n2));
    // The task has polled (and registered its waker) once the slot has one.
    support::wait_until("task polled", || never.lock().unwrap().waker.is_some());
    let report = s.quiesce(Instant::now() + Duration::from_secs(10));
    assert!(report.drained);
    // The only reference left to the task is the waker in `never`.
    never.lock().unwrap().waker = None;
    assert_eq!(pending.wait(), Err(JoinError::Cancelled));
}

#[test]
fn detached_tasks_run() {
    let s = support::scheduler(2);
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..100 {
        let tx = tx.clone();
        s.handle()
            .spawn_detached(async move { tx.send(i).unwrap() });
    }
    let mut got: Vec<i32> = (0..100)
        .map(|_| rx.recv_timeout(support::FAILSAFE).unwrap())
        .collect();
    got.sort_unstable();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}
