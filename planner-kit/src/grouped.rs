//! Lists of item numbers grouped by a key, all in one array: what a packer that walks time
//! step by step keeps per step (the buffers starting or ending there), where a vector per
//! step would cost an allocation each (a million buffers: a million small vectors, made and
//! freed in a fraction of a second that a one-second budget cannot spare).

/// Items grouped by key, each group in the order the items were given. Built by counting the
/// keys and placing each item after the ones before it: O(items + keys).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grouped {
    /// `keys + 1` bounds: group `k` is `items[bounds[k]..bounds[k + 1]]`.
    bounds: Vec<u32>,
    items: Vec<u32>,
}

impl Grouped {
    /// The `(item, key)` pairs grouped under `keys` keys (each key below `keys`). The pairs
    /// are walked twice, once to count and once to place, hence `Clone`.
    pub fn by_key<I>(pairs: I, keys: usize) -> Grouped
    where
        I: Iterator<Item = (u32, usize)> + Clone,
    {
        let mut bounds = vec![0u32; keys + 1];
        for (_, key) in pairs.clone() {
            bounds[key + 1] += 1;
        }
        for key in 0..keys {
            bounds[key + 1] += bounds[key];
        }
        let mut next = bounds.clone();
        let mut items = vec![0u32; bounds[keys] as usize];
        for (item, key) in pairs {
            items[next[key] as usize] = item;
            next[key] += 1;
        }
        Grouped { bounds, items }
    }

    /// The items under `key`, in the order they were given.
    #[inline]
    pub fn get(&self, key: usize) -> &[u32] {
        &self.items[self.bounds[key] as usize..self.bounds[key + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_grouped_by_key_in_the_order_given() {
        let grouped = Grouped::by_key([(7, 2), (3, 0), (9, 2), (4, 2)].into_iter(), 4);
        assert_eq!(grouped.get(0), &[3]);
        assert_eq!(grouped.get(1), &[] as &[u32]);
        assert_eq!(grouped.get(2), &[7, 9, 4]);
        assert_eq!(grouped.get(3), &[] as &[u32]);
    }
}
