//! Work spread over every core, results in the input's order: decoding a list's release
//! Secrets and parsing their manifests, the two costs of building the index.
//!
//! The work runs on rayon's pool, whose threads live as long as the process: what a thread
//! keeps for its next call (its allocator's pages, its zstd compressor, see
//! [`packed`](crate::packed)) is there again for the next part of a list. Threads made for each
//! part started from nothing every time.

use rayon::prelude::*;

/// Maps `items` with `f` on up to every core, at least `per_task` items to a task. Each task
/// starts from its own `state()` (an interner, say), so what it builds is allocated on the
/// thread that built it and shares nothing with other tasks. The results come back in the
/// order of `items`. Fewer than two tasks' worth run on the calling thread.
///
/// A panic in `f` is a bug (the decoders and parsers never panic on input; they are fuzzed):
/// it is raised again here, for the caller's task to report, never swallowed.
pub fn map<T: Send, S, R: Send>(
    items: Vec<T>,
    per_task: usize,
    state: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, T) -> R + Sync + Send,
) -> Vec<R> {
    let per_task = per_task.max(1);
    if items.len() < 2 * per_task || rayon::current_num_threads() == 1 {
        let mut state = state();
        return items.into_iter().map(|item| f(&mut state, item)).collect();
    }
    items
        .into_par_iter()
        .with_min_len(per_task)
        .map_init(state, f)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn results_come_back_in_the_inputs_order() {
        for len in [0, 1, 2, 3, 7, 100, 1001] {
            let items: Vec<usize> = (0..len).collect();
            let squares = map(items, 1, || (), |_, n| n * n);
            assert_eq!(
                squares,
                (0..len).map(|n| n * n).collect::<Vec<_>>(),
                "{len} items"
            );
        }
    }

    #[test]
    fn each_task_starts_from_its_own_state_and_every_item_is_mapped_once() {
        // Each state has an id and counts the items it saw: per id, the counts run 1, 2, 3...
        // (no state is shared by two tasks at once), and they add up to the items.
        let ids = AtomicUsize::new(0);
        let seen = map(
            (0..1000).collect(),
            8,
            || (ids.fetch_add(1, Ordering::Relaxed), 0usize),
            |(id, count), item: usize| {
                *count += 1;
                (*id, *count, item)
            },
        );
        assert_eq!(
            seen.iter().map(|s| s.2).collect::<Vec<_>>(),
            (0..1000).collect::<Vec<_>>()
        );
        let mut per_state: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (id, count, _) in seen {
            per_state.entry(id).or_default().push(count);
        }
        for (id, mut counts) in per_state {
            counts.sort_unstable();
            assert_eq!(counts, (1..=counts.len()).collect::<Vec<_>>(), "state {id}");
        }
    }

    #[test]
    fn few_items_stay_on_the_calling_thread() {
        let caller = std::thread::current().id();
        let threads = map(
            (0..10).collect(),
            16,
            || (),
            |_, _: usize| std::thread::current().id(),
        );
        assert!(threads.iter().all(|id| *id == caller));
    }

    #[test]
    #[should_panic(expected = "a bug")]
    fn a_panic_in_a_worker_is_raised_again() {
        map(
            (0..100).collect(),
            1,
            || (),
            |_, n: usize| {
                assert!(n != 57, "a bug");
                n
            },
        );
    }
}
