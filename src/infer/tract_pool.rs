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
//! from it), which suits the daemon's long-lived pipeline threads. A thread
//! that asks for a second thread count gets a private pool of that size.

use std::cell::RefCell;
use std::sync::Arc;
use tract_linalg::multithread::Executor;

thread_local! {
    /// The pools this thread has used, by thread count.
    static POOLS: RefCell<Vec<(usize, Executor)>> = const { RefCell::new(Vec::new()) };
}

/// The executor for running a model on `threads` threads from the calling
/// thread; `None` for one thread (tract then runs every node on the caller).
pub fn executor(threads: usize) -> Option<Executor> {
    if threads <= 1 {
        return None;
    }
    POOLS.with_borrow_mut(|pools| {
        if let Some((_, executor)) = pools.iter().find(|(n, _)| *n == threads) {
            return Some(executor.clone());
        }
        let executor = build(threads, pools.is_empty());
        pools.push((threads, executor.clone()));
        Some(executor)
    })
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
}
