//! Each thread's own copy of shared state that every event reads and that rarely changes — the
//! rule profiles ([`super::profiles`]) and the schema catalogues ([`super::catalogues`]).
//!
//! Every event reads them, from every scoring thread. Read through a lock, or by cloning a
//! shared `Arc`, each read writes a cache line all those threads share (the lock's count, the
//! reference count), and with many workers that line moving between cores costs more than the
//! lookup (two threads: ~0.39 µs against 0.04 µs per lookup, see `CHANGELOG.md`). So a
//! store carries a [`Stamp`] — an id unique in the process and a generation it bumps after every
//! change — and [`read`] gives the caller this thread's copy of the store, taken again only when
//! the generation moved. A read then touches one shared atomic that no one writes between
//! changes, and whatever reference counts the copy holds are this thread's alone.
//!
//! A thread keeps copies of at most [`COPIES_PER_THREAD`] stores (a daemon has a few; tests make
//! many), dropping the oldest. Where there can be no copy — the thread is exiting, or a read is
//! nested inside another on the same thread — [`read`] says so (`None`) and the caller reads the
//! shared state instead.

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many stores' copies one thread keeps.
pub(crate) const COPIES_PER_THREAD: usize = 8;

/// A store's identity and version, for its copies in each thread.
#[derive(Debug)]
pub(crate) struct Stamp {
    /// Unique in the process: names this store's copy in each thread.
    id: u64,
    /// Bumped after every change of the store; a copy of an older generation is taken again.
    generation: AtomicU64,
}

impl Stamp {
    /// A stamp for a new store.
    pub(crate) fn new() -> Stamp {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Stamp {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            generation: AtomicU64::new(0),
        }
    }

    /// The store changed: every thread takes its copy again at its next read. Call it after the
    /// change is visible to [`read`]'s `take`.
    pub(crate) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The current generation.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

struct Copy {
    store: u64,
    generation: u64,
    value: Box<dyn Any>,
}

thread_local! {
    static COPIES: RefCell<Vec<Copy>> = const { RefCell::new(Vec::new()) };
}

/// `look` applied to this thread's copy of the store stamped `stamp`, taken with `take` when
/// the thread has none of the current generation. `None` when there is no copy to read (the
/// thread is exiting, a read is nested in another on this thread, or `take` gave none): read
/// the shared state instead. A change between reading the generation and `take` only makes the
/// next read take the copy again.
pub(crate) fn read<T: 'static, R>(
    stamp: &Stamp,
    take: impl FnOnce() -> Option<T>,
    look: impl FnOnce(&T) -> R,
) -> Option<R> {
    let generation = stamp.generation();
    COPIES
        .try_with(|cell| {
            let mut copies = cell.try_borrow_mut().ok()?;
            let found = copies.iter().position(|c| c.store == stamp.id);
            let at = match found {
                Some(i) if copies[i].generation == generation => i,
                Some(i) => {
                    copies[i] = Copy {
                        store: stamp.id,
                        generation,
                        value: Box::new(take()?),
                    };
                    i
                }
                None => {
                    let copy = Copy {
                        store: stamp.id,
                        generation,
                        value: Box::new(take()?),
                    };
                    if copies.len() >= COPIES_PER_THREAD {
                        copies.remove(0);
                    }
                    copies.push(copy);
                    copies.len() - 1
                }
            };
            copies[at].value.downcast_ref::<T>().map(look)
        })
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_copy_is_taken_once_per_generation_and_store() {
        let (a, b) = (Stamp::new(), Stamp::new());
        let takes = Cell::new(0);
        let take = |v: u32| {
            takes.set(takes.get() + 1);
            Some(v)
        };
        assert_eq!(read(&a, || take(1), |v| *v), Some(1));
        assert_eq!(
            read(&a, || take(2), |v| *v),
            Some(1),
            "same generation: same copy"
        );
        assert_eq!(
            read(&b, || take(3), |v| *v),
            Some(3),
            "another store: its own copy"
        );
        a.changed();
        assert_eq!(
            read(&a, || take(4), |v| *v),
            Some(4),
            "a change: a new copy"
        );
        assert_eq!(read(&b, || take(5), |v| *v), Some(3));
        assert_eq!(takes.get(), 3);
        // Another thread takes its own copy of the same generation.
        let other = std::thread::scope(|s| s.spawn(|| read(&a, || Some(6u32), |v| *v)).join());
        assert_eq!(other.unwrap(), Some(6));
        assert_eq!(read(&a, || take(7), |v| *v), Some(4));
    }

    #[test]
    fn without_a_copy_the_caller_reads_the_shared_state() {
        let (a, b) = (Stamp::new(), Stamp::new());
        assert_eq!(
            read::<u32, u32>(&a, || None, |v| *v),
            None,
            "take gave none"
        );
        // A read nested in another on the same thread has no copy to read.
        let nested = read(&a, || Some(1u32), |_| read(&b, || Some(2u32), |v| *v));
        assert_eq!(nested, Some(None));
        // Old stores' copies make room for new ones.
        let stamps: Vec<Stamp> = (0..COPIES_PER_THREAD + 2).map(|_| Stamp::new()).collect();
        for (i, s) in stamps.iter().enumerate() {
            assert_eq!(read(s, || Some(i), |v| *v), Some(i));
        }
        let count = COPIES.with_borrow(|c| c.len());
        assert_eq!(count, COPIES_PER_THREAD);
        assert_eq!(
            read(&stamps[0], || Some(99usize), |v| *v),
            Some(99),
            "taken again"
        );
    }
}
