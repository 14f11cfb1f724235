//! Bounded parallel work on scoped threads, for the device builds' jobs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of each of `items`, on at most as many threads as the machine has cores (and no more
/// than there are items), each thread taking the next item in order. The results come in the
/// items' order, `None` for an item that no thread finished.
pub(crate) fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<Option<R>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let result = f(item);
                    if let Ok(mut slot) = results[i].lock() {
                        *slot = Some(result);
                    }
                }
            });
        }
    });
    results
        .into_iter()
        .map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_in_the_items_order() {
        let items: Vec<u64> = (0..100).collect();
        let squares = super::map(&items, |&i| i * i);
        assert_eq!(
            squares,
            items.iter().map(|i| Some(i * i)).collect::<Vec<_>>()
        );
        assert!(super::map(&[] as &[u8], |_| ()).is_empty());
    }
}
