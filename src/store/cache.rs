//! A least-recently-used cache of loaded models, bounded by count and bytes.

use std::sync::Arc;

pub struct Cache<T> {
    max_items: usize,
    max_bytes: u64,
    /// Least recently used first.
    items: Vec<(String, Arc<T>, u64)>,
}

impl<T> Cache<T> {
    pub fn new(max_items: usize, max_bytes: u64) -> Self {
        Cache { max_items: max_items.max(1), max_bytes, items: Vec::new() }
    }

    pub fn get(&mut self, name: &str) -> Option<Arc<T>> {
        let i = self.items.iter().position(|(n, _, _)| n == name)?;
        let item = self.items.remove(i);
        let value = item.1.clone();
        self.items.push(item);
        Some(value)
    }

    /// Inserts `value` as most recent and evicts least recent items until
    /// both bounds hold (the new item itself is never evicted). Returns the
    /// evicted names.
    pub fn insert(&mut self, name: &str, value: Arc<T>, bytes: u64) -> Vec<String> {
        self.items.retain(|(n, _, _)| n != name);
        self.items.push((name.to_string(), value, bytes));
        let mut evicted = Vec::new();
        while self.items.len() > 1
            && (self.items.len() > self.max_items || self.items.iter().map(|i| i.2).sum::<u64>() > self.max_bytes)
        {
            evicted.push(self.items.remove(0).0);
        }
        evicted
    }

    pub fn names(&self) -> Vec<&str> {
        self.items.iter().map(|(n, _, _)| n.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_recently_used_goes_first_when_over_count() {
        let mut c = Cache::new(2, u64::MAX);
        c.insert("a", Arc::new(1), 1);
        c.insert("b", Arc::new(2), 1);
        assert!(c.get("a").is_some());
        assert_eq!(c.insert("c", Arc::new(3), 1), vec!["b"]);
        assert_eq!(c.names(), vec!["a", "c"]);
    }

    #[test]
    fn byte_bound_evicts_but_never_the_newest() {
        let mut c = Cache::new(10, 100);
        c.insert("a", Arc::new(1), 60);
        assert_eq!(c.insert("b", Arc::new(2), 60), vec!["a"]);
        assert_eq!(c.insert("huge", Arc::new(3), 500), vec!["b"]);
        assert_eq!(c.names(), vec!["huge"]);
    }
}
