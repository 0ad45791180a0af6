//! Typed arena indices (hops, dedup slots): an index stored as its bitwise complement in
//! a `NonZeroU32`, so that `Option<Id>` is one u32 and an index can never be confused
//! with another arena's (or with a sentinel, as the raw u32s it replaced could).

/// Defines `$name`, an index into an arena of fewer than `u32::MAX - 1` entries. The two
/// top indices are left out: the complement of every valid index is 2 or more, so a
/// packed link (see [`crate::engine::hops::CauseLink`]) has 0 and 1 free for its own
/// non-index states.
macro_rules! arena_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) struct $name(std::num::NonZeroU32);

        impl $name {
            /// Indices at or above this are not ids (their complements, 0 and 1, are left free).
            pub(crate) const LIMIT: u32 = u32::MAX - 1;

            #[inline]
            pub(crate) fn new(index: u32) -> $name {
                debug_assert!(index < Self::LIMIT);
                $name(std::num::NonZeroU32::new(!index).unwrap_or(std::num::NonZeroU32::MIN))
            }

            /// A usize index from an arena length or position.
            #[inline]
            pub(crate) fn at(index: usize) -> $name {
                $name::new(index as u32)
            }

            /// The arena index.
            #[inline]
            pub(crate) fn index(self) -> usize {
                !self.0.get() as usize
            }

            /// The stored bits (the complement of the index; never 0 or 1).
            #[inline]
            #[allow(dead_code)] // Not every id is packed into a link.
            pub(crate) fn bits(self) -> u32 {
                self.0.get()
            }

            /// The id whose [`Self::bits`] are `bits`, if they are some id's.
            #[inline]
            #[allow(dead_code)]
            pub(crate) fn from_bits(bits: u32) -> Option<$name> {
                if bits < 2 {
                    None
                } else {
                    std::num::NonZeroU32::new(bits).map($name)
                }
            }
        }

        const _: () = assert!(std::mem::size_of::<Option<$name>>() == 4);
    };
}

arena_id!(
    /// Index of a hop in the engine's arena (an arena of 2^32 - 2 hops of 64 bytes is
    /// out of reach).
    HopId
);

arena_id!(
    /// Index of a pending-decision slot in [`crate::engine::dedup::Slots`].
    SlotId
);
