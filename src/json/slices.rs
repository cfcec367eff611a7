//! Lexical slices: precomputed masks for lexical contexts where most tokens are allowed.
//!
//! Inside a JSON string any byte except `"`, `\` and control bytes continues the string, so at
//! such a state ~95% of the vocabulary is allowed — the most expensive masks for a plain trie
//! walk. The [`StringSlice`] classifies every token once by what it does to a string body entered
//! at a character boundary:
//!
//! - it stays inside the string (plain content, valid escapes, a valid prefix of a multi-byte
//!   character or of an escape), or closes it exactly at its last byte: allowed from *every*
//!   unconstrained string state, whatever the context → the `inside` bitset;
//! - it closes the string and goes on (`",`, `"}`, `":{"`): allowed iff the bytes after the
//!   quote are allowed after the string → those suffixes go into the small `exits` trie, walked
//!   from the state right after the closing quote;
//! - it is refused inside the string (a control byte, a bad escape, invalid UTF-8): never allowed.
//!
//! So a mask inside a string is one bitset copy plus a walk over a few hundred suffix nodes,
//! instead of a walk over the ~300k-node vocabulary trie. This is llguidance's "slices" idea
//! pushed one step further (XGrammar's context-independent tokens for the one lexeme that
//! matters most).
//!
//! Invariant: `inside`, the tokens of `exits` and the refused tokens partition the text tokens.
//!
//! The schema engine's [`StringClasses`] and [`NumberClasses`] classify the vocabulary for
//! constrained string bodies and numbers the same way. All of them are attached to the
//! vocabulary through its extension cache ([`JsonClasses`], [`JsonVocab`]): built once per
//! vocabulary, on first use or by [`JsonVocab::prepare_json_classes`].

use super::lexer::{Whitespace, JSON_SLICES, STRING_SLICES, STRUCT_PUSH_LIMIT};
use super::JsonGrammar;
use crate::engine::{SliceSet, TokenSlice};
use crate::mask::TokenMask;
use crate::recognizer::{ByteLogic, CopyStack};
use crate::token::TokenId;
use crate::vocab::{TokTrie, VocabExtension, Vocabulary};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The vocabulary classified for the inside of an unconstrained JSON string: as a
/// [`TokenSlice`], `inside` holds the tokens allowed from any unconstrained string state at a
/// character boundary whatever follows the string (plain content, valid escapes, tokens that
/// close the string exactly at their last byte), and `exits` the bytes after the closing quote
/// of the tokens that close the string and go on, walked from the state after the quote.
#[derive(Debug)]
pub(crate) struct StringSlice(pub(crate) Arc<TokenSlice>);

/// True for tokens that are plain JSON string content on their own: complete UTF-8 characters,
/// none of them `"`, `\\` or < 0x20 (they continue any unconstrained string).
pub(crate) fn is_string_safe(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\')
        && std::str::from_utf8(bytes).is_ok()
}

/// What a token does to a string body entered at a character boundary.
enum StringEffect {
    /// Stays inside or closes exactly at the end.
    Inside,
    /// Closes the string at byte `at` (the quote) and continues.
    Exit { at: usize },
    /// Refused inside the string.
    Refused,
}

fn classify(g: &JsonGrammar, start: &crate::json::JsonState, bytes: &[u8]) -> StringEffect {
    let mut s = *start;
    for (i, &b) in bytes.iter().enumerate() {
        match g.step(&s, b) {
            Some(n) => {
                if !JsonGrammar::in_string_body(&n) {
                    return if i + 1 == bytes.len() {
                        StringEffect::Inside
                    } else {
                        StringEffect::Exit { at: i }
                    };
                }
                s = n;
            }
            None => return StringEffect::Refused,
        }
    }
    StringEffect::Inside
}

impl VocabExtension for StringSlice {
    fn build(vocab: &Vocabulary) -> StringSlice {
        StringSlice(Arc::new(string_sub_slice(vocab.n_vocab(), 0, vocab.text_tokens())))
    }
}

/// The slice of string sub-state `index` (numbered by `JsonGrammar::string_slice_index`): the
/// tokens that, from that sub-state, stay inside the string or close it at their last byte,
/// and the suffixes after the quote of those that close it and go on. The classification is
/// [`StringSlice`]'s, from a probe in that sub-state; only at a character boundary (index 0)
/// does a string-safe token need no run. `tokens` yields the candidates: every text token, or
/// only those whose first byte the sub-state takes.
fn string_sub_slice<'a>(
    n_vocab: usize,
    index: usize,
    tokens: impl Iterator<Item = (TokenId, &'a [u8])>,
) -> TokenSlice {
    let (g, start) = JsonGrammar::string_probe_at(index);
    let boundary = index == 0;
    let mut inside = TokenMask::new(n_vocab);
    let mut exits: Vec<(TokenId, &[u8])> = Vec::new();
    for (t, b) in tokens {
        if boundary && is_string_safe(b) {
            inside.insert(t);
            continue;
        }
        match classify(&g, &start, b) {
            StringEffect::Inside => inside.insert(t),
            StringEffect::Exit { at } => exits.push((t, &b[at + 1..])),
            StringEffect::Refused => {}
        }
    }
    TokenSlice { inside, exits: Arc::new(TokTrie::build(exits)) }
}

/// The string sub-states reachable from a character boundary (breadth first over bytes), by
/// slice index, boundary excluded: 23 (escape digits and surrogate flags, UTF-8 bytes
/// left and ranges).
fn reachable_sub_states() -> Vec<usize> {
    let (g, start) = JsonGrammar::string_probe();
    let mut seen = vec![false; STRING_SLICES];
    let mut queue = vec![start];
    let mut out = Vec::new();
    while let Some(s) = queue.pop() {
        for b in 0..=255u8 {
            let Some(n) = g.step(&s, b) else { continue };
            let Some(i) = JsonGrammar::string_slice_index(&n) else { continue };
            if !std::mem::replace(&mut seen[i], true) {
                queue.push(n);
                if i != 0 {
                    out.push(i);
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// Every string sub-state's slice (boundary, after `\\`, inside `\\uXXXX`, inside a multi-byte
/// character): inside an escape or a split character a mask is then a bitset copy and a walk
/// of the few tokens that finish the escape and close the string and go on, from any context,
/// instead of a walk over the whole trie on each first visit of each context.
#[derive(Debug)]
pub(crate) struct StringSlices(pub(crate) Arc<SliceSet>);

impl VocabExtension for StringSlices {
    /// Builds the boundary slice and every reachable sub-state's at once (a few ms for a 128k
    /// vocabulary: each sub-state runs only the tokens whose first byte it takes), so no mask
    /// pays for a build.
    fn build(vocab: &Vocabulary) -> StringSlices {
        let mut by_first: Vec<Vec<(TokenId, &[u8])>> = vec![Vec::new(); 256];
        // A text token with no bytes (some tokenizers have one) leaves every sub-state as it
        // is: it goes to every slice, as the fallback build (all text tokens) would put it.
        let mut empty: Vec<(TokenId, &[u8])> = Vec::new();
        for (t, b) in vocab.text_tokens() {
            match b.first() {
                Some(&f) => by_first[f as usize].push((t, b)),
                None => empty.push((t, b)),
            }
        }
        let n = vocab.n_vocab();
        let mut built = vec![(0, vocab.string_slice())];
        for i in reachable_sub_states() {
            let (g, probe) = JsonGrammar::string_probe_at(i);
            let firsts = (0..=255u8).filter(|&b| g.step(&probe, b).is_some());
            let tokens = firsts
                .flat_map(|b| by_first[b as usize].iter().copied())
                .chain(empty.iter().copied());
            built.push((i, Arc::new(string_sub_slice(n, i, tokens))));
        }
        StringSlices(Arc::new(SliceSet::with_built(
            STRING_SLICES,
            Box::new(|vocab, i| {
                Some(Arc::new(string_sub_slice(vocab.n_vocab(), i, vocab.text_tokens())))
            }),
            built,
        )))
    }
}

/// The free-form JSON engine's slices over one vocabulary, one [`SliceSet`] per whitespace
/// policy (the only part of the grammar a slice depends on): the string sub-states' slices
/// (shared with [`StringSlices`]) and the structural positions' (between values, in numbers
/// and literals, by innermost container kind; see `JsonGrammar::structural_slice_index`),
/// each built on first use by one trie walk and a pass over the tokens that hold `]` or `}`.
pub(crate) struct JsonSlices {
    sets: Mutex<Vec<(Whitespace, Arc<SliceSet>)>>,
    closers: Arc<Closers>,
}

/// The tokens that close a structural slice's container and go on, each with where its bytes
/// after the close start: the key of a shared exits trie.
type ExitList = Box<[(TokenId, u16)]>;

/// The tokens that can close a container (a `]` or `}` byte), by first byte, and the exits
/// tries already built from them (slices of nearby positions — whitespace runs of different
/// lengths, say — have the same exits and share one trie).
struct Closers {
    by_first: Box<[Box<[TokenId]>]>,
    tries: Mutex<FxHashMap<ExitList, Arc<TokTrie>>>,
    /// Some token has more than [`STRUCT_PUSH_LIMIT`] `[`/`{` bytes: structural slices do not
    /// hold over this vocabulary (the engine walks there).
    deep: bool,
}

impl VocabExtension for JsonSlices {
    fn build(vocab: &Vocabulary) -> JsonSlices {
        let mut by_first = vec![Vec::new(); 256];
        let mut deep = false;
        for (t, b) in vocab.text_tokens() {
            if b.iter().any(|&c| c == b']' || c == b'}') {
                by_first[b[0] as usize].push(t);
            }
            deep |= b.iter().filter(|&&c| c == b'[' || c == b'{').count() > STRUCT_PUSH_LIMIT;
        }
        let closers = Closers {
            by_first: by_first.into_iter().map(Vec::into_boxed_slice).collect(),
            tries: Mutex::new(FxHashMap::default()),
            deep,
        };
        JsonSlices { sets: Mutex::new(Vec::new()), closers: Arc::new(closers) }
    }
}

impl JsonSlices {
    fn set(&self, vocab: &Vocabulary, whitespace: Whitespace) -> Arc<SliceSet> {
        let mut sets = self.sets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, set)) = sets.iter().find(|(w, _)| *w == whitespace) {
            return set.clone();
        }
        let strings = vocab.string_slices();
        let closers = self.closers.clone();
        let grammar = JsonGrammar::structural_probe(whitespace);
        let common = grammar.common_structural_indices();
        let set = Arc::new(SliceSet::new(
            JSON_SLICES,
            Box::new(move |vocab, i| {
                if i < STRING_SLICES {
                    return strings.get(vocab, i).cloned();
                }
                if closers.deep {
                    return None;
                }
                let probe = JsonGrammar::structural_probe_at(i)?;
                Some(Arc::new(structural_slice(vocab, &grammar, probe, &closers)))
            }),
        ));
        for i in common {
            set.get(vocab, i);
        }
        sets.push((whitespace, set.clone()));
        set
    }
}

/// The slice of a structural position from its depth-1 `probe` in `g`, a
/// `JsonGrammar::structural_probe` (see `JsonGrammar::structural_probe_at`): `inside` by one trie walk — closing the probe's
/// container ends its document, so the walk keeps exactly the tokens that never close it or
/// close it at their last byte — and, for the `closers` that close it and go on, their bytes
/// after the closing byte in the `exits` trie.
fn structural_slice(
    vocab: &Vocabulary,
    g: &JsonGrammar,
    probe: crate::json::JsonState,
    closers: &Closers,
) -> TokenSlice {
    let trie = vocab.trie();
    let mut inside = TokenMask::new(vocab.n_vocab());
    let mut buf = Vec::new();
    let mut rec = CopyStack::new(g, probe, &mut buf, trie.max_depth());
    trie.walk(&mut rec, &mut inside);
    let mut exits: Vec<(TokenId, u16)> = Vec::new();
    for first in 0..=255u8 {
        let Some(after_first) = g.step(&probe, first) else { continue };
        for &t in closers.by_first[first as usize].iter() {
            let b = vocab.token_bytes(t);
            let mut s = after_first;
            for (j, &c) in b.iter().enumerate() {
                if j > 0 {
                    let Some(n) = g.step(&s, c) else { break };
                    s = n;
                }
                if s.depth() == 0 {
                    if j + 1 < b.len() {
                        exits.push((t, (j + 1) as u16));
                    }
                    break;
                }
            }
        }
    }
    let mut tries = closers.tries.lock().unwrap_or_else(|e| e.into_inner());
    let exits = tries
        .entry(exits.into_boxed_slice())
        .or_insert_with_key(|exits| {
            Arc::new(TokTrie::build(
                exits.iter().map(|&(t, j)| (t, &vocab.token_bytes(t)[j as usize..])),
            ))
        })
        .clone();
    TokenSlice { inside, exits }
}

/// Does `b`, read from a character boundary of a string outside any escape, hold an escape
/// that `SchemaOptions::plain_strings` refuses: `\/`, or a `\u` escape (or a prefix of one)
/// that cannot spell a control character U+0000–U+001F? Short escapes (`\"`, `\\`, `\b`,
/// `\f`, `\n`, `\r`, `\t`) and a trailing `\` are not.
pub(crate) fn gratuitous_escape(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        match b.get(i + 1) {
            Some(b'/') => return true,
            Some(b'u') => {
                // `\u00[01]X`: each hex digit present must stay within 0x00–0x1F.
                let hex = &b[(i + 2).min(b.len())..(i + 6).min(b.len())];
                let ok = hex.iter().enumerate().all(|(k, &h)| match k {
                    0 | 1 => h == b'0',
                    2 => h == b'0' || h == b'1',
                    _ => h.is_ascii_hexdigit(),
                });
                if !ok {
                    return true;
                }
                i += 6;
            }
            _ => i += 2,
        }
    }
    false
}

/// The vocabulary classified for string bodies whose content is constrained (a `pattern`, a
/// `format`, an `enum`, a length, a key set): the schema engine's fast paths.
///
/// Every text token falls in exactly one class, by its bytes alone — so the classes hold from
/// any string state, also inside a multi-byte character or right after an escape:
///
/// - **plain** (`plain` trie): no `"`, no `\`, no control byte. Its bytes are the decoded
///   content, so a content automaton runs them directly (no escape logic), possibly ending
///   inside a multi-byte character.
/// - **escaped** (`escaped` trie): contains a `\\` before any unescaped `"`, and no unescaped
///   `"` at all.
/// - **closing with plain content** (`groups`, `exits`): `pre` `"` `suffix` with `pre` plain.
///   Tokens are grouped by `pre` (~200 groups for a 128k vocabulary), so a constrained string
///   decides each group with one automaton run, and the suffixes are walked once, from the state
///   after the closing quote, in the small `exits` trie.
/// - **closing after an escape** (`close_escaped` trie): walked with the full recogniser.
/// - refused inside any string: a raw control byte before any other special byte.
///
/// Validity (UTF-8, escapes, the content's automaton) is left to whoever walks a class.
///
/// `open` is the set allowed by an *unconstrained* string from a boundary without closing it
/// (the valid plain and escaped tokens); `closing` holds the full bytes of both closing classes.
///
/// Invariant: `plain`, `escaped`, the tokens of `groups`, `close_escaped` and the refused
/// tokens partition the text tokens; `exits` holds exactly the group tokens with a non-empty
/// suffix (by their suffix).
#[derive(Debug)]
pub(crate) struct StringClasses {
    /// Plain content tokens.
    pub plain: TokTrie,
    /// The plain tokens that are not string-safe (partial UTF-8 characters): with
    /// [`StringClasses::safe_at_most`], what a length-bounded unconstrained string near its
    /// bound walks instead of every plain token.
    pub plain_nonsafe: TokTrie,
    /// Tokens with an escape that stay inside the string.
    pub escaped: TokTrie,
    /// Tokens that stay inside an unconstrained string entered at a character boundary.
    pub open: TokenMask,
    /// Full bytes of every token that closes the string.
    pub closing: TokTrie,
    /// Tokens that close the string after plain content, grouped by that content.
    pub groups: Vec<CloseGroup>,
    /// For group tokens that go on after the quote: their bytes after the quote.
    pub exits: TokTrie,
    /// Tokens that close the string after an escape.
    pub close_escaped: TokTrie,
    /// Closing tokens whose bytes after the quote could close a value and then another key
    /// (`:` … `,` … `"` … `"`): after a key, the key's text matters to them (duplicates), so
    /// per-group shortcuts must not decide them. Usually empty.
    pub key_risky: TokenMask,
    /// The same tokens, full bytes.
    pub key_risky_trie: TokTrie,
    /// The tokens of `open` that are not string-safe (escapes, partial characters).
    pub open_nonsafe: TokenMask,
    /// The longest token of `open_nonsafe`, in bytes (a bound on the characters it adds).
    pub open_nonsafe_max_len: u32,
    /// `open` without the tokens whose escapes are gratuitous ([`gratuitous_escape`]): the
    /// open set of an unconstrained string under `SchemaOptions::plain_strings`.
    open_plain: TokenMask,
    /// `open_nonsafe` without those tokens.
    open_nonsafe_plain: TokenMask,
    /// The string-safe tokens (see [`is_string_safe`]) with their length in characters.
    safe_lens: Vec<(TokenId, u32)>,
    n_vocab: usize,
    /// `le[k]`: the string-safe tokens of at most `k` characters (built on first use: only
    /// length-bounded strings need it).
    le: OnceLock<Vec<TokenMask>>,
}

/// Tokens that close a string after the same plain content.
#[derive(Debug)]
pub(crate) struct CloseGroup {
    /// The content before the quote (plain bytes; may be empty).
    pub pre: Box<[u8]>,
    /// Characters in `pre` (UTF-8 lead bytes).
    pub chars: u32,
    /// Tokens that end with the quote.
    pub at_end: Vec<TokenId>,
    /// Tokens that go on after the quote (their suffixes are in [`StringClasses::exits`]).
    pub going_on: Vec<TokenId>,
}

/// True for bytes that a string body takes as themselves: not `"`, `\` or a control byte.
#[inline]
pub(crate) fn is_plain_byte(b: u8) -> bool {
    b >= 0x20 && b != b'"' && b != b'\\'
}

/// Could `suffix` (after a key's closing quote) close the value and then another key? It needs
/// a `:`, later a `,`, then two more `"`.
fn reaches_next_key(suffix: &[u8]) -> bool {
    let Some(c) = suffix.iter().position(|&b| b == b':') else { return false };
    let Some(k) = suffix[c..].iter().position(|&b| b == b',') else { return false };
    suffix[c + k..].iter().filter(|&&b| b == b'"').count() >= 2
}

impl StringClasses {
    /// [`StringClasses::open`], or under `plain_strings` (`plain`) the open tokens without
    /// gratuitous escapes.
    pub fn open_set(&self, plain: bool) -> &TokenMask {
        if plain {
            &self.open_plain
        } else {
            &self.open
        }
    }

    /// [`StringClasses::open_nonsafe`], or under `plain_strings` (`plain`) those without
    /// gratuitous escapes.
    pub fn open_nonsafe_set(&self, plain: bool) -> &TokenMask {
        if plain {
            &self.open_nonsafe_plain
        } else {
            &self.open_nonsafe
        }
    }

    fn build(vocab: &Vocabulary) -> StringClasses {
        Self::build_from(vocab.n_vocab(), vocab.text_tokens())
    }

    /// The classes of the tokens that start with `prefix` (and are longer), by the bytes
    /// after it: what the walk needs below a trie node where `prefix` has just opened a string.
    pub(crate) fn build_for_prefix(vocab: &Vocabulary, prefix: &[u8]) -> StringClasses {
        let tokens = vocab
            .text_tokens()
            .filter(|(_, b)| b.len() > prefix.len() && b.starts_with(prefix))
            .map(|(t, b)| (t, &b[prefix.len()..]));
        Self::build_from(vocab.n_vocab(), tokens)
    }

    /// Classify `(token, bytes)` pairs (the bytes a string body sees; ids may repeat bytes).
    fn build_from<'a>(
        n_vocab: usize,
        tokens: impl Iterator<Item = (TokenId, &'a [u8])>,
    ) -> StringClasses {
        let (g, start) = JsonGrammar::string_probe();
        let mut plain: Vec<(TokenId, &[u8])> = Vec::new();
        let mut plain_nonsafe: Vec<(TokenId, &[u8])> = Vec::new();
        let mut escaped: Vec<(TokenId, &[u8])> = Vec::new();
        let mut closing: Vec<(TokenId, &[u8])> = Vec::new();
        let mut exits: Vec<(TokenId, &[u8])> = Vec::new();
        let mut close_escaped: Vec<(TokenId, &[u8])> = Vec::new();
        let mut open = TokenMask::new(n_vocab);
        let mut groups: rustc_hash::FxHashMap<&[u8], CloseGroup> = Default::default();
        let mut safe_lens: Vec<(TokenId, u32)> = Vec::new();
        let mut open_nonsafe = TokenMask::new(n_vocab);
        let mut open_nonsafe_max_len = 0u32;
        let mut key_risky = TokenMask::new(n_vocab);
        let mut risky: Vec<(TokenId, &[u8])> = Vec::new();
        let mut gratuitous = TokenMask::new(n_vocab);
        for (t, b) in tokens {
            let safe = is_string_safe(b);
            if safe {
                safe_lens.push((t, b.iter().filter(|&&c| c & 0xC0 != 0x80).count() as u32));
            }
            if b.iter().all(|&c| is_plain_byte(c)) {
                plain.push((t, b));
                if !safe {
                    plain_nonsafe.push((t, b));
                }
                if crate::recognizer::run_bytes(&g, &start, b).is_some() {
                    open.insert(t);
                    if !safe {
                        open_nonsafe.insert(t);
                        open_nonsafe_max_len = open_nonsafe_max_len.max(b.len() as u32);
                    }
                }
                continue;
            }
            // The classes go by bytes alone, so that they hold from *any* string state
            // (also inside a multi-byte character or after an escape): a raw control byte
            // before any quote is refused everywhere; otherwise the token closes at its
            // first unescaped quote, if any. Whether the content is valid is left to the
            // automaton or the recogniser that walks each class.
            let mut close = None;
            let mut k = 0;
            while k < b.len() {
                match b[k] {
                    b'"' => {
                        close = Some(k);
                        break;
                    }
                    b'\\' => k += 2,
                    _ => k += 1,
                }
            }
            let first_special = b.iter().position(|&c| !is_plain_byte(c)).expect("not plain");
            if b[first_special] < 0x20 {
                continue;
            }
            match close {
                None => {
                    escaped.push((t, b));
                    // From a character boundary of an unconstrained string:
                    if crate::recognizer::run_bytes(&g, &start, b)
                        .is_some_and(|s| JsonGrammar::in_string_body(&s))
                    {
                        open.insert(t);
                        open_nonsafe.insert(t);
                        open_nonsafe_max_len = open_nonsafe_max_len.max(b.len() as u32);
                        if gratuitous_escape(b) {
                            gratuitous.insert(t);
                        }
                    }
                }
                Some(k) => {
                    closing.push((t, b));
                    if reaches_next_key(&b[k + 1..]) {
                        key_risky.insert(t);
                        risky.push((t, b));
                    }
                    let pre = &b[..k];
                    if pre.iter().all(|&c| is_plain_byte(c)) {
                        let gr = groups.entry(pre).or_insert_with(|| CloseGroup {
                            pre: pre.into(),
                            chars: pre.iter().filter(|&&c| c & 0xC0 != 0x80).count() as u32,
                            at_end: Vec::new(),
                            going_on: Vec::new(),
                        });
                        if k + 1 == b.len() {
                            gr.at_end.push(t);
                        } else {
                            gr.going_on.push(t);
                            exits.push((t, &b[k + 1..]));
                        }
                    } else {
                        close_escaped.push((t, b));
                    }
                }
            }
        }
        let mut groups: Vec<CloseGroup> = groups.into_values().collect();
        groups.sort_by(|a, b| a.pre.cmp(&b.pre));
        let (mut open_plain, mut open_nonsafe_plain) = (open.clone(), open_nonsafe.clone());
        for t in gratuitous.iter() {
            open_plain.remove(t);
            open_nonsafe_plain.remove(t);
        }
        StringClasses {
            open_plain,
            open_nonsafe_plain,
            plain: TokTrie::build(plain),
            plain_nonsafe: TokTrie::build(plain_nonsafe),
            escaped: TokTrie::build(escaped),
            open,
            closing: TokTrie::build(closing),
            groups,
            exits: TokTrie::build(exits),
            close_escaped: TokTrie::build(close_escaped),
            key_risky,
            key_risky_trie: TokTrie::build(risky),
            open_nonsafe,
            open_nonsafe_max_len,
            safe_lens,
            n_vocab,
            le: OnceLock::new(),
        }
    }

    /// The string-safe tokens of at most `k` characters.
    pub fn safe_at_most(&self, k: u32) -> &TokenMask {
        let le = self.le.get_or_init(|| {
            let longest = self.safe_lens.iter().map(|x| x.1).max().unwrap_or(0) as usize;
            let mut by_len: Vec<Vec<TokenId>> = vec![Vec::new(); longest + 1];
            for &(t, n) in &self.safe_lens {
                by_len[n as usize].push(t);
            }
            let mut le = Vec::with_capacity(longest + 1);
            let mut m = TokenMask::new(self.n_vocab);
            for ts in &by_len {
                for &t in ts {
                    m.insert(t);
                }
                le.push(m.clone());
            }
            le
        });
        &le[(k as usize).min(le.len() - 1)]
    }
}

/// The vocabulary split for the inside of a JSON number: tokens made only of number bytes
/// (`0-9 . e E + -`), which keep the number open, and the rest, which close it at their first
/// other byte. Inside a number whose value is unconstrained the open tokens depend only on
/// where the number's syntax stands, so the schema engine caches them; the rest is walked.
/// Built for the whole vocabulary (prefix `""`) or, like [`StringClasses`], for the tokens
/// below a prefix that has just opened a number (by their bytes after it).
///
/// Invariant: `numeric` and `rest` partition the text tokens (of the prefix, longer than it).
#[derive(Debug)]
pub(crate) struct NumberClasses {
    /// Tokens whose (remaining) bytes are all number bytes.
    pub numeric: TokTrie,
    /// Names `numeric` in the schema engine's process-wide per-state token lists of its
    /// number automata: unique in the process, never reused.
    pub numeric_id: u64,
    /// The other tokens whose first byte is a number byte (`1,`, `0}`, `e` words…): their
    /// walk steps the number before anything closes it.
    pub rest: TokTrie,
    /// The tokens whose first byte is not a number byte (`,"`, `}`, whitespace…): that byte
    /// closes the number, so what they do depends only on which alternatives accept the
    /// number, not on its digits (the schema engine caches their mask on that).
    pub rest_close: TokTrie,
}

/// A byte that can continue a JSON number.
#[inline]
pub(crate) fn is_number_byte(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
}

impl NumberClasses {
    pub(crate) fn build_for_prefix(vocab: &Vocabulary, prefix: &[u8]) -> NumberClasses {
        let mut numeric: Vec<(TokenId, &[u8])> = Vec::new();
        let mut rest: Vec<(TokenId, &[u8])> = Vec::new();
        let mut rest_close: Vec<(TokenId, &[u8])> = Vec::new();
        for (t, b) in vocab.text_tokens() {
            if b.len() <= prefix.len() || !b.starts_with(prefix) {
                continue;
            }
            let b = &b[prefix.len()..];
            if b.iter().all(|&c| is_number_byte(c)) {
                numeric.push((t, b));
            } else if is_number_byte(b[0]) {
                rest.push((t, b));
            } else {
                rest_close.push((t, b));
            }
        }
        NumberClasses {
            numeric: TokTrie::build(numeric),
            numeric_id: fresh_trie_id(),
            rest: TokTrie::build(rest),
            rest_close: TokTrie::build(rest_close),
        }
    }
}

/// A name for a number-only token trie, unique in the process (the key of the number
/// automata's per-state token lists: a trie's address could be reused after it is dropped).
pub(crate) fn fresh_trie_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Most string-opening prefixes a vocabulary keeps classes for.
pub(crate) const PREFIX_CLASSES_LIMIT: usize = 256;

/// Per-prefix classes, built on first use and kept (never dropped: their addresses key shared
/// caches).
type PrefixMap<T> = Mutex<rustc_hash::FxHashMap<Box<[u8]>, Arc<T>>>;

/// The classes for `prefix` from `map`, built with `build` on first use; `None` once
/// [`PREFIX_CLASSES_LIMIT`] prefixes are kept.
fn cached_for_prefix<T>(
    map: &PrefixMap<T>,
    prefix: &[u8],
    build: impl FnOnce() -> T,
) -> Option<Arc<T>> {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = map.get(prefix) {
        return Some(c.clone());
    }
    if map.len() >= PREFIX_CLASSES_LIMIT {
        return None;
    }
    let c = Arc::new(build());
    map.insert(prefix.into(), c.clone());
    Some(c)
}

/// The schema engine's token classes of one vocabulary (its [`VocabExtension`]): the
/// classes of the whole vocabulary for string bodies, and those below every string- or
/// number-opening prefix met so far.
#[derive(Default)]
pub(crate) struct JsonClasses {
    strings: OnceLock<Arc<StringClasses>>,
    /// Classes of the tokens below string-opening prefixes (`"`, `, "`, `{"`, …), at most
    /// [`PREFIX_CLASSES_LIMIT`] prefixes.
    prefix_strings: PrefixMap<StringClasses>,
    /// The same for number-opening prefixes (`1`, ` -`, …; `""` is the whole vocabulary).
    numbers: PrefixMap<NumberClasses>,
    prepared: OnceLock<()>,
}

impl JsonClasses {
    /// [`JsonVocab::prefix_string_classes`] without the extension lookup (for hot walks that
    /// hold the classes already).
    pub(crate) fn prefix_strings(
        &self,
        vocab: &Vocabulary,
        prefix: &[u8],
    ) -> Option<Arc<StringClasses>> {
        cached_for_prefix(&self.prefix_strings, prefix, || {
            StringClasses::build_for_prefix(vocab, prefix)
        })
    }

    /// [`JsonVocab::number_classes`] without the extension lookup.
    pub(crate) fn numbers(&self, vocab: &Vocabulary, prefix: &[u8]) -> Option<Arc<NumberClasses>> {
        cached_for_prefix(&self.numbers, prefix, || NumberClasses::build_for_prefix(vocab, prefix))
    }
}

impl VocabExtension for JsonClasses {
    fn build(_: &Vocabulary) -> JsonClasses {
        JsonClasses::default()
    }
}

/// The JSON engines' per-vocabulary data, asked of the vocabulary itself.
pub(crate) trait JsonVocab {
    /// The lexical slice for the inside of an unconstrained JSON string.
    fn string_slice(&self) -> Arc<TokenSlice>;
    /// The slices of every string sub-state (slice 0 is [`JsonVocab::string_slice`]).
    fn string_slices(&self) -> Arc<SliceSet>;
    /// The free-form JSON engine's slices (strings and structure) under `whitespace`.
    fn json_slices(&self, whitespace: Whitespace) -> Arc<SliceSet>;
    /// The vocabulary classified for constrained string bodies.
    fn string_classes(&self) -> Arc<StringClasses>;
    /// The classes of the tokens that start with `prefix` (a token prefix that has just
    /// opened a JSON string), by the bytes after it; `None` once [`PREFIX_CLASSES_LIMIT`]
    /// prefixes are kept (callers then walk those tokens).
    fn prefix_string_classes(&self, prefix: &[u8]) -> Option<Arc<StringClasses>>;
    /// The vocabulary's tokens that start with `prefix` (empty: all), split for the inside of
    /// a JSON number; `None` once [`PREFIX_CLASSES_LIMIT`] prefixes are kept.
    fn number_classes(&self, prefix: &[u8]) -> Option<Arc<NumberClasses>>;
    /// Build, now, the string and number classes of every prefix a JSON structure can open a
    /// string or a number with (structural bytes — whitespace, `,` `:` `[` `{` — then `"`,
    /// `-` or a digit), so that no mask pays for building them later. Idempotent; a few tens
    /// of milliseconds once per vocabulary.
    fn prepare_json_classes(&self);
}

impl JsonVocab for Vocabulary {
    fn string_slice(&self) -> Arc<TokenSlice> {
        self.extension::<StringSlice>().0.clone()
    }

    fn string_slices(&self) -> Arc<SliceSet> {
        self.extension::<StringSlices>().0.clone()
    }

    fn json_slices(&self, whitespace: Whitespace) -> Arc<SliceSet> {
        self.extension::<JsonSlices>().set(self, whitespace)
    }

    fn string_classes(&self) -> Arc<StringClasses> {
        self.extension::<JsonClasses>()
            .strings
            .get_or_init(|| Arc::new(StringClasses::build(self)))
            .clone()
    }

    fn prefix_string_classes(&self, prefix: &[u8]) -> Option<Arc<StringClasses>> {
        self.extension::<JsonClasses>().prefix_strings(self, prefix)
    }

    fn number_classes(&self, prefix: &[u8]) -> Option<Arc<NumberClasses>> {
        self.extension::<JsonClasses>().numbers(self, prefix)
    }

    fn prepare_json_classes(&self) {
        self.extension::<JsonClasses>().prepared.get_or_init(|| {
            let mut strings: Vec<&[u8]> = Vec::new();
            let mut numbers: Vec<&[u8]> = Vec::new();
            for (_, b) in self.text_tokens() {
                let q = b.iter().position(|c| {
                    !matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b',' | b':' | b'[' | b'{')
                });
                let Some(q) = q else { continue };
                if q + 1 >= b.len() {
                    continue;
                }
                match b[q] {
                    b'"' => strings.push(&b[..=q]),
                    b'-' | b'0'..=b'9' => numbers.push(&b[..=q]),
                    _ => {}
                }
            }
            for v in [&mut strings, &mut numbers] {
                v.sort_unstable();
                v.dedup();
            }
            for p in strings {
                self.prefix_string_classes(p);
            }
            for p in numbers {
                self.number_classes(p);
            }
            self.number_classes(b"");
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every structural slice a document reaches first numbers its probe state and back, for
    /// both whitespace policies, and the probe is at depth 1 in the probe grammar.
    #[test]
    fn common_structural_indices_round_trip_through_their_probes() {
        use super::super::lexer::Whitespace;
        for ws in [Whitespace::Compact, Whitespace::Flexible { max_run: 32 }] {
            let g = JsonGrammar::structural_probe(ws);
            let common = g.common_structural_indices();
            assert!(common.len() >= 30 && common.len() <= 100, "{} indices", common.len());
            for &i in &common {
                let s = JsonGrammar::structural_probe_at(i).expect("a probe state");
                assert_eq!(s.depth(), 1);
                assert_eq!(g.structural_slice_index(&s), Some(i));
            }
        }
    }

    #[test]
    fn reachable_string_sub_states_are_few_and_each_has_a_slice_index_that_round_trips() {
        let subs = reachable_sub_states();
        // After `\`, the surrogate-pair states, \u digits with their flags, UTF-8 bytes left
        // by lead-byte range: a few dozen, not the 515 indices the numbering leaves room for.
        assert!(subs.len() >= 8 && subs.len() <= 64, "{} sub-states: {subs:?}", subs.len());
        for &i in &subs {
            let (_, s) = JsonGrammar::string_probe_at(i);
            assert_eq!(JsonGrammar::string_slice_index(&s), Some(i));
        }
    }
}
