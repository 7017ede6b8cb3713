//! Pairs two kinds of arrival, first come first served: jobs with free worker slots (the queue),
//! task requests with runner offers (the broker). Whichever side arrives first waits.

use std::collections::VecDeque;

pub struct Rendezvous<L, R> {
    left: VecDeque<L>,
    right: VecDeque<R>,
}

impl<L, R> Default for Rendezvous<L, R> {
    fn default() -> Self {
        Self {
            left: VecDeque::new(),
            right: VecDeque::new(),
        }
    }
}

impl<L, R> Rendezvous<L, R> {
    /// Adds a left item; returns a pair when a right item was waiting.
    pub fn push_left(&mut self, l: L) -> Option<(L, R)> {
        match self.right.pop_front() {
            Some(r) => Some((l, r)),
            None => {
                self.left.push_back(l);
                None
            }
        }
    }

    /// Adds a right item; returns a pair when a left item was waiting.
    pub fn push_right(&mut self, r: R) -> Option<(L, R)> {
        match self.left.pop_front() {
            Some(l) => Some((l, r)),
            None => {
                self.right.push_back(r);
                None
            }
        }
    }

    /// Puts a left item back at the head (its pairing could not be delivered).
    pub fn unshift_left(&mut self, l: L) {
        self.left.push_front(l);
    }

    pub fn left_len(&self) -> usize {
        self.left.len()
    }

    pub fn right_len(&self) -> usize {
        self.right.len()
    }

    /// Removes waiting left items that fail `keep`; returns them.
    pub fn drain_left(&mut self, keep: impl Fn(&L) -> bool) -> Vec<L> {
        let (kept, gone): (VecDeque<L>, VecDeque<L>) = self.left.drain(..).partition(|l| keep(l));
        self.left = kept;
        gone.into()
    }

    /// Removes waiting right items that fail `keep`.
    pub fn retain_right(&mut self, keep: impl Fn(&R) -> bool) {
        self.right.retain(|r| keep(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_in_arrival_order() {
        let mut q: Rendezvous<u32, char> = Rendezvous::default();
        assert!(q.push_left(1).is_none());
        assert!(q.push_left(2).is_none());
        assert_eq!(q.push_right('a'), Some((1, 'a')));
        assert_eq!(q.left_len(), 1);
        assert_eq!(q.push_right('b'), Some((2, 'b')));
        assert!(q.push_right('c').is_none());
        assert_eq!(q.push_left(3), Some((3, 'c')));
        q.push_left(4);
        q.push_left(5);
        let gone = q.drain_left(|l| *l != 4);
        assert_eq!(gone, vec![4]);
        assert_eq!(q.left_len(), 1);
    }
}
