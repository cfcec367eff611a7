//! Index newtypes of the schema compiler and runtime, so an expression, a compiler core, a
//! runtime core and an automaton can no longer be mixed up (they were all `u32`).
//!
//! Each is a `#[repr(transparent)]` `u32` with its numeric casts in one place (`new`, `index`)
//! and `Vec`/slice indexing by the id itself. Sentinels are `Option<Id>` where that costs
//! nothing; inside the runtime's hot `Copy` state, where `Option<RtCoreId>` would take 8 bytes
//! instead of 4 and grow every alternative from 32 to 40 bytes (measured by the test below),
//! the id's own `NONE` is used instead (see `runtime/state.rs`).

macro_rules! ids {
    ($($(#[$m:meta])* $name:ident;)*) => {$(
        $(#[$m])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub(crate) struct $name(u32);

        impl $name {
            /// A value no real id has (`u32::MAX`), for the runtime state's sentinels.
            #[allow(dead_code)]
            pub(crate) const NONE: $name = $name(u32::MAX);

            /// The id of position `i`.
            #[inline]
            pub(crate) fn new(i: usize) -> $name {
                debug_assert!(i < u32::MAX as usize, "{} overflow", stringify!($name));
                $name(i as u32)
            }

            /// The position this id names (indexing takes the id itself; this is for the
            /// few places that need the number).
            #[inline]
            #[allow(dead_code)]
            pub(crate) fn index(self) -> usize {
                self.0 as usize
            }

            /// The raw value, for the runtime's packed progress words.
            #[inline]
            #[allow(dead_code)]
            pub(crate) fn to_word(self) -> u32 {
                self.0
            }

            /// The id a packed progress word holds.
            #[inline]
            #[allow(dead_code)]
            pub(crate) fn from_word(w: u32) -> $name {
                $name(w)
            }
        }

        impl<T> std::ops::Index<$name> for [T] {
            type Output = T;
            #[inline]
            fn index(&self, id: $name) -> &T {
                &self[id.0 as usize]
            }
        }

        impl<T> std::ops::IndexMut<$name> for [T] {
            #[inline]
            fn index_mut(&mut self, id: $name) -> &mut T {
                &mut self[id.0 as usize]
            }
        }

        impl<T> std::ops::Index<$name> for Vec<T> {
            type Output = T;
            #[inline]
            fn index(&self, id: $name) -> &T {
                &self[id.0 as usize]
            }
        }

        impl<T> std::ops::IndexMut<$name> for Vec<T> {
            #[inline]
            fn index_mut(&mut self, id: $name) -> &mut T {
                &mut self[id.0 as usize]
            }
        }
    )*};
}

ids! {
    /// An expression of the compiler; in the runtime [`Program`](super::compile::Program),
    /// the node (union of runtime cores) of that expression.
    ExprId;
    /// A typed core of the compiler (before finalisation).
    CoreId;
    /// A finalised core of the runtime [`Program`](super::compile::Program).
    RtCoreId;
    /// A string automaton (shared by the compiler and the program).
    DfaId;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_index_what_they_name() {
        let v: Vec<&str> = "a b c".split(' ').collect();
        assert_eq!(v[ExprId::new(2)], "c");
        assert_eq!(v[..][ExprId::new(1)], "b");
        assert_eq!(DfaId::new(1).index(), 1);
        assert!(CoreId::new(0) < CoreId::new(1));
        assert_eq!(RtCoreId::from_word(RtCoreId::new(7).to_word()), RtCoreId::new(7));
        assert_ne!(RtCoreId::NONE, RtCoreId::new(0));
        // Newtypes cost nothing, and `Option` of one would cost a word.
        assert_eq!(std::mem::size_of::<ExprId>(), 4);
        assert_eq!(std::mem::size_of::<Option<RtCoreId>>(), 8);
    }
}
