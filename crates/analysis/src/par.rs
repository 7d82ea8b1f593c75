//! Independent pieces of work shared out between threads, their results
//! in the order of the work.

use std::sync::Mutex;

/// `f` of each item, in the items' order, computed on up to `threads`
/// threads (on the calling thread alone with 1, or with one item). The
/// threads take the items heaviest first by `weight` (the earliest first
/// among equals), each the next one left when it is done: so one large
/// item started last does not keep the others waiting. A panic in `f` is
/// this call's panic.
pub(crate) fn map<T, R, W, F>(items: Vec<T>, threads: usize, weight: W, f: F) -> Vec<R>
where
    T: Send,
    R: Send,
    W: Fn(&T) -> usize,
    F: Fn(T) -> R + Sync,
{
    let threads = threads.min(items.len());
    if threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let mut work: Vec<(usize, T)> = items.into_iter().enumerate().collect();
    work.sort_by_key(|(i, t)| (std::cmp::Reverse(weight(t)), *i));
    let queue = Mutex::new(work.into_iter());
    let f = &f;
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut got = Vec::new();
                    loop {
                        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                        let Some((i, item)) = next else {
                            return got;
                        };
                        got.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_order_of_the_items_on_any_number_of_threads() {
        let items: Vec<u64> = (0..57).map(|i| (i * 7919) % 101).collect();
        let want: Vec<u64> = items.iter().map(|x| x * x + 1).collect();
        for threads in [1, 2, 3, 8, 100] {
            let seen = std::sync::atomic::AtomicUsize::new(0);
            let got = map(
                items.clone(),
                threads,
                |x| *x as usize,
                |x| {
                    seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    x * x + 1
                },
            );
            assert_eq!(got, want, "{threads} threads");
            assert_eq!(seen.into_inner(), items.len(), "each item once");
        }
        assert!(map(Vec::<u8>::new(), 4, |_| 0, |x| x).is_empty());
    }

    #[test]
    fn the_work_runs_on_several_threads() {
        // Each of two items waits (up to 10 s) for the other to have
        // started: on one thread the first would give up and say so.
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let running = AtomicUsize::new(0);
        let got = map(
            vec![1, 2],
            2,
            |_| 0,
            |x| {
                running.fetch_add(1, SeqCst);
                let start = std::time::Instant::now();
                while running.load(SeqCst) < 2 && start.elapsed().as_secs() < 10 {
                    std::thread::yield_now();
                }
                (x, running.load(SeqCst) == 2)
            },
        );
        assert_eq!(got, vec![(1, true), (2, true)]);
    }

    #[test]
    #[should_panic(expected = "item 3")]
    fn a_panic_in_the_work_is_the_callers() {
        map(
            (0..6).collect(),
            3,
            |_| 0,
            |x: i32| {
                assert!(x != 3, "item {x}");
                x
            },
        );
    }
}
