//! A pool of interned values (strings, byte strings): each distinct value is stored once
//! and named by a small id, so a table that repeats the same values (the same function
//! names, module paths and build ids in every process) grows with the distinct values,
//! not with its rows.

use rustc_hash::FxHashMap;
use std::hash::Hash;
use std::sync::Arc;

/// Interned values of type `T`, each stored once, by id (`0..len`, in order of first
/// interning). Values are never removed.
#[derive(Debug)]
pub(crate) struct Pool<T: ?Sized> {
    /// Values by id.
    values: Vec<Arc<T>>,
    /// Id of each value (the same allocation as in `values`).
    ids: FxHashMap<Arc<T>, u32>,
}

impl<T: ?Sized> Clone for Pool<T> {
    fn clone(&self) -> Self {
        Pool {
            values: self.values.clone(),
            ids: self.ids.clone(),
        }
    }
}

impl<T: ?Sized> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            values: Vec::new(),
            ids: FxHashMap::default(),
        }
    }
}

impl<T: ?Sized + Eq + Hash> Pool<T>
where
    for<'a> Arc<T>: From<&'a T>,
{
    /// The id of `v`, added to the pool if new.
    pub(crate) fn intern(&mut self, v: &T) -> u32 {
        if let Some(&id) = self.ids.get(v) {
            return id;
        }
        let id = u32::try_from(self.values.len()).expect("fewer than 2^32 distinct values");
        let a: Arc<T> = Arc::from(v);
        self.values.push(a.clone());
        self.ids.insert(a, id);
        id
    }

    /// The value of `id` (an id this pool gave).
    pub(crate) fn get(&self, id: u32) -> &T {
        &self.values[id as usize]
    }

    /// Number of distinct values.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Pool;
    use std::sync::Arc;

    #[test]
    fn equal_values_get_one_id_and_one_allocation() {
        let mut p: Pool<str> = Pool::default();
        let a = p.intern("libc.so.6");
        let b = p.intern("main");
        let owned = String::from("libc.so.6");
        assert_eq!(p.intern(&owned), a);
        assert_ne!(a, b);
        assert_eq!((p.get(a), p.get(b)), ("libc.so.6", "main"));
        assert_eq!(p.len(), 2);
        // The map and the list share the allocation: two references, not two copies.
        assert_eq!(Arc::strong_count(&p.values[a as usize]), 2);
        let mut bytes: Pool<[u8]> = Pool::default();
        let id = bytes.intern(&[1, 2, 3]);
        assert_eq!(bytes.intern(&[1, 2, 3][..]), id);
        assert_eq!(bytes.get(id), &[1, 2, 3]);
    }
}
