//! The vocabulary cache's own BPE encoder: what a cached vocabulary needs to tokenize text
//! without loading `tokenizer.json` through `tokenizers`.
//!
//! Loading a BPE tokenizer through `tokenizers` costs 0.3–1.3 s (building its string-keyed vocab
//! and merge maps dominates), which is most of a CLI `walk` of a text document even when the
//! vocabulary itself comes from the cache in milliseconds. The merge table is small once it is
//! keyed by ids, so the cache stores it next to the token table ([`BpeEncoder`]: the merges as
//! one sorted row of `(right id, rank, merged id)` per left id, the ids of single-character
//! tokens, the byte-fallback ids, and for `ignore_merges` tokenizers which ids are whole words
//! of the model) and this module replays the model's algorithm on it.
//!
//! # Exactly `tokenizers`, or not at all
//! Only the BPE model step is ours. The normaliser and the pre-tokenizer are `tokenizers`' own
//! objects, stored as the JSON they serialise to and rebuilt on first use (a few milliseconds:
//! the Split regex compiles), so a pre-tokenizer regex, NFC or byte-level mapping behaves as it
//! does in `tokenizers`. The merge loop is the model's (`Word::merge_all`): the queue ordered by
//! rank then position, a popped pair applied only when the pair now at its position still makes
//! the same token, `ignore_merges` looking the whole word up first, unknown characters falling
//! back to `<0xXX>` byte tokens or the (fused) unknown token exactly as `BPE::merge_word` does.
//!
//! Added tokens (`<|im_end|>`, `<tool_call>`) are split out of the text first, as
//! `AddedVocabulary::extract_and_normalize` does: leftmost-longest matches of their contents on
//! the raw text, each match its token, the pieces between them normalised and pre-tokenized
//! apart — for the added tokens matched on the raw text with none of `lstrip`, `rstrip` or
//! `single_word` (those of every tokenizer in `../shared/tokenizers`).
//!
//! What this encoder does not reproduce it declines, and [`super::Vocabulary::encode`] uses
//! `tokenizers` instead:
//! - at build ([`BpeEncoder::from_tokenizer`]): a model other than BPE, merge dropout,
//!   continuing-subword prefixes or end-of-word suffixes, truncation or padding, an unknown
//!   token missing from the vocabulary, `ignore_merges` on a tokenizer that is not byte-level;
//! - per text ([`BpeEncoder::encode`]): a text holding the content of an added token matched
//!   after normalisation (raw or normalised), or of any added token when some added token
//!   strips spaces or matches single words only, or when special tokens are encoded as text.
//!
//! `tests/it/vocab_cache.rs` checks the two encoders give the same ids on real text (MaskBench
//! documents, CJK, emoji, escapes, unusual whitespace, contractions) for every byte-level and
//! SentencePiece-style BPE tokenizer in `../shared/tokenizers`.

use super::decode::CharToByte;
use super::trie::TokTrie;
use super::TokenEncoding;
use crate::token::TokenId;
use std::borrow::Cow;
use std::collections::BinaryHeap;
use std::sync::OnceLock;
use tokenizers::normalizer::Range;
use tokenizers::{
    normalizers::NormalizerWrapper, pre_tokenizers::PreTokenizerWrapper, ModelWrapper,
    NormalizedString, Normalizer, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer,
    Token,
};

/// No id (a byte without a `<0xXX>` token).
pub(crate) const NONE: u32 = u32::MAX;

/// A BPE tokenizer's encoder: the tables the cache stores and what is rebuilt from them on
/// first use; see the module docs.
pub(crate) struct BpeEncoder {
    pub(crate) tables: BpeTables,
    /// The rebuilt `tokenizers` objects, on first use (`None` when they do not rebuild).
    runtime: OnceLock<Option<Runtime>>,
}

/// The stored form of a BPE tokenizer's encoder, and the model's algorithm over it.
pub(crate) struct BpeTables {
    /// `tokenizers`' normaliser, as the JSON it serialises to.
    pub(crate) normalizer: Option<String>,
    /// `tokenizers`' pre-tokenizer, as JSON.
    pub(crate) pre_tokenizer: Option<String>,
    /// Look a whole pre-tokenized word up before merging (Llama 3, gpt-oss). Only byte-level
    /// tokenizers: the word's bytes are found in the trie.
    pub(crate) ignore_merges: bool,
    /// Unknown characters become their UTF-8 bytes' `<0xXX>` tokens where all exist.
    pub(crate) byte_fallback: bool,
    /// Consecutive unknown characters make one unknown token.
    pub(crate) fuse_unk: bool,
    /// The unknown token's id, when the model names one.
    pub(crate) unk: Option<u32>,
    /// The added tokens matched on the raw text, `(content, id)`, sorted: split out of the
    /// text when `split_added`, else a text holding any is left to `tokenizers`.
    pub(crate) added: Vec<(String, u32)>,
    /// Can `added` be split out as `tokenizers` does (no `lstrip`, `rstrip`, `single_word`;
    /// special tokens not encoded as text)?
    pub(crate) split_added: bool,
    /// The added tokens matched after normalisation, raw and normalised: a text holding any is
    /// left to `tokenizers`.
    pub(crate) normalized_added: Vec<String>,
    /// `(char, id)` of every single-character token of the model, sorted by char.
    pub(crate) chars: Vec<(u32, u32)>,
    /// The `<0xXX>` token of each byte ([`NONE`] where missing); empty without byte fallback.
    pub(crate) fallback: Vec<u32>,
    /// With `ignore_merges`: bit `id` set when `id` is a model token whose bytes are exactly
    /// the vocabulary's text bytes of `id` (so the trie finds it by them).
    pub(crate) whole: Vec<u64>,
    /// With `ignore_merges`: the model tokens the trie cannot find (their id is special or an
    /// added token's in the vocabulary), as `(bytes, id)` sorted by bytes.
    pub(crate) extra_words: Vec<(Vec<u8>, u32)>,
    /// Merges by left id: row `l` is `rows[l]..rows[l + 1]` of `right`, `rank`, `merged`,
    /// sorted by right id.
    pub(crate) rows: Vec<u32>,
    pub(crate) right: Vec<u32>,
    pub(crate) rank: Vec<u32>,
    pub(crate) merged: Vec<u32>,
}

/// What [`BpeEncoder::encode`] needs beyond the stored tables.
struct Runtime {
    normalizer: Option<NormalizerWrapper>,
    pre_tokenizer: Option<PreTokenizerWrapper>,
    /// `added`, leftmost-longest, when they are split out.
    split: Option<aho_corasick::AhoCorasick>,
    /// What sends a text to `tokenizers`: `normalized_added`, and `added` when not split out.
    refuse: Option<aho_corasick::AhoCorasick>,
    bytes: CharToByte,
}

impl BpeEncoder {
    /// The encoder of `tables`, checked against a vocabulary of `n_tokens` ids
    /// ([`BpeTables::check`]); nothing is rebuilt yet.
    pub(crate) fn new(tables: BpeTables, n_tokens: usize) -> Result<BpeEncoder, String> {
        tables.check(n_tokens)?;
        Ok(BpeEncoder { tables, runtime: OnceLock::new() })
    }

    /// Derive the encoder of a vocabulary built from `tok` (`bytes_of(id)` its text bytes,
    /// `None` for a special or padding id), or say why it cannot be reproduced.
    pub(crate) fn from_tokenizer<'a>(
        tok: &tokenizers::Tokenizer,
        encoding: TokenEncoding,
        n_tokens: usize,
        bytes_of: impl Fn(u32) -> Option<&'a [u8]>,
    ) -> Result<BpeEncoder, String> {
        let ModelWrapper::BPE(bpe) = tok.get_model() else {
            return Err("the model is not BPE".into());
        };
        if bpe.dropout.is_some_and(|d| d > 0.0) {
            return Err("the model drops merges at random".into());
        }
        let empty = |s: &Option<String>| s.as_deref().is_none_or(str::is_empty);
        if !empty(&bpe.continuing_subword_prefix) || !empty(&bpe.end_of_word_suffix) {
            return Err("the model has a subword prefix or suffix".into());
        }
        if tok.get_truncation().is_some() || tok.get_padding().is_some() {
            return Err("the tokenizer truncates or pads".into());
        }
        let byte_level = encoding == TokenEncoding::ByteLevel;
        if bpe.ignore_merges && !byte_level {
            return Err("ignore_merges on a tokenizer that is not byte-level".into());
        }
        let vocab = bpe.get_vocab();
        let unk = match &bpe.unk_token {
            None => None,
            Some(u) => Some(*vocab.get(u).ok_or("the unknown token is not in the vocabulary")?),
        };
        if vocab.values().any(|&id| id as usize >= n_tokens) {
            return Err("a model id is past the vocabulary's ids".into());
        }
        // The merges in rank order, as the model serialises them (its merge map is not
        // public); read back borrowing the strings, and looked up in a map borrowing the
        // vocabulary's: 0.2–0.4 s less than through a `serde_json::Value` and owned keys.
        #[derive(serde::Deserialize)]
        struct Merges<'a> {
            #[serde(borrow)]
            merges: Vec<(Cow<'a, str>, Cow<'a, str>)>,
        }
        let json = serde_json::to_vec(bpe).map_err(|e| e.to_string())?;
        let pairs = serde_json::from_slice::<Merges<'_>>(&json).map_err(|e| e.to_string())?.merges;
        let ids: rustc_hash::FxHashMap<&str, u32> =
            vocab.iter().map(|(s, &id)| (s.as_str(), id)).collect();
        let mut joined = String::new();
        let mut table: Vec<(u32, u32, u32, u32)> = Vec::with_capacity(pairs.len());
        for (rank, (a, b)) in pairs.iter().enumerate() {
            let id = |s: &str| ids.get(s).copied().ok_or("a merge names an unknown token");
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            table.push((id(a)?, id(b)?, rank as u32, id(&joined)?));
        }
        table.sort_unstable();
        let rows_n = table.last().map_or(0, |t| t.0 as usize + 1);
        let mut rows = vec![0u32; rows_n + 1];
        for t in &table {
            rows[t.0 as usize + 1] += 1;
        }
        for i in 0..rows_n {
            rows[i + 1] += rows[i];
        }
        let right = table.iter().map(|t| t.1).collect();
        let rank = table.iter().map(|t| t.2).collect();
        let merged = table.iter().map(|t| t.3).collect();
        let mut chars: Vec<(u32, u32)> = vocab
            .iter()
            .filter_map(|(s, &id)| {
                let mut it = s.chars();
                match (it.next(), it.next()) {
                    (Some(c), None) => Some((c as u32, id)),
                    _ => None,
                }
            })
            .collect();
        chars.sort_unstable();
        let fallback = match bpe.byte_fallback {
            false => Vec::new(),
            true => (0..=255u8)
                .map(|b| vocab.get(&format!("<{b:#04X}>")).copied().unwrap_or(NONE))
                .collect(),
        };
        let (mut whole, mut extra_words) = (Vec::new(), Vec::new());
        if bpe.ignore_merges {
            whole = vec![0u64; n_tokens.div_ceil(64)];
            let map = CharToByte::new();
            for (s, &id) in &vocab {
                let bytes: Option<Vec<u8>> = s.chars().map(|c| map.get(c)).collect();
                let Some(bytes) = bytes else {
                    return Err(format!("the model token {s:?} is not byte-level"));
                };
                if bytes_of(id) == Some(&bytes[..]) {
                    whole[id as usize / 64] |= 1 << (id % 64);
                } else {
                    extra_words.push((bytes, id));
                }
            }
            extra_words.sort_unstable();
        }
        let normalizer = tok.get_normalizer();
        let json = |v: Option<String>| v.filter(|s| s != "null");
        let normalizer_json =
            json(normalizer.map(serde_json::to_string).transpose().map_err(|e| e.to_string())?);
        let pre_json = json(
            tok.get_pre_tokenizer()
                .map(serde_json::to_string)
                .transpose()
                .map_err(|e| e.to_string())?,
        );
        let (mut added, mut normalized_added) = (Vec::new(), Vec::new());
        let mut split_added = !tok.get_encode_special_tokens();
        for (&id, a) in &tok.get_added_tokens_decoder() {
            split_added &= !(a.lstrip || a.rstrip || a.single_word);
            if !a.normalized {
                added.push((a.content.clone(), id));
                continue;
            }
            normalized_added.push(a.content.clone());
            if let Some(n) = normalizer {
                let mut s = NormalizedString::from(a.content.as_str());
                n.normalize(&mut s).map_err(|e| e.to_string())?;
                normalized_added.push(s.get().to_string());
            }
        }
        added.sort_unstable();
        // Two added tokens of one content: `tokenizers` maps the content to one id; which is
        // not worth guessing.
        if added.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err("two added tokens share a content".into());
        }
        normalized_added.sort_unstable();
        normalized_added.dedup();
        let tables = BpeTables {
            normalizer: normalizer_json,
            pre_tokenizer: pre_json,
            ignore_merges: bpe.ignore_merges,
            byte_fallback: bpe.byte_fallback,
            fuse_unk: bpe.fuse_unk,
            unk,
            added,
            split_added,
            normalized_added,
            chars,
            fallback,
            whole,
            extra_words,
            rows,
            right,
            rank,
            merged,
        };
        let enc = BpeEncoder::new(tables, n_tokens)?;
        if enc.runtime().is_none() {
            return Err("the normaliser or pre-tokenizer does not rebuild from its JSON".into());
        }
        Ok(enc)
    }

    fn runtime(&self) -> Option<&Runtime> {
        let t = &self.tables;
        self.runtime
            .get_or_init(|| {
                let normalizer = match &t.normalizer {
                    None => None,
                    Some(j) => Some(serde_json::from_str::<NormalizerWrapper>(j).ok()?),
                };
                let pre_tokenizer = match &t.pre_tokenizer {
                    None => None,
                    Some(j) => Some(serde_json::from_str::<PreTokenizerWrapper>(j).ok()?),
                };
                let contents = t.added.iter().map(|(c, _)| c.as_str());
                let normalized = t.normalized_added.iter().map(String::as_str);
                let (split, refuse): (Vec<&str>, Vec<&str>) = match t.split_added {
                    true => (contents.collect(), normalized.collect()),
                    false => (Vec::new(), contents.chain(normalized).collect()),
                };
                let automaton = |patterns: Vec<&str>| match patterns.is_empty() {
                    true => Ok(None),
                    false => aho_corasick::AhoCorasick::builder()
                        .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                        .build(patterns)
                        .map(Some),
                };
                Some(Runtime {
                    normalizer,
                    pre_tokenizer,
                    split: automaton(split).ok()?,
                    refuse: automaton(refuse).ok()?,
                    bytes: CharToByte::new(),
                })
            })
            .as_ref()
    }

    /// Encode `text` as `tokenizers` would (no special tokens added), appending to `out`; or
    /// `None`, leaving `out` as it was, when this text is left to `tokenizers` (see the
    /// module docs). `trie` is the vocabulary's.
    pub(crate) fn encode(&self, text: &str, trie: &TokTrie, out: &mut Vec<TokenId>) -> Option<()> {
        let rt = self.runtime()?;
        let refused = |s: &str| rt.refuse.as_ref().is_some_and(|a| a.is_match(s));
        if refused(text) {
            return None;
        }
        let mut pts = PreTokenizedString::from(text);
        if let Some(split) = &rt.split {
            pts.split(|_, s| self.tables.split_added(s, split)).ok()?;
        }
        if let Some(n) = &rt.normalizer {
            pts.normalize(|s| n.normalize(s)).ok()?;
            let splits = pts.get_splits(OffsetReferential::Normalized, OffsetType::Byte);
            if splits.iter().any(|(s, _, tokens)| tokens.is_none() && refused(s)) {
                return None;
            }
        }
        if let Some(p) = &rt.pre_tokenizer {
            p.pre_tokenize(&mut pts).ok()?;
        }
        // From here on every piece encodes: nothing is left to `tokenizers` half-way.
        let mut scratch = Scratch::default();
        for (piece, _, tokens) in pts.get_splits(OffsetReferential::Original, OffsetType::Byte) {
            match tokens {
                Some(tokens) => out.extend(tokens.iter().map(|t| TokenId(t.id))),
                None => self.tables.word(piece, rt, trie, &mut scratch, out),
            }
        }
        Some(())
    }
}

impl BpeTables {
    /// Check the tables against a vocabulary of `n_tokens` ids: every id in range, rows well
    /// formed and sorted. A cache file that passes its checksum but not this is refused.
    pub(crate) fn check(&self, n_tokens: usize) -> Result<(), String> {
        let n = n_tokens as u32;
        let ids_ok = |ids: &[u32]| ids.iter().all(|&i| i < n);
        let m = self.right.len();
        let rows_ok = self.rows.first() == Some(&0)
            && self.rows.last().is_some_and(|&e| e as usize == m)
            && self.rows.len() <= n_tokens + 1
            && self.rows.windows(2).all(|w| w[0] <= w[1])
            && self.rank.len() == m
            && self.merged.len() == m
            && self
                .rows
                .windows(2)
                .all(|w| self.right[w[0] as usize..w[1] as usize].windows(2).all(|p| p[0] < p[1]));
        if !rows_ok || !ids_ok(&self.right) || !ids_ok(&self.merged) {
            return Err("the merge table is malformed".into());
        }
        let chars_ok = self.chars.windows(2).all(|w| w[0].0 < w[1].0)
            && self.chars.iter().all(|&(c, id)| char::from_u32(c).is_some() && id < n);
        let fallback_ok = self.fallback.len() == if self.byte_fallback { 256 } else { 0 }
            && self.fallback.iter().all(|&i| i == NONE || i < n);
        let words_ok = self.extra_words.windows(2).all(|w| w[0].0 < w[1].0)
            && self.extra_words.iter().all(|(_, id)| *id < n)
            && self.whole.len() == if self.ignore_merges { n_tokens.div_ceil(64) } else { 0 };
        let added_ok =
            self.added.windows(2).all(|w| w[0] < w[1]) && self.added.iter().all(|(_, id)| *id < n);
        if !chars_ok || !fallback_ok || !words_ok || !added_ok || self.unk.is_some_and(|u| u >= n) {
            return Err("the encoder's token tables are malformed".into());
        }
        Ok(())
    }

    /// `AddedVocabulary::split_with_indices` for added tokens without `lstrip`, `rstrip` or
    /// `single_word`: the leftmost-longest matches become their tokens, the text between them
    /// stays to be normalised and pre-tokenized.
    fn split_added(
        &self,
        s: NormalizedString,
        split: &aho_corasick::AhoCorasick,
    ) -> tokenizers::Result<Vec<(NormalizedString, Option<Vec<Token>>)>> {
        let text = s.get();
        let slice = |lo: usize, hi: usize| {
            s.slice(Range::Normalized(lo..hi)).ok_or("an added token split off a character")
        };
        let mut out = Vec::new();
        let mut start = 0;
        for m in split.find_iter(text) {
            if start < m.start() {
                out.push((slice(start, m.start())?, None));
            }
            let piece = slice(m.start(), m.end())?;
            let value = piece.get().to_owned();
            let len = value.len();
            let id = self.added[m.pattern().as_usize()].1;
            out.push((piece, Some(vec![Token::new(id, value, (0, len))])));
            start = m.end();
        }
        if start < text.len() {
            out.push((slice(start, text.len())?, None));
        }
        Ok(out)
    }

    /// The id of a single-character token.
    fn char_id(&self, c: char) -> Option<u32> {
        let c = c as u32;
        self.chars.binary_search_by_key(&c, |&(k, _)| k).ok().map(|i| self.chars[i].1)
    }

    /// `(rank, merged id)` of the merge of `left` then `right`.
    #[inline]
    fn merge_of(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        let l = left as usize;
        if l + 1 >= self.rows.len() {
            return None;
        }
        let (lo, hi) = (self.rows[l] as usize, self.rows[l + 1] as usize);
        let i = lo + self.right[lo..hi].binary_search(&right).ok()?;
        Some((self.rank[i], self.merged[i]))
    }

    /// `BPE::tokenize_with_cache` of one pre-tokenized word.
    fn word(
        &self,
        word: &str,
        rt: &Runtime,
        trie: &TokTrie,
        scratch: &mut Scratch,
        out: &mut Vec<TokenId>,
    ) {
        if word.is_empty() {
            return;
        }
        if self.ignore_merges {
            if let Some(id) = self.whole_word(word, rt, trie, scratch) {
                out.push(TokenId(id));
                return;
            }
        }
        // `BPE::merge_word`: each character's token, else its bytes' `<0xXX>` tokens, else the
        // unknown token (fused with the one before when the model says so), else nothing.
        let syms = &mut scratch.syms;
        syms.clear();
        let mut unk: Option<u32> = None;
        for c in word.chars() {
            if let Some(id) = self.char_id(c) {
                if let Some(u) = unk.take() {
                    syms.push(u);
                }
                syms.push(id);
                continue;
            }
            if self.byte_fallback {
                let mut buf = [0u8; 4];
                let bytes = c.encode_utf8(&mut buf).as_bytes();
                if bytes.iter().all(|&b| self.fallback[b as usize] != NONE) {
                    syms.extend(bytes.iter().map(|&b| self.fallback[b as usize]));
                    continue;
                }
            }
            if let Some(u) = self.unk {
                unk = match (unk, self.fuse_unk) {
                    (Some(prev), true) => Some(prev),
                    (Some(prev), false) => {
                        syms.push(prev);
                        Some(u)
                    }
                    (None, _) => Some(u),
                };
            }
        }
        if let Some(u) = unk {
            syms.push(u);
        }
        self.merge_all(scratch);
        out.extend(scratch.live().map(TokenId));
    }

    /// The model token that is exactly `word`, looked up by its bytes.
    fn whole_word(
        &self,
        word: &str,
        rt: &Runtime,
        trie: &TokTrie,
        scratch: &mut Scratch,
    ) -> Option<u32> {
        let bytes = &mut scratch.bytes;
        bytes.clear();
        for c in word.chars() {
            // A character outside the byte-level alphabet is in no model token (checked when
            // the table was made).
            bytes.push(rt.bytes.get(c)?);
        }
        let mut found = None;
        trie.prefix_tokens(bytes, |len, t| {
            let i = t.0 as usize;
            if len == bytes.len() && found.is_none() && self.whole[i / 64] >> (i % 64) & 1 != 0 {
                found = Some(t.0);
            }
        });
        found.or_else(|| {
            let i = self.extra_words.binary_search_by(|(b, _)| b[..].cmp(bytes)).ok()?;
            Some(self.extra_words[i].1)
        })
    }

    /// `Word::merge_all` without dropout: pairs popped by rank then position; a popped pair
    /// whose position has been merged away, ends the word, or no longer makes the same token
    /// is stale and skipped.
    fn merge_all(&self, s: &mut Scratch) {
        let n = s.syms.len();
        s.prev.clear();
        s.next.clear();
        s.prev.extend((0..n).map(|i| i as i64 - 1));
        s.next.extend((0..n).map(|i| if i + 1 < n { i as i64 + 1 } else { -1 }));
        s.alive.clear();
        s.alive.resize(n, true);
        s.queue.clear();
        for i in 0..n.saturating_sub(1) {
            if let Some((rank, new)) = self.merge_of(s.syms[i], s.syms[i + 1]) {
                s.queue.push(std::cmp::Reverse((rank, i, new)));
            }
        }
        while let Some(std::cmp::Reverse((_, pos, new))) = s.queue.pop() {
            if !s.alive[pos] || s.next[pos] < 0 {
                continue;
            }
            let next = s.next[pos] as usize;
            if self.merge_of(s.syms[pos], s.syms[next]).is_none_or(|(_, id)| id != new) {
                continue;
            }
            s.syms[pos] = new;
            s.alive[next] = false;
            s.next[pos] = s.next[next];
            if s.next[next] >= 0 {
                s.prev[s.next[next] as usize] = pos as i64;
            }
            if s.prev[pos] >= 0 {
                let p = s.prev[pos] as usize;
                if let Some((rank, id)) = self.merge_of(s.syms[p], new) {
                    s.queue.push(std::cmp::Reverse((rank, p, id)));
                }
            }
            if s.next[pos] >= 0 {
                let q = s.next[pos] as usize;
                if let Some((rank, id)) = self.merge_of(new, s.syms[q]) {
                    s.queue.push(std::cmp::Reverse((rank, pos, id)));
                }
            }
        }
    }
}

/// Buffers reused across the words of one text.
#[derive(Default)]
struct Scratch {
    syms: Vec<u32>,
    prev: Vec<i64>,
    next: Vec<i64>,
    alive: Vec<bool>,
    queue: BinaryHeap<std::cmp::Reverse<(u32, usize, u32)>>,
    bytes: Vec<u8>,
}

impl Scratch {
    /// The symbols left after merging, in order.
    fn live(&self) -> impl Iterator<Item = u32> + '_ {
        self.syms.iter().zip(&self.alive).filter(|(_, &a)| a).map(|(&s, _)| s)
    }
}
