//! A queue that hands out its least entry first, cheap while it is small.
//!
//! The engine's queues of what ends next (a database's running queries) mostly hold a few
//! dozen entries, and each wake-up takes the least one. A binary heap pays a sift down the
//! whole tree for every removal; a sorted ring pays nothing to remove the least (it is at the
//! front) and, to insert, a binary search and a shift of the entries after the newcomer,
//! which for work that starts later and mostly ends later is few or none. The ring's shift
//! grows with its length, so past [`SORTED_MAX`] entries the queue turns into a heap, and
//! back into a ring once it has fallen to [`SORTED_AGAIN`] (the gap keeps a queue that
//! hovers near one size from turning back and forth).
//!
//! Invariant: entries are unique under `Ord` (callers break ties with a start order), so the
//! order they leave in is the same in either form: which form the queue is in never changes
//! a result.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Entries above which the sorted ring turns into a heap.
pub(crate) const SORTED_MAX: usize = 64;
/// Entries at which a heap turns back into the sorted ring.
pub(crate) const SORTED_AGAIN: usize = 16;

/// A min-queue of unique entries: [`MinQueue::pop`] takes the least.
#[derive(Debug)]
pub(crate) struct MinQueue<T> {
    /// The entries, least first, while there are at most [`SORTED_MAX`] (empty otherwise).
    sorted: VecDeque<T>,
    /// The entries while there are more (empty otherwise).
    heap: BinaryHeap<Reverse<T>>,
    /// Which of the two holds the entries.
    in_heap: bool,
}

impl<T: Ord + Copy> Default for MinQueue<T> {
    fn default() -> Self {
        MinQueue {
            sorted: VecDeque::new(),
            heap: BinaryHeap::new(),
            in_heap: false,
        }
    }
}

impl<T: Ord + Copy> MinQueue<T> {
    pub fn len(&self) -> usize {
        if self.in_heap {
            self.heap.len()
        } else {
            self.sorted.len()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The least entry.
    pub fn peek(&self) -> Option<&T> {
        if self.in_heap {
            self.heap.peek().map(|Reverse(least)| least)
        } else {
            self.sorted.front()
        }
    }

    pub fn push(&mut self, entry: T) {
        if self.in_heap {
            self.heap.push(Reverse(entry));
            return;
        }
        if self.sorted.len() == SORTED_MAX {
            // A sorted sequence is already a valid min-heap, so this only moves entries.
            self.heap.extend(self.sorted.drain(..).map(Reverse));
            self.in_heap = true;
            self.heap.push(Reverse(entry));
            return;
        }
        // Mostly at the back: the newcomer ends after the entries already in.
        match self.sorted.back() {
            Some(last) if entry < *last => {
                let at = self.sorted.partition_point(|e| *e < entry);
                self.sorted.insert(at, entry);
            }
            _ => self.sorted.push_back(entry),
        }
    }

    /// Takes the least entry.
    pub fn pop(&mut self) -> Option<T> {
        if !self.in_heap {
            return self.sorted.pop_front();
        }
        let Reverse(least) = self.heap.pop()?;
        if self.heap.len() <= SORTED_AGAIN {
            self.sorted.extend(self.heap.drain().map(|Reverse(entry)| entry));
            self.sorted.make_contiguous().sort_unstable();
            self.in_heap = false;
        }
        Some(least)
    }

    /// Room for entries without growing, in both forms (what the queue holds in memory).
    pub fn capacity(&self) -> usize {
        self.sorted.capacity() + self.heap.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The queue's order against a plain sorted reference, through every form change.
    fn check(ops: &[(bool, u32)]) {
        let mut queue = MinQueue::default();
        let mut reference = std::collections::BTreeSet::new();
        for (seq, &(push, value)) in (0u32..).zip(ops) {
            if push {
                let entry = (value, seq); // unique: ties broken by the order pushed
                queue.push(entry);
                reference.insert(entry);
            } else {
                assert_eq!(queue.pop(), reference.pop_first());
            }
            assert_eq!(queue.len(), reference.len());
            assert_eq!(queue.peek(), reference.first());
        }
        while let Some(least) = reference.pop_first() {
            assert_eq!(queue.pop(), Some(least));
        }
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn entries_leave_least_first_through_the_turn_into_a_heap_and_back() {
        // 200 pushes in a scrambled order (past SORTED_MAX: a heap), then pops down to empty
        // (back to the ring at SORTED_AGAIN), then again.
        let mut ops: Vec<(bool, u32)> = (0..200).map(|i| (true, (i * 7919) % 211)).collect();
        ops.extend((0..190).map(|_| (false, 0)));
        ops.extend((0..100).map(|i| (true, i)));
        check(&ops);
        let mut queue = MinQueue::default();
        for i in 0..=SORTED_MAX as u32 {
            queue.push(i);
        }
        assert!(queue.in_heap, "past SORTED_MAX entries it is a heap");
        while queue.len() > SORTED_AGAIN {
            queue.pop();
        }
        assert!(!queue.in_heap, "at SORTED_AGAIN it is a ring again");
    }

    proptest! {
        #[test]
        fn the_queue_leaves_in_the_order_a_sorted_set_does(
            ops in proptest::collection::vec((proptest::bool::weighted(0.6), 0u32..50), 0..400)
        ) {
            check(&ops);
        }
    }
}
