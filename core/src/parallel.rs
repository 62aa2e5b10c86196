//! Work spread over every core, results in the input's order: decoding a list's release
//! Secrets and parsing their manifests, the two costs of building the index.

/// Maps `items` with `f` on up to every core, giving each thread at least `per_thread` items.
/// Each thread starts from its own `state()` (an interner, say), so what it builds is allocated
/// on that thread and shares nothing with the others. The results come back in the order of
/// `items`. Items are dealt to the threads in turn, so a run of large ones is shared out.
///
/// A panic in `f` is a bug (the decoders and parsers never panic on input; they are fuzzed):
/// it is raised again here, for the caller's task to report, never swallowed.
pub fn map<T: Send, S, R: Send>(
    items: Vec<T>,
    per_thread: usize,
    state: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, T) -> R + Sync,
) -> Vec<R> {
    let len = items.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(len.div_ceil(per_thread.max(1)))
        .max(1);
    let run = |part: Vec<T>| {
        let mut state = state();
        part.into_iter()
            .map(|item| f(&mut state, item))
            .collect::<Vec<R>>()
    };
    if threads == 1 {
        return run(items);
    }
    let mut parts: Vec<Vec<T>> = (0..threads)
        .map(|_| Vec::with_capacity(len.div_ceil(threads)))
        .collect();
    for (n, item) in items.into_iter().enumerate() {
        parts[n % threads].push(item);
    }
    let done: Vec<Vec<R>> = std::thread::scope(|scope| {
        let run = &run;
        let workers: Vec<_> = parts
            .into_iter()
            .map(|part| scope.spawn(move || run(part)))
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut done: Vec<std::vec::IntoIter<R>> = done.into_iter().map(Vec::into_iter).collect();
    (0..len).filter_map(|n| done[n % threads].next()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn each_thread_keeps_its_own_state() {
        // Every item sees how many items its thread handled before it: the counts restart at
        // zero on every thread and add up to the items' number.
        let seen = map(
            (0..64).collect(),
            1,
            || 0usize,
            |count, _: usize| {
                *count += 1;
                *count
            },
        );
        let threads = seen.iter().filter(|&&count| count == 1).count();
        assert!(threads >= 1);
        assert_eq!(seen.len(), 64);
        // Items dealt in turn: thread t's k-th item is item t + k * threads, counted k + 1.
        for (n, count) in seen.iter().enumerate() {
            assert_eq!(*count, n / threads + 1, "item {n} with {threads} threads");
        }
    }

    #[test]
    fn few_items_stay_on_one_thread() {
        let threads = map(
            (0..10).collect(),
            16,
            || std::thread::current().id(),
            |id, _: usize| *id,
        );
        assert!(threads.iter().all(|id| *id == threads[0]));
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
