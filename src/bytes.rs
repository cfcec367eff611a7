//! [`ByteSet`]: a set of bytes as 256 bits, the one type every layer uses for "which bytes".
//!
//! Recognisers report the bytes they could accept ([`Recognizer::byte_superset`]) and the bytes
//! that keep them where they are ([`Recognizer::stay_set`]); the trie keeps, per node, the bytes
//! on the edges below it; the CFG front end's terminals, FIRST/FOLLOW sets and scan prefilters
//! are byte sets; DFA analyses return them. Before this type each of those rolled its own
//! `[u64; 4]` or `[bool; 256]`; now the layout is stated once, here.
//!
//! [`Recognizer::byte_superset`]: crate::recognizer::Recognizer::byte_superset
//! [`Recognizer::stay_set`]: crate::recognizer::Recognizer::stay_set
//!
//! # Layout
//! Byte `b` is bit `b % 64` (least significant bit first) of word `b / 64`. The type is
//! `#[repr(transparent)]` over `[u64; 4]`, and every operation is a few word operations marked
//! `#[inline]` (most are `const fn`): the trie walk reads a set per node, so a membership test
//! must compile to the same shift-and-mask it was when hand-written.

use std::fmt;

/// The 64 bytes that continue a multi-byte UTF-8 character (`0x80..=0xBF`, RFC 3629 §3), in
/// order: what may follow inside an open character, and what counts no code point of its own.
pub(crate) const UTF8_CONTINUATION: [u8; 64] = {
    let mut a = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        a[i] = 0x80 + i as u8;
        i += 1;
    }
    a
};

/// A set of bytes (256 bits). See the [module docs](self) for the layout.
///
/// # Example
/// ```
/// use grammask::ByteSet;
/// let digits = ByteSet::from_range(b'0', b'9');
/// let sign = ByteSet::of(b"+-");
/// let number = digits.union(&sign);
/// assert!(number.contains(b'7') && number.contains(b'-') && !number.contains(b'x'));
/// assert_eq!(number.len(), 12);
/// assert!(digits.is_subset(&number));
/// assert_eq!(sign.iter().collect::<Vec<u8>>(), b"+-");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct ByteSet([u64; 4]);

const _: () = assert!(std::mem::size_of::<ByteSet>() == 32);

impl ByteSet {
    /// No byte.
    pub const EMPTY: ByteSet = ByteSet([0; 4]);
    /// Every byte.
    pub const FULL: ByteSet = ByteSet([u64::MAX; 4]);

    /// The set of `bytes` (duplicates allowed).
    #[inline]
    pub const fn of(bytes: &[u8]) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        let mut i = 0;
        while i < bytes.len() {
            s.insert(bytes[i]);
            i += 1;
        }
        s
    }

    /// The bytes `lo..=hi` (empty when `lo > hi`).
    #[inline]
    pub const fn from_range(lo: u8, hi: u8) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        let mut b = lo as usize;
        while b <= hi as usize {
            s.insert(b as u8);
            b += 1;
        }
        s
    }

    /// The bytes `b` for which `f(b)` holds (called once per byte, in ascending order).
    #[inline]
    pub fn from_fn(mut f: impl FnMut(u8) -> bool) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        for b in 0..=255u8 {
            if f(b) {
                s.insert(b);
            }
        }
        s
    }

    /// The set with these raw words (see the layout in the [module docs](self)).
    #[inline]
    pub const fn from_words(words: [u64; 4]) -> ByteSet {
        ByteSet(words)
    }

    /// The raw words (see the layout in the [module docs](self)).
    #[inline]
    pub const fn words(&self) -> &[u64; 4] {
        &self.0
    }

    /// Is `b` in the set?
    #[inline(always)]
    pub const fn contains(&self, b: u8) -> bool {
        self.0[(b >> 6) as usize] >> (b & 63) & 1 != 0
    }

    /// Add `b`.
    #[inline(always)]
    pub const fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1 << (b & 63);
    }

    /// Remove `b`.
    #[inline(always)]
    pub const fn remove(&mut self, b: u8) {
        self.0[(b >> 6) as usize] &= !(1 << (b & 63));
    }

    /// Bytes in either set.
    #[inline(always)]
    pub const fn union(&self, other: &ByteSet) -> ByteSet {
        let (a, b) = (&self.0, &other.0);
        ByteSet([a[0] | b[0], a[1] | b[1], a[2] | b[2], a[3] | b[3]])
    }

    /// Bytes in both sets.
    #[inline(always)]
    pub const fn intersection(&self, other: &ByteSet) -> ByteSet {
        let (a, b) = (&self.0, &other.0);
        ByteSet([a[0] & b[0], a[1] & b[1], a[2] & b[2], a[3] & b[3]])
    }

    /// Bytes in `self` and not in `other`.
    #[inline(always)]
    pub const fn difference(&self, other: &ByteSet) -> ByteSet {
        let (a, b) = (&self.0, &other.0);
        ByteSet([a[0] & !b[0], a[1] & !b[1], a[2] & !b[2], a[3] & !b[3]])
    }

    /// Add every byte of `other`; whether that added any (what fixpoint loops test).
    #[inline(always)]
    pub const fn union_with(&mut self, other: &ByteSet) -> bool {
        let u = self.union(other);
        let changed = !u.eq_const(self);
        *self = u;
        changed
    }

    /// Keep only the bytes also in `other`; whether that removed any.
    #[inline(always)]
    pub const fn intersect_with(&mut self, other: &ByteSet) -> bool {
        let u = self.intersection(other);
        let changed = !u.eq_const(self);
        *self = u;
        changed
    }

    /// Is the set empty?
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        let a = &self.0;
        a[0] | a[1] | a[2] | a[3] == 0
    }

    /// Number of bytes in the set.
    #[inline]
    pub const fn len(&self) -> usize {
        let a = &self.0;
        (a[0].count_ones() + a[1].count_ones() + a[2].count_ones() + a[3].count_ones()) as usize
    }

    /// Is every byte of `self` in `other`?
    #[inline(always)]
    pub const fn is_subset(&self, other: &ByteSet) -> bool {
        self.difference(other).is_empty()
    }

    /// The bytes, ascending.
    #[inline]
    pub fn iter(&self) -> Iter {
        Iter { words: self.0, word: 0 }
    }

    /// `==` usable in `const fn` (derived `PartialEq` is not const).
    #[inline(always)]
    const fn eq_const(&self, other: &ByteSet) -> bool {
        let (a, b) = (&self.0, &other.0);
        (a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) == 0
    }
}

/// The bytes of a [`ByteSet`], ascending (see [`ByteSet::iter`]).
#[derive(Clone, Debug)]
pub struct Iter {
    /// The bytes not yet returned (returned bits are cleared).
    words: [u64; 4],
    /// The first word that may still have a bit set.
    word: usize,
}

impl Iterator for Iter {
    type Item = u8;

    #[inline]
    fn next(&mut self) -> Option<u8> {
        while self.word < 4 {
            let w = &mut self.words[self.word];
            if *w != 0 {
                let bit = w.trailing_zeros();
                *w &= *w - 1;
                return Some((self.word as u32 * 64 + bit) as u8);
            }
            self.word += 1;
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = ByteSet(self.words).len();
        (n, Some(n))
    }
}

impl ExactSizeIterator for Iter {}

impl IntoIterator for &ByteSet {
    type Item = u8;
    type IntoIter = Iter;
    #[inline]
    fn into_iter(self) -> Iter {
        self.iter()
    }
}

impl FromIterator<u8> for ByteSet {
    fn from_iter<I: IntoIterator<Item = u8>>(iter: I) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        for b in iter {
            s.insert(b);
        }
        s
    }
}

/// As the list of its bytes in ranges, e.g. `{0x30-0x39, 0x61}`: readable in test failures.
impl fmt::Debug for ByteSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        let mut it = self.iter().peekable();
        let mut first = true;
        while let Some(lo) = it.next() {
            let mut hi = lo;
            while it.peek() == Some(&hi.wrapping_add(1)) && hi != 255 {
                hi = it.next().expect("peeked");
            }
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo:#04x}")?;
            } else {
                write!(f, "{lo:#04x}-{hi:#04x}")?;
            }
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference the set is checked against: one `bool` per byte.
    fn bools(s: &ByteSet) -> [bool; 256] {
        std::array::from_fn(|b| s.contains(b as u8))
    }

    /// A few sets with bits in every word, at word edges, and empty/full.
    fn samples() -> Vec<ByteSet> {
        vec![
            ByteSet::EMPTY,
            ByteSet::FULL,
            ByteSet::of(&[0, 63, 64, 127, 128, 191, 192, 255]),
            ByteSet::from_range(b'0', b'9'),
            ByteSet::from_range(60, 200),
            ByteSet::from_fn(|b| b % 3 == 0),
            ByteSet::of(b"\"\\{}[],: \t\n\r"),
        ]
    }

    #[test]
    fn layout_is_bit_b_mod_64_of_word_b_div_64() {
        let s = ByteSet::of(&[0, 65, 130, 255]);
        assert_eq!(s.words(), &[1, 2, 4, 1 << 63]);
        assert_eq!(ByteSet::from_words([1, 2, 4, 1 << 63]), s);
    }

    #[test]
    fn constructors_agree() {
        const DIGITS: ByteSet = ByteSet::of(b"0123456789");
        assert_eq!(DIGITS, ByteSet::from_range(b'0', b'9'));
        assert_eq!(DIGITS, ByteSet::from_fn(|b| b.is_ascii_digit()));
        assert_eq!(DIGITS, (b'0'..=b'9').collect::<ByteSet>());
        assert_eq!(ByteSet::from_range(0, 255), ByteSet::FULL);
        assert_eq!(ByteSet::from_range(9, 8), ByteSet::EMPTY);
        assert_eq!(ByteSet::from_range(200, 200), ByteSet::of(&[200]));
        assert_eq!(ByteSet::default(), ByteSet::EMPTY);
        assert_eq!(ByteSet::of(b"aab"), ByteSet::of(b"ba"));
    }

    #[test]
    fn insert_remove_contains() {
        let mut s = ByteSet::EMPTY;
        for b in [0u8, 63, 64, 200, 255] {
            assert!(!s.contains(b));
            s.insert(b);
            assert!(s.contains(b));
            assert!(b == 255 || !s.contains(b + 1), "only {b} was added");
        }
        assert_eq!(s.len(), 5);
        s.insert(200);
        assert_eq!(s.len(), 5, "inserting twice keeps one");
        s.remove(64);
        s.remove(64);
        assert!(!s.contains(64) && s.contains(63));
        assert_eq!(s.len(), 4);
        let mut f = ByteSet::FULL;
        f.remove(255);
        assert_eq!(f.len(), 255);
        assert!(!f.contains(255) && f.contains(254));
    }

    #[test]
    fn set_operations_match_per_byte_logic() {
        for a in samples() {
            for b in samples() {
                let (x, y) = (bools(&a), bools(&b));
                let u = bools(&a.union(&b));
                let i = bools(&a.intersection(&b));
                let d = bools(&a.difference(&b));
                for k in 0..256 {
                    assert_eq!(u[k], x[k] || y[k], "union at {k}");
                    assert_eq!(i[k], x[k] && y[k], "intersection at {k}");
                    assert_eq!(d[k], x[k] && !y[k], "difference at {k}");
                }
                let sub = (0..256).all(|k| !x[k] || y[k]);
                assert_eq!(a.is_subset(&b), sub, "{a:?} ⊆ {b:?}");
                assert_eq!(a.len(), x.iter().filter(|&&v| v).count());
                assert_eq!(a.is_empty(), !x.iter().any(|&v| v));
            }
        }
    }

    #[test]
    fn in_place_variants_report_change() {
        let mut s = ByteSet::of(b"ab");
        assert!(!s.union_with(&ByteSet::of(b"a")), "nothing new");
        assert_eq!(s, ByteSet::of(b"ab"));
        assert!(s.union_with(&ByteSet::of(b"az")), "z is new");
        assert_eq!(s, ByteSet::of(b"abz"));
        assert!(!s.intersect_with(&ByteSet::FULL));
        assert!(s.intersect_with(&ByteSet::of(b"bz!")));
        assert_eq!(s, ByteSet::of(b"bz"));
        let mut e = ByteSet::EMPTY;
        assert!(!e.union_with(&ByteSet::EMPTY));
        assert!(e.union_with(&ByteSet::of(&[255])), "a change in the last word counts");
    }

    #[test]
    fn iter_is_ascending_and_exact() {
        for s in samples() {
            let v: Vec<u8> = s.iter().collect();
            let want: Vec<u8> = (0..=255u8).filter(|&b| s.contains(b)).collect();
            assert_eq!(v, want);
            assert_eq!(s.iter().len(), s.len());
            assert_eq!(v.iter().copied().collect::<ByteSet>(), s, "round trip");
        }
        assert_eq!(ByteSet::FULL.iter().last(), Some(255));
        assert_eq!((&ByteSet::of(b"zA")).into_iter().collect::<Vec<_>>(), b"Az");
    }

    #[test]
    fn debug_shows_ranges() {
        assert_eq!(format!("{:?}", ByteSet::EMPTY), "{}");
        assert_eq!(format!("{:?}", ByteSet::of(b"0123456789a")), "{0x30-0x39, 0x61}");
        assert_eq!(format!("{:?}", ByteSet::FULL), "{0x00-0xff}");
        assert_eq!(format!("{:?}", ByteSet::of(&[254, 255])), "{0xfe-0xff}");
    }
}
