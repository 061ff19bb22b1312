//! tract's thread pools, one per running thread and thread count.
//!
//! A model's nodes hand their shares of work to the pool one node at a time,
//! dozens of times a frame on a detector. A pool that the running thread is
//! not part of takes each node's work away from that thread and wakes it up
//! again when the shares are done: two thread wake-ups a node, which cost
//! more than a small node's whole work. So the first pool a thread asks for
//! counts that thread as its first worker (rayon's `use_current_thread`):
//! the thread runs a share itself, and only the other workers are woken.
//! Such a pool lives as long as the process (rayon cannot release a thread
//! from it), which suits the daemon's long-lived pipeline threads; so that
//! short-lived threads (a tier preloaded and warmed in the background, again
//! at every switch) cannot pile them up, at most [`MAX_JOINED`] threads get
//! one. Any other thread, or a thread that asks for a second thread count,
//! gets a private pool, which ends with the thread.
//!
//! rayon's idle workers go to sleep within microseconds, and waking one
//! costs tens of microseconds, more than many nodes' shares take. So while
//! a model runs on a pool its thread belongs to, the pool's other workers
//! stay awake ([`run`]): each waits for shares by polling the pool, as ONNX
//! Runtime's threads spin between a model's nodes.

use fusiond_tract_ops::tract_linalg::multithread::{multithread_tract_scope, Executor};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The most threads that get a pool of their own for good.
const MAX_JOINED: usize = 4;

/// How many threads got one so far.
static JOINED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The pools this thread has used, by thread count.
    static POOLS: RefCell<Vec<(usize, Executor)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` (a model's run) on `threads` threads: on the calling thread
/// alone for one, else with the calling thread's pool for that count set as
/// tract's executor, the pool's other workers awake until `f` returns.
pub fn run<R>(threads: usize, f: impl FnOnce() -> R) -> R {
    match executor(threads) {
        Some(Executor::MultiThread(pool)) if pool.current_thread_index() == Some(0) => {
            let _awake = Awake::start(&pool);
            multithread_tract_scope(Executor::MultiThread(pool), f)
        }
        Some(executor) => multithread_tract_scope(executor, f),
        None => f(),
    }
}

/// The other workers of a pool the calling thread belongs to, each polling
/// the pool for work until this is dropped (also when the run panics).
struct Awake(Arc<AtomicBool>);

impl Awake {
    fn start(pool: &rayon::ThreadPool) -> Awake {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        // A broadcast job runs on its own worker only: the calling thread's
        // copy returns at once, and no worker can take another's poll
        // (the caller's thread taking one would wait on itself).
        pool.spawn_broadcast(move |ctx| {
            if ctx.index() == 0 {
                return;
            }
            while !flag.load(Ordering::Acquire) {
                if rayon::yield_now() != Some(rayon::Yield::Executed) {
                    std::hint::spin_loop();
                }
            }
        });
        Awake(done)
    }
}

impl Drop for Awake {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The executor for running a model on `threads` threads from the calling
/// thread; `None` for one thread (tract then runs every node on the caller).
fn executor(threads: usize) -> Option<Executor> {
    if threads <= 1 {
        return None;
    }
    POOLS.with_borrow_mut(|pools| {
        if let Some((_, executor)) = pools.iter().find(|(n, _)| *n == threads) {
            return Some(executor.clone());
        }
        let joined = pools.is_empty() && reserve(&JOINED, MAX_JOINED);
        let executor = build(threads, joined);
        pools.push((threads, executor.clone()));
        Some(executor)
    })
}

/// Takes one of `most` places counted by `taken`; `false` when none is left.
fn reserve(taken: &AtomicUsize, most: usize) -> bool {
    taken.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < most).then_some(n + 1)).is_ok()
}

/// A pool of `threads` threads; with `joined`, the calling thread is one of
/// them. A pool that cannot be built in either form is a private one, or
/// else one thread's work (tract's single-thread executor).
fn build(threads: usize, joined: bool) -> Executor {
    let builder = |joined: bool| {
        let b = rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|n| format!("tract-{n}"));
        if joined {
            b.use_current_thread()
        } else {
            b
        }
    };
    let pool = if joined { builder(true).build().or_else(|_| builder(false).build()) } else { builder(false).build() };
    match pool {
        Ok(pool) => Executor::MultiThread(Arc::new(pool)),
        Err(e) => {
            log::warn!("tract: no {threads}-thread pool ({e}); running on one thread");
            Executor::SingleThread
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool_of(e: Option<Executor>) -> Arc<rayon::ThreadPool> {
        match e {
            Some(Executor::MultiThread(pool)) => pool,
            other => panic!("expected a thread pool, got {other:?}"),
        }
    }

    #[test]
    fn the_first_pool_of_a_thread_counts_that_thread_and_others_are_private() {
        std::thread::spawn(|| {
            assert!(executor(1).is_none());
            let two = pool_of(executor(2));
            assert_eq!(two.current_num_threads(), 2);
            assert_eq!(two.current_thread_index(), Some(0), "the caller is the pool's first worker");
            assert!(Arc::ptr_eq(&two, &pool_of(executor(2))), "one pool per thread count");
            let three = pool_of(executor(3));
            assert_eq!(three.current_num_threads(), 3);
            assert_eq!(three.current_thread_index(), None, "a second size is a private pool");
            let on_caller = std::thread::current().id();
            let ran_on = two.install(|| std::thread::current().id());
            assert_eq!(ran_on, on_caller, "work given to the joined pool starts on the caller");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn no_more_than_a_few_threads_keep_a_pool_for_good() {
        let taken = AtomicUsize::new(0);
        let places: Vec<bool> = (0..6).map(|_| reserve(&taken, 4)).collect();
        assert_eq!(places, [true, true, true, true, false, false]);
        assert_eq!(taken.load(Ordering::Acquire), 4);
    }

    #[test]
    fn runs_share_work_with_the_awake_workers_and_let_them_go_after() {
        // A poll that took the caller's thread, or one never told to stop,
        // would hang this test.
        std::thread::spawn(|| {
            for _ in 0..50 {
                let (a, b) = run(2, || {
                    let pool = pool_of(Some(fusiond_tract_ops::tract_linalg::multithread::current_tract_executor()));
                    pool.join(|| (0..1000u64).sum::<u64>(), || (0..2000u64).sum::<u64>())
                });
                assert_eq!((a, b), (499_500, 1_999_000));
            }
            let panicked = std::panic::catch_unwind(|| run(2, || panic!("a failed run")));
            assert!(panicked.is_err());
            let on = run(1, || std::thread::current().id());
            assert_eq!(on, std::thread::current().id());
            // The workers left their polls: work sent to the pool still runs.
            let pool = pool_of(executor(2));
            assert_eq!(pool.install(|| 7), 7);
        })
        .join()
        .unwrap();
    }
}
