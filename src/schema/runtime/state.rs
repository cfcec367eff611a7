//! The recogniser's state types: open values ([`Frame`]s, each with its typed lexical
//! progress [`Lex`]) and their alternatives ([`Alt`]s, each with its kind's typed progress).
//!
//! The whole state is what masks are cached by (hashed and compared exactly), and it is
//! copied into the rollback history once per token, so every type here is `Copy` and small:
//! a frame is 40 bytes and an alternative 32 (checked below). An alternative's progress is
//! four words whose meaning depends on its frame's kind; each kind reads and writes them only
//! through its own named view ([`ObjProgress`], [`ArrProgress`], [`StrProgress`],
//! [`KeyProgress`]), so the layout is stated once, here. (A Rust enum of the four views would
//! repeat the frame's kind as a tag in every alternative and grow it to 40 bytes, and every
//! read would match on it.)

use crate::schema::compile::{ExprId, RtCoreId};

/// "None" for a `u32` index in the state (the root alternative's core and value node, the
/// raw-text offset of a frame that owns none, the alternative of a `uniqueItems` entry).
pub(super) const NONE: u32 = u32::MAX;

/// One alternative core still alive for an open value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct Alt {
    /// The core ([`RtCoreId::NONE`] for the root's single alternative).
    pub core: RtCoreId,
    /// The parent's alternatives this one serves, within [`Alt::block`]: bit `i` is the
    /// alternative at position `64 · block + i` of the parent frame.
    pub parents: u64,
    progress: [u32; 4],
    /// Which 64 of the parent's alternatives `parents` addresses. A frame whose parent has
    /// more than 64 alternatives holds one alternative per core and block it serves, so the
    /// common case stays one word and the rare wide union costs a few more alternatives.
    pub block: u16,
    pub alive: bool,
    /// An item alternative from `item ∧ contains`: its survival counts a match.
    pub tag: bool,
}

/// The most alternatives a frame can address as parents (`u16` blocks of 64): a frame over
/// it refuses the value start (far past any schema the compile limits let through).
pub(super) const MAX_PARENTS: usize = 64 << 16;

impl Alt {
    /// A live alternative for `core` serving `parents` (in block 0), with no progress yet.
    pub(super) fn new(core: RtCoreId, parents: u64, tag: bool) -> Alt {
        Alt { core, parents, progress: [0, 0, 0, NONE], block: 0, alive: true, tag }
    }

    /// A live alternative for `core` serving the parent alternative at position `li`
    /// (`li < MAX_PARENTS`).
    pub(super) fn serving(core: RtCoreId, li: usize, tag: bool) -> Alt {
        debug_assert!(li < MAX_PARENTS);
        Alt { block: (li / 64) as u16, ..Alt::new(core, 1 << (li % 64), tag) }
    }

    /// Does this alternative serve the parent alternative at position `li`?
    #[inline]
    pub(super) fn serves(&self, li: usize) -> bool {
        usize::from(self.block) == li / 64 && (self.parents >> (li % 64)) & 1 == 1
    }
}

/// A set of a frame's alternatives (by position), built from the [`Alt::parents`] words of
/// its children: one word per block, inline up to 128 alternatives.
#[derive(Default, Debug)]
pub(super) struct Served(smallvec::SmallVec<[u64; 2]>);

impl Served {
    /// The parents `a` serves.
    pub(super) fn of(a: &Alt) -> Served {
        let mut s = Served::default();
        s.add(a);
        s
    }

    /// Adds the parents `a` serves.
    #[inline]
    pub(super) fn add(&mut self, a: &Alt) {
        let b = usize::from(a.block);
        if self.0.len() <= b {
            self.0.resize(b + 1, 0);
        }
        self.0[b] |= a.parents;
    }

    #[inline]
    pub(super) fn has(&self, li: usize) -> bool {
        self.0.get(li / 64).is_some_and(|w| (w >> (li % 64)) & 1 == 1)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
}

/// What a progress word can hold.
pub(super) trait Word: Copy {
    fn to_word(self) -> u32;
    fn from_word(w: u32) -> Self;
}

impl Word for u32 {
    #[inline]
    fn to_word(self) -> u32 {
        self
    }
    #[inline]
    fn from_word(w: u32) -> u32 {
        w
    }
}

impl Word for ExprId {
    #[inline]
    fn to_word(self) -> u32 {
        ExprId::to_word(self)
    }
    #[inline]
    fn from_word(w: u32) -> ExprId {
        ExprId::from_word(w)
    }
}

/// A named view of an alternative's four progress words: `$get` reads it, `$with` returns the
/// alternative with it written (fields `name: Type = word`).
macro_rules! progress_view {
    ($(#[$m:meta])* $name:ident, $get:ident, $with:ident {
        $($(#[$fm:meta])* $f:ident: $t:ty = $w:literal),* $(,)?
    }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        pub(super) struct $name {
            $($(#[$fm])* pub $f: $t),*
        }

        impl Alt {
            #[inline]
            pub(super) fn $get(&self) -> $name {
                $name { $($f: <$t as Word>::from_word(self.progress[$w])),* }
            }

            #[inline]
            pub(super) fn $with(self, p: $name) -> Alt {
                let mut a = self;
                $(a.progress[$w] = Word::to_word(p.$f);)*
                a
            }
        }
    };
}

progress_view!(
    /// An object alternative.
    ObjProgress, obj, with_obj {
        /// Members so far.
        members: u32 = 0,
        /// Offset in the `bits` arena of its seen-names bitset (one bit per declared name).
        seen: u32 = 1,
        /// Under [`PropertyOrder::Schema`](crate::schema::PropertyOrder::Schema): the lowest
        /// schema order the next declared name may have.
        next_order: u32 = 2,
        /// The node of the value being read (after a key closed; [`ExprId::NONE`] before).
        value: ExprId = 3,
    }
);

progress_view!(
    /// An array alternative.
    ArrProgress, arr, with_arr {
        /// Items so far.
        items: u32 = 0,
        /// Items so far that matched `contains`.
        matches: u32 = 1,
    }
);

progress_view!(
    /// A string alternative.
    StrProgress, str, with_str {
        /// State of the string automaton.
        state: u32 = 0,
        /// Code points so far (for `maxLength` beside the automaton).
        chars: u32 = 1,
    }
);

progress_view!(
    /// A key alternative (one per object alternative of the parent frame).
    KeyProgress, key, with_key {
        /// State of the undeclared-key automaton ([`DEAD`](crate::schema::string::DEAD): no
        /// undeclared key possible).
        extra: u32 = 0,
        /// The declared names (sorted) still matching the key text: `lo..hi`.
        lo: u32 = 1,
        hi: u32 = 2,
        /// Arena index of the object alternative this key belongs to.
        obj: u32 = 3,
    }
);

progress_view!(
    /// A number alternative.
    NumProgress, num, with_num {
        /// State of its constraint's automaton ([`crate::schema::numdfa`]; `NUM_OVER`: none,
        /// decided on the text).
        state: u32 = 0,
    }
);

/// What kind of value a frame is (the tag of [`Lex`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Kind {
    Root,
    Obj,
    Arr,
    Str,
    Key,
    Num,
    Lit,
}

/// Where an object stands between its members.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum ObjPhase {
    /// After `{`: a key or `}`.
    First,
    /// After `,`: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After `:`: the value.
    Value,
    /// After a value: `,` or `}`.
    After,
}

/// Where an array stands between its items.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum ArrPhase {
    /// After `[`: an item or `]`.
    First,
    /// After `,`: an item.
    Item,
    /// After an item: `,` or `]`.
    After,
}

/// Where a string or key stands in its escape syntax (RFC 8259 §7).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Escape {
    /// At a character boundary.
    None,
    /// After `\`.
    Backslash,
    /// Inside `\uXXXX`: `n` digits read, of value `v`.
    Hex { n: u8, v: u16 },
    /// After the high surrogate escape `high`: `\` must follow.
    NeedBackslash { high: u16 },
    /// After the high surrogate escape `high` and `\`: `u` must follow.
    NeedU { high: u16 },
    /// Inside the `\uXXXX` of the low surrogate after `high`.
    LowHex { high: u16, n: u8, v: u16 },
}

/// An open value's own lexical progress, per kind.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Lex {
    /// The document: `done` once the root value is complete.
    Root {
        done: bool,
    },
    Obj(ObjPhase),
    Arr(ArrPhase),
    Str(Escape),
    Key(Escape),
    /// A number (its text is in the `buf` arena).
    Num,
    /// `true`, `false` or `null` (index into [`LITERALS`](crate::json::syntax::LITERALS)),
    /// `pos` bytes read.
    Lit {
        lit: u8,
        pos: u8,
    },
}

impl Lex {
    #[inline]
    pub(super) fn kind(self) -> Kind {
        match self {
            Lex::Root { .. } => Kind::Root,
            Lex::Obj(_) => Kind::Obj,
            Lex::Arr(_) => Kind::Arr,
            Lex::Str(_) => Kind::Str,
            Lex::Key(_) => Kind::Key,
            Lex::Num => Kind::Num,
            Lex::Lit { .. } => Kind::Lit,
        }
    }

    /// The escape state of a string or key (`None` elsewhere).
    #[inline]
    pub(super) fn escape(self) -> Option<Escape> {
        match self {
            Lex::Str(e) | Lex::Key(e) => Some(e),
            _ => None,
        }
    }

    /// A string or key at a character boundary (not inside an escape)?
    #[inline]
    pub(super) fn at_char_boundary(self) -> bool {
        self.escape() == Some(Escape::None)
    }

    /// The same kind of string or key with escape state `e`.
    #[inline]
    pub(super) fn with_escape(self, e: Escape) -> Lex {
        match self {
            Lex::Key(_) => Lex::Key(e),
            _ => Lex::Str(e),
        }
    }
}

/// One open value: its lexical progress, the whitespace run before the next token, and where
/// its tails of the state's arenas start.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct Frame {
    pub lex: Lex,
    /// Whitespace (or separator padding) bytes in the current run.
    pub ws: u8,
    pub alts: u32,
    pub buf: u32,
    pub bits: u32,
    pub xk: u32,
    pub xtext: u32,
    /// Offset of this frame's tail of the raw-text arena (`NONE`: it owns none).
    pub raw: u32,
    /// Arrays with `uniqueItems`: raw-text offset where the current item started.
    pub item: u32,
    /// An array some of whose alternatives have `uniqueItems` (raw text is recorded while
    /// such a frame is open).
    pub uniq: bool,
}

impl Frame {
    #[inline]
    pub(super) fn kind(&self) -> Kind {
        self.lex.kind()
    }
}

/// An undeclared key an object alternative has seen (`alt` its arena index), or with `alt ==
/// NONE` the canonical text of a completed `uniqueItems` item; the text is in `xtext`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct XKey {
    pub alt: u32,
    pub start: u32,
    pub len: u32,
}

// The state stays as small as before the kinds were typed (the mask cache hashes and compares
// it, and the history copies it per token).
const _: () = assert!(std::mem::size_of::<Alt>() == 32);
const _: () = assert!(std::mem::size_of::<Frame>() <= 40);

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{Hash, Hasher};

    fn hash<T: Hash>(t: &T) -> u64 {
        let mut h = rustc_hash::FxHasher::default();
        t.hash(&mut h);
        h.finish()
    }

    #[test]
    fn views_write_their_own_words_only() {
        let a = Alt::new(RtCoreId::new(7), 0b101, false);
        let value = ExprId::new(11);
        let o = a.with_obj(ObjProgress { members: 2, seen: 9, next_order: 3, value });
        assert_eq!(o.obj(), ObjProgress { members: 2, seen: 9, next_order: 3, value });
        // An array view shares the first two words and leaves the rest alone.
        let r = o.with_arr(ArrProgress { items: 5, matches: 1 });
        assert_eq!(r.arr(), ArrProgress { items: 5, matches: 1 });
        assert_eq!((r.obj().next_order, r.obj().value), (3, value));
        assert_eq!((r.core, r.parents, r.alive, r.tag), (RtCoreId::new(7), 0b101, true, false));
    }

    #[test]
    fn new_alternatives_read_no_value_node() {
        let a = Alt::new(RtCoreId::new(0), 1, true);
        assert_eq!(a.obj().value, ExprId::NONE);
        assert_eq!(a.str(), StrProgress { state: 0, chars: 0 });
    }

    #[test]
    fn equal_progress_is_equal_state_and_different_progress_is_not() {
        let a = Alt::new(RtCoreId::new(3), 1, false).with_str(StrProgress { state: 4, chars: 2 });
        let b = Alt::new(RtCoreId::new(3), 1, false).with_str(StrProgress { state: 4, chars: 2 });
        let c = b.with_str(StrProgress { state: 4, chars: 3 });
        assert_eq!(a, b);
        assert_eq!(hash(&a), hash(&b));
        assert_ne!(a, c);
    }

    #[test]
    fn lex_kinds_and_escapes() {
        assert_eq!(Lex::Key(Escape::Backslash).kind(), Kind::Key);
        assert_eq!(Lex::Lit { lit: 1, pos: 2 }.kind(), Kind::Lit);
        assert!(Lex::Str(Escape::None).at_char_boundary());
        assert!(!Lex::Str(Escape::Hex { n: 1, v: 0xD }).at_char_boundary());
        assert!(!Lex::Num.at_char_boundary());
        let k = Lex::Key(Escape::None).with_escape(Escape::NeedU { high: 0xD800 });
        assert_eq!(k, Lex::Key(Escape::NeedU { high: 0xD800 }));
        assert_ne!(Lex::Str(Escape::None), Lex::Key(Escape::None));
    }
}
