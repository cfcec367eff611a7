//! The flat byte trie over token texts, and the one walker that turns any [`Recognizer`] into a
//! vocabulary mask.
//!
//! # Layout
//! Nodes are stored in depth-first order in one `Vec<Node>` of 8-byte nodes: the byte on the edge
//! into the node, the token ending there (if any) and the size of the subtree rooted there
//! (the node itself included). Children of a node follow it directly; its next sibling is at
//! `index + subtree_size`. Node 0 is the root (no byte). This is llguidance's `toktrie` layout:
//! one sequential sweep, no pointers, and a refused byte skips a whole subtree with one add.
//!
//! # Invariants
//! - **The trie is immutable after construction** and shared (`Send + Sync`) by every engine of a
//!   vocabulary.
//! - A node carries at most one token id inline; tokens with identical bytes (e.g. `▁` and
//!   `<0x20>` in SentencePiece vocabularies) are listed in a side table flagged on the node.
//! - Only text tokens with at least one byte are in the trie; special tokens never are.

use crate::bytes::ByteSet;
use crate::mask::{TokenMask, WORD_BITS};
use crate::recognizer::Recognizer;
use crate::token::TokenId;
use rustc_hash::FxHashMap;

const BYTE_BITS: u32 = 8;
const TOKEN_LIMIT: u32 = (1 << (32 - BYTE_BITS)) - 1;
const DUP_FLAG: u32 = 1 << 31;
/// Depths down to which the walkers ask [`Recognizer::byte_superset`] (deeper, every byte is
/// offered to the recogniser).
const FILTER_DEPTH: usize = 32;
/// Longest token (in bytes) the walker supports; longer tokens are refused at construction.
pub const MAX_TOKEN_BYTES: usize = 1024;

#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Node {
    /// `byte | (token + 1) << 8`; token field 0 means "no token ends here".
    bits: u32,
    /// Subtree size (node included) in the low 31 bits; [`DUP_FLAG`] if more tokens end here.
    size: u32,
}
const _: () = assert!(std::mem::size_of::<Node>() == 8);

impl Node {
    #[inline(always)]
    fn byte(self) -> u8 {
        self.bits as u8
    }
    #[inline(always)]
    fn token_plus_one(self) -> u32 {
        self.bits >> BYTE_BITS
    }
    #[inline(always)]
    fn subtree(self) -> usize {
        (self.size & !DUP_FLAG) as usize
    }
}

/// A hook for [`TokTrie::walk_hooked`]: answers a whole subtree from the recogniser's state
/// after the path's last byte.
pub trait WalkHook<R: ?Sized> {
    /// Called after `path` (the bytes from the root to the current node, non-empty) was
    /// accepted and the node has descendants. Return `true` after setting in `mask` every
    /// token strictly below the node that `rec` accepts (`rec` must be left as it was);
    /// `false` to let the walk descend.
    fn after_push(&mut self, rec: &mut R, path: &[u8], mask: &mut TokenMask) -> bool;

    /// Called after every byte the walk offers `rec` (node `node` of the trie, at `depth`
    /// below the root, 0 for the root's children), `pushed` saying whether `rec` took it, before
    /// anything else looks at the node. The default does nothing.
    #[inline(always)]
    fn attempted(&mut self, _rec: &mut R, _node: usize, _depth: usize, _pushed: bool) {}
}

/// The hook of the plain [`TokTrie::walk`]: never answers a subtree.
struct NoHook;

impl<R: ?Sized> WalkHook<R> for NoHook {
    #[inline(always)]
    fn after_push(&mut self, _: &mut R, _: &[u8], _: &mut TokenMask) -> bool {
        false
    }
}

/// One byte of the path hash [`TokTrie::from_stored_parts`] checks nodes against tokens with.
#[inline(always)]
fn path_hash_step(h: u64, b: u8) -> u64 {
    (h ^ u64::from(b)).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(23)
}

/// The path hash of `len` bytes ending in state `h`: never 0.
#[inline(always)]
fn path_hash_end(h: u64, len: usize) -> u64 {
    (h ^ (len as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)) | 1
}

/// Pop the walk's path back to the parent of node `i`: the depths whose subtree ends at or
/// before `i` (`ends[d]`, the end of the subtree entered at depth `d`) are left.
#[inline(always)]
fn leave_subtrees<R: Recognizer + ?Sized>(rec: &mut R, ends: &[u32], depth: &mut usize, i: usize) {
    let mut pop = 0;
    while *depth > 0 && i >= ends[*depth - 1] as usize {
        *depth -= 1;
        pop += 1;
    }
    if pop > 0 {
        rec.pop_bytes(pop);
    }
}

/// A trie as the vocabulary cache stores it: the nodes as `bits, size` word pairs in
/// depth-first order, the duplicate tokens per node (sorted by node), and per node the id of
/// the set of bytes below it, with the sets as words.
pub(crate) struct StoredTrie {
    pub(crate) nodes: Vec<u32>,
    pub(crate) dups: Vec<(u32, Vec<u32>)>,
    pub(crate) below: Vec<u32>,
    pub(crate) below_sets: Vec<[u64; 4]>,
}

/// A byte trie over a set of tokens, flattened depth-first.
#[derive(Clone)]
pub struct TokTrie {
    nodes: Vec<Node>,
    /// Per node, the bytes on the edges strictly below it, as an index into `below_sets`
    /// (deduplicated: most nodes are leaves). See [`Recognizer::stay_set`].
    below: Vec<u32>,
    below_sets: Vec<ByteSet>,
    /// Every token in node order (duplicates after their node's own), and per node the index of
    /// the first at or after it (one more entry at the end): a subtree's tokens are one slice.
    dfs_tokens: Vec<u32>,
    dfs_start: Vec<u32>,
    dups: FxHashMap<u32, Box<[TokenId]>>,
    max_depth: usize,
    n_tokens: usize,
    /// The root's child for each byte (0: none): the root has up to 256 children, and a
    /// sibling scan to a letter's crossed ~90 subtrees (a cache miss each) for every token
    /// of a greedy spelling ([`TokTrie::prefix_tokens`]). Derived, not stored.
    root_child: Box<[u32; 256]>,
}

impl std::fmt::Debug for TokTrie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokTrie")
            .field("nodes", &self.nodes.len())
            .field("tokens", &self.n_tokens)
            .field("max_depth", &self.max_depth)
            .finish()
    }
}

impl TokTrie {
    /// Build a trie over `(id, bytes)` pairs. Empty byte strings are skipped.
    ///
    /// # Panics
    /// Panics if an id is too large for the packed node (≥ 2^24 − 1) or a token is longer than
    /// [`MAX_TOKEN_BYTES`]; [`crate::Vocabulary`] checks both first and reports a typed error.
    pub fn build<'a>(tokens: impl IntoIterator<Item = (TokenId, &'a [u8])>) -> TokTrie {
        let mut items: Vec<(&'a [u8], TokenId)> =
            tokens.into_iter().filter(|(_, b)| !b.is_empty()).map(|(t, b)| (b, t)).collect();
        items.sort_unstable();
        let mut nodes: Vec<Node> = Vec::with_capacity(items.len() * 2 + 1);
        nodes.push(Node { bits: 0, size: 0 });
        let mut dups: FxHashMap<u32, Vec<TokenId>> = FxHashMap::default();
        // path[d] = index of the node at depth d + 1 on the current path.
        let mut path: Vec<usize> = Vec::new();
        let mut prev: &[u8] = &[];
        let mut max_depth = 0;
        for &(bytes, id) in &items {
            assert!(id.0 < TOKEN_LIMIT, "token id {id:?} too large for the trie");
            assert!(bytes.len() <= MAX_TOKEN_BYTES, "token {id:?} longer than MAX_TOKEN_BYTES");
            let lcp = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            while path.len() > lcp {
                let idx = path.pop().expect("non-empty path");
                let size = (nodes.len() - idx) as u32;
                nodes[idx].size = (nodes[idx].size & DUP_FLAG) | size;
            }
            if lcp == bytes.len() {
                // Same bytes as the previous token: a duplicate on the same node.
                let idx = *path.last().expect("duplicate of a non-empty token");
                nodes[idx].size |= DUP_FLAG;
                dups.entry(idx as u32).or_default().push(id);
                continue;
            }
            for &b in &bytes[lcp..] {
                path.push(nodes.len());
                nodes.push(Node { bits: u32::from(b), size: 0 });
            }
            let last = *path.last().expect("at least one byte");
            nodes[last].bits |= (id.0 + 1) << BYTE_BITS;
            max_depth = max_depth.max(bytes.len());
            prev = bytes;
        }
        while let Some(idx) = path.pop() {
            let size = (nodes.len() - idx) as u32;
            nodes[idx].size = (nodes[idx].size & DUP_FLAG) | size;
        }
        nodes[0].size = nodes.len() as u32;
        let dups: FxHashMap<u32, Box<[TokenId]>> =
            dups.into_iter().map(|(k, v)| (k, v.into_boxed_slice())).collect();
        let (below, below_sets) = Self::below_sets(&nodes);
        Self::finish(nodes, dups, max_depth, items.len(), below, below_sets)
    }

    /// The trie with its tokens in node order, from the nodes and the bytes below each.
    fn finish(
        nodes: Vec<Node>,
        dups: FxHashMap<u32, Box<[TokenId]>>,
        max_depth: usize,
        n_tokens: usize,
        below: Vec<u32>,
        below_sets: Vec<ByteSet>,
    ) -> TokTrie {
        let mut dfs_tokens = Vec::with_capacity(n_tokens);
        let mut dfs_start = Vec::with_capacity(nodes.len() + 1);
        for (i, node) in nodes.iter().enumerate() {
            dfs_start.push(dfs_tokens.len() as u32);
            let t = node.token_plus_one();
            if t != 0 {
                dfs_tokens.push(t - 1);
                if node.size & DUP_FLAG != 0 {
                    dfs_tokens.extend(dups[&(i as u32)].iter().map(|d: &TokenId| d.0));
                }
            }
        }
        dfs_start.push(dfs_tokens.len() as u32);
        let mut root_child = Box::new([0u32; 256]);
        let mut i = 1;
        while i < nodes.len() {
            root_child[nodes[i].byte() as usize] = i as u32;
            i += nodes[i].subtree();
        }
        TokTrie {
            nodes,
            below,
            below_sets,
            dfs_tokens,
            dfs_start,
            dups,
            max_depth,
            n_tokens,
            root_child,
        }
    }

    /// The stored form of the trie (for the vocabulary cache, `vocab/cache.rs`).
    pub(crate) fn stored_parts(&self) -> StoredTrie {
        let mut dups: Vec<(u32, Vec<u32>)> =
            self.dups.iter().map(|(&k, v)| (k, v.iter().map(|t| t.0).collect())).collect();
        dups.sort_unstable();
        StoredTrie {
            nodes: self.nodes.iter().flat_map(|n| [n.bits, n.size]).collect(),
            dups,
            below: self.below.clone(),
            below_sets: self.below_sets.iter().map(|s| *s.words()).collect(),
        }
    }

    /// Rebuild a trie from [`TokTrie::stored_parts`], trusting nothing: the nodes must form a
    /// well-nested depth-first tree with strictly increasing sibling bytes, every leaf must end
    /// a token, every token a node carries must be one of `token_bytes`'s ids (`0..n_ids`)
    /// whose bytes are the path to that node (compared through a 64-bit path hash), every id
    /// with non-empty bytes must appear exactly once, and every node's bytes-below set must be
    /// its children's union. Such a trie is the one [`TokTrie::build`] makes from the same
    /// tokens (the layout is canonical), so barring a crafted hash collision a cache read back
    /// passes this check iff it is the trie of the stored token table. One pass, no sort.
    pub(crate) fn from_stored_parts<'a>(
        stored: StoredTrie,
        n_ids: usize,
        token_bytes: impl Fn(usize) -> &'a [u8],
    ) -> Result<TokTrie, String> {
        let StoredTrie { nodes: raw, dups: stored_dups, below, below_sets } = stored;
        if raw.len() % 2 != 0 {
            return Err("the node table is malformed".into());
        }
        let nodes: Vec<Node> =
            raw.chunks_exact(2).map(|c| Node { bits: c[0], size: c[1] }).collect();
        drop(raw);
        let n = nodes.len();
        match nodes.first() {
            Some(root) if root.bits == 0 && root.size == n as u32 => {}
            _ => return Err("the root node is malformed".into()),
        }
        let mut dups: FxHashMap<u32, Box<[TokenId]>> = FxHashMap::default();
        for (node, ids) in stored_dups {
            let ok = (node as usize) < n
                && nodes[node as usize].size & DUP_FLAG != 0
                && !ids.is_empty()
                && !dups.contains_key(&node);
            if !ok {
                return Err(format!("duplicate-token entry for node {node} is malformed"));
            }
            dups.insert(node, ids.into_iter().map(TokenId).collect());
        }
        // Per id, the path hash of the node carrying it (0: none). Checked against the hash of
        // the id's bytes afterwards, in id order: comparing the bytes themselves in trie order
        // reads the token table at random (a cache miss per token, most of the check's time),
        // and so would reading `seen` here, so it is only written. An id written twice leaves
        // fewer ids with a hash than writes, which the count below catches. A 64-bit hash
        // cannot be fooled by accident, and accidents are what this is for: corruption is the
        // checksum's job.
        let mut seen = vec![0u64; n_ids];
        let mut n_tokens = 0usize;
        let mut mark = |t: u32, hash: u64| -> Result<(), String> {
            let Some(slot) = seen.get_mut(t as usize) else {
                return Err(format!("token {t} is out of range"));
            };
            *slot = hash;
            n_tokens += 1;
            Ok(())
        };
        let below_sets: Vec<ByteSet> = below_sets.into_iter().map(ByteSet::from_words).collect();
        if below.len() != n || below.iter().any(|&b| b as usize >= below_sets.len()) {
            return Err("the bytes-below table is malformed".into());
        }
        // The ancestors of the current node, root first: each one's index, where its subtree
        // ends, the last child byte seen under it (256 = none yet), the bytes seen below it so
        // far (checked against its stored set when its subtree closes) and the path's hash.
        struct Open {
            node: usize,
            end: usize,
            last_byte: u16,
            below: ByteSet,
            hash: u64,
        }
        let close = |o: &Open, stack: &mut Vec<Open>| -> Result<(), String> {
            if o.below != below_sets[below[o.node] as usize] {
                return Err(format!("the bytes below node {} are wrong", o.node));
            }
            if let Some(parent) = stack.last_mut() {
                parent.below.union_with(&o.below);
                parent.below.insert(nodes[o.node].byte());
            }
            Ok(())
        };
        let root = Open { node: 0, end: n, last_byte: 256, below: ByteSet::EMPTY, hash: 0 };
        let mut stack: Vec<Open> = vec![root];
        let mut max_depth = 0;
        let mut n_dup_nodes = 0;
        for (i, node) in nodes.iter().enumerate().skip(1) {
            while stack.len() > 1 && stack.last().is_some_and(|o| o.end <= i) {
                let o = stack.pop().expect("non-empty");
                close(&o, &mut stack)?;
            }
            let parent = stack.last_mut().expect("the root stays open");
            let size = node.subtree();
            let b = node.byte();
            if size == 0
                || i + size > parent.end
                || (parent.last_byte != 256 && parent.last_byte >= u16::from(b))
            {
                return Err(format!("node {i} is not nested in its parent"));
            }
            parent.last_byte = u16::from(b);
            let hash = path_hash_step(parent.hash, b);
            let depth = stack.len();
            if depth > MAX_TOKEN_BYTES {
                return Err(format!("node {i} is deeper than {MAX_TOKEN_BYTES} bytes"));
            }
            max_depth = max_depth.max(depth);
            let t = node.token_plus_one();
            if size == 1 {
                // A leaf: nothing below it, no need to open it.
                if below_sets[below[i] as usize] != ByteSet::EMPTY {
                    return Err(format!("the bytes below node {i} are wrong"));
                }
                stack.last_mut().expect("root").below.insert(b);
            } else {
                stack.push(Open {
                    node: i,
                    end: i + size,
                    last_byte: 256,
                    below: ByteSet::EMPTY,
                    hash,
                });
            }
            if t == 0 {
                if size == 1 || node.size & DUP_FLAG != 0 {
                    return Err(format!("node {i} is a leaf or duplicate without a token"));
                }
                continue;
            }
            let hash = path_hash_end(hash, depth);
            mark(t - 1, hash)?;
            if node.size & DUP_FLAG != 0 {
                let Some(ids) = dups.get(&(i as u32)) else {
                    return Err(format!("node {i} is flagged with duplicates but has none"));
                };
                for d in ids.iter() {
                    mark(d.0, hash)?;
                }
                n_dup_nodes += 1;
            }
        }
        while let Some(o) = stack.pop() {
            close(&o, &mut stack)?;
        }
        if n_dup_nodes != dups.len() {
            return Err("duplicate-token entries name nodes that are not flagged".into());
        }
        let mut n_text = 0;
        for (i, &got) in seen.iter().enumerate() {
            let bytes = token_bytes(i);
            let want = match bytes.is_empty() {
                true => 0,
                false => {
                    n_text += 1;
                    path_hash_end(bytes.iter().fold(0, |h, &b| path_hash_step(h, b)), bytes.len())
                }
            };
            if got != want {
                return Err(format!("token {i}'s node does not spell its bytes"));
            }
        }
        if n_tokens != n_text {
            return Err(format!("the trie holds {n_tokens} tokens, the table {n_text}"));
        }
        Ok(Self::finish(nodes, dups, max_depth, n_tokens, below, below_sets))
    }

    /// Per node, the set of bytes on the edges below it (children's bytes and theirs, in
    /// reverse depth-first order so children come first), deduplicated.
    fn below_sets(nodes: &[Node]) -> (Vec<u32>, Vec<ByteSet>) {
        // Set 0 is the empty set of every leaf (about half the nodes): no lookup for them, and
        // a node's set is built from its children's set ids, so no per-node array of sets.
        let n = nodes.len();
        let mut below = vec![0u32; n];
        let mut sets = vec![ByteSet::EMPTY];
        let mut ids: FxHashMap<ByteSet, u32> = FxHashMap::default();
        ids.insert(ByteSet::EMPTY, 0);
        for i in (0..n).rev() {
            let size = nodes[i].subtree();
            if size <= 1 {
                continue;
            }
            let end = i + size;
            let mut s = ByteSet::EMPTY;
            let mut j = i + 1;
            while j < end {
                s.insert(nodes[j].byte());
                s.union_with(&sets[below[j] as usize]);
                j += nodes[j].subtree();
            }
            below[i] = *ids.entry(s).or_insert_with(|| {
                sets.push(s);
                sets.len() as u32 - 1
            });
        }
        (below, sets)
    }

    /// Are all bytes below node `i` in `set`?
    #[inline(always)]
    fn below_within(&self, i: usize, set: &ByteSet) -> bool {
        self.below_sets[self.below[i] as usize].is_subset(set)
    }

    /// Number of nodes (root included).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of tokens in the trie.
    pub fn token_count(&self) -> usize {
        self.n_tokens
    }

    /// Length in bytes of the longest token (the deepest a walk goes).
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// How many tokens the trie holds.
    pub fn n_tokens(&self) -> usize {
        self.n_tokens
    }

    /// Walk the whole trie with `rec`, setting in `mask` every token whose bytes `rec` accepts
    /// from its current state. Bits already set in `mask` stay set. `rec` is back in its starting
    /// state when this returns.
    ///
    /// This is the one hot loop of every engine: one pass over the node array, a refused byte
    /// skips its subtree, an accepted byte descends. Bytes outside the recogniser's
    /// [`Recognizer::byte_superset`] are skipped without asking it.
    pub fn walk<R: Recognizer + ?Sized>(&self, rec: &mut R, mask: &mut TokenMask) {
        self.walk_hooked(rec, mask, &mut NoHook);
    }

    /// [`TokTrie::walk`] with a hook: after every accepted byte, `hook` may answer the whole
    /// subtree below the node (the tokens strictly longer than the path so far) and return
    /// `true`; the walk then marks the token ending at the node itself, if any, and skips
    /// its descendants. `rec` is back in its starting state when this returns.
    pub fn walk_hooked<R: Recognizer + ?Sized, H: WalkHook<R>>(
        &self,
        rec: &mut R,
        mask: &mut TokenMask,
        hook: &mut H,
    ) {
        self.walk_impl::<R, H, false>(rec, mask, hook);
    }

    /// [`TokTrie::walk`] that also asks the recogniser's [`Recognizer::stay_set`] after every
    /// accepted byte and takes a subtree whole when every byte below it is in that set (its
    /// tokens marked from one slice, none of their bytes pushed). A separate entry point so
    /// that the other walks keep a loop without the check.
    pub fn walk_staying<R: Recognizer + ?Sized>(&self, rec: &mut R, mask: &mut TokenMask) {
        self.walk_impl::<R, NoHook, true>(rec, mask, &mut NoHook);
    }

    /// [`TokTrie::walk_staying`] with a [`WalkHook`], asked after the stay-set check.
    pub fn walk_staying_hooked<R: Recognizer + ?Sized, H: WalkHook<R>>(
        &self,
        rec: &mut R,
        mask: &mut TokenMask,
        hook: &mut H,
    ) {
        self.walk_impl::<R, H, true>(rec, mask, hook);
    }

    /// The number of nodes in the subtree rooted at `node` (itself included).
    #[inline]
    pub fn subtree_size(&self, node: usize) -> usize {
        self.nodes[node].subtree()
    }

    /// Every token strictly below `node`, in depth-first order.
    pub fn tokens_below(&self, node: usize) -> &[u32] {
        let end = node + self.nodes[node].subtree();
        &self.dfs_tokens[self.dfs_start[node + 1] as usize..self.dfs_start[end] as usize]
    }

    /// Does every byte below `node` (which has descendants) keep `rec` in its state
    /// ([`Recognizer::stay_set`]), so that its whole subtree is accepted?
    #[inline(always)]
    fn stays_below<R: Recognizer + ?Sized>(&self, rec: &R, node: usize) -> bool {
        self.nodes[node].subtree() > 1 && {
            let stay = rec.stay_set();
            !stay.is_empty() && self.below_within(node, &stay)
        }
    }

    /// Set in `mask` every token strictly below `node`.
    #[inline]
    fn mark_below(&self, node: usize, mask: &mut TokenMask) {
        let words = mask.words_mut();
        for &t in self.tokens_below(node) {
            words[t as usize / WORD_BITS] |= 1 << (t as usize % WORD_BITS);
        }
    }

    /// For each node of `roots` (ascending node indices, none inside another's subtree, each
    /// with descendants): walk its subtree with `rec` from the state after the node's path, as
    /// [`TokTrie::walk_staying`] does, setting in `mask` every token strictly below the node
    /// that `rec` accepts. One pass: the path to a root is pushed once for every root below it
    /// (its own tokens are not looked at), a refused byte on it skips those roots, and the
    /// subtrees without a root are skipped whole. `rec` is back in its starting state when
    /// this returns.
    pub fn walk_below<R: Recognizer + ?Sized>(
        &self,
        rec: &mut R,
        mask: &mut TokenMask,
        roots: &[u32],
    ) {
        self.walk_below_hooked(rec, mask, roots, &mut NoHook);
    }

    /// [`TokTrie::walk_below`] asking `hook` at each root first ([`WalkHook::after_push`] with
    /// the root's path): where it answers the subtree, the walk skips it.
    pub fn walk_below_hooked<R: Recognizer + ?Sized, H: WalkHook<R>>(
        &self,
        rec: &mut R,
        mask: &mut TokenMask,
        roots: &[u32],
        hook: &mut H,
    ) {
        if roots.is_empty() {
            return;
        }
        let nodes = &self.nodes[..];
        let n = nodes.len();
        let mut ends = [0u32; MAX_TOKEN_BYTES + 1];
        let mut path = [0u8; MAX_TOKEN_BYTES + 1];
        let mut sets = [ByteSet::FULL; FILTER_DEPTH + 1];
        sets[0] = rec.byte_superset();
        let mut depth = 0usize;
        let mut next = 0usize;
        // End of the root subtree the walk is in (0: on the way to a root).
        let mut inside_end = 0usize;
        let mut i = 1usize;
        while i < n {
            leave_subtrees(rec, &ends, &mut depth, i);
            let node = nodes[i];
            if i >= inside_end {
                while next < roots.len() && (roots[next] as usize) < i {
                    next += 1;
                }
                let Some(&r) = roots.get(next) else { break };
                let r = r as usize;
                if r >= i + node.subtree()
                    || (depth <= FILTER_DEPTH && !sets[depth].contains(node.byte()))
                    || !rec.try_push_byte(node.byte())
                {
                    i += node.subtree();
                    continue;
                }
                path[depth] = node.byte();
                if i == r {
                    next += 1;
                    if hook.after_push(rec, &path[..=depth], mask) {
                        rec.pop_bytes(1);
                        i += node.subtree();
                        continue;
                    }
                    inside_end = r + node.subtree();
                }
                ends[depth] = (i + node.subtree()) as u32;
                depth += 1;
                if depth <= FILTER_DEPTH {
                    sets[depth] = rec.byte_superset();
                }
                i += 1;
                continue;
            }
            if depth <= FILTER_DEPTH && !sets[depth].contains(node.byte()) {
                i += node.subtree();
                continue;
            }
            if !rec.try_push_byte(node.byte()) {
                i += node.subtree();
                continue;
            }
            self.mark(i, node, mask);
            if self.stays_below(rec, i) {
                self.mark_below(i, mask);
                rec.pop_bytes(1);
                i += node.subtree();
                continue;
            }
            ends[depth] = (i + node.subtree()) as u32;
            depth += 1;
            if depth <= FILTER_DEPTH && node.subtree() > 1 {
                sets[depth] = rec.byte_superset();
            }
            i += 1;
        }
        if depth > 0 {
            rec.pop_bytes(depth);
        }
    }

    fn walk_impl<R: Recognizer + ?Sized, H: WalkHook<R>, const STAY: bool>(
        &self,
        rec: &mut R,
        mask: &mut TokenMask,
        hook: &mut H,
    ) {
        let nodes = &self.nodes[..];
        let n = nodes.len();
        let mut ends = [0u32; MAX_TOKEN_BYTES + 1];
        let mut path = [0u8; MAX_TOKEN_BYTES + 1];
        // The recogniser's byte superset at each depth: bytes outside it are skipped unasked.
        let mut sets = [ByteSet::FULL; FILTER_DEPTH + 1];
        sets[0] = rec.byte_superset();
        let mut depth = 0usize;
        let mut i = 1usize;
        while i < n {
            leave_subtrees(rec, &ends, &mut depth, i);
            let node = nodes[i];
            if depth <= FILTER_DEPTH && !sets[depth].contains(node.byte()) {
                i += node.subtree();
                continue;
            }
            let pushed = rec.try_push_byte(node.byte());
            hook.attempted(rec, i, depth, pushed);
            if pushed {
                self.mark(i, node, mask);
                // Every byte below stays in the recogniser's state: the whole subtree is in.
                if STAY && self.stays_below(rec, i) {
                    self.mark_below(i, mask);
                    rec.pop_bytes(1);
                    i += node.subtree();
                    continue;
                }
                path[depth] = node.byte();
                if node.subtree() > 1 && hook.after_push(rec, &path[..=depth], mask) {
                    rec.pop_bytes(1);
                    i += node.subtree();
                    continue;
                }
                ends[depth] = (i + node.subtree()) as u32;
                depth += 1;
                if depth <= FILTER_DEPTH && node.subtree() > 1 {
                    sets[depth] = rec.byte_superset();
                }
                i += 1;
            } else {
                i += node.subtree();
            }
        }
        if depth > 0 {
            rec.pop_bytes(depth);
        }
    }

    /// [`TokTrie::walk`] for a recogniser whose whole state is a small `Copy` value: `step`
    /// maps a state and a byte to the next state (`None`: refused). No undo, no byte-set
    /// filter, no hook: one table-driven step per node, for automaton walks over large tries
    /// (a string's open tokens) where the general walk's bookkeeping is most of the cost.
    pub fn walk_states<S: Copy>(
        &self,
        start: S,
        step: impl FnMut(S, u8) -> Option<S>,
        mask: &mut TokenMask,
    ) {
        self.walk_states_with(start, step, |_, t| mask.insert(t));
    }

    /// [`TokTrie::walk_states`] calling `accept(state, token)` for every token reached (its
    /// last byte stepped to `state`) instead of setting a mask bit.
    pub fn walk_states_with<S: Copy>(
        &self,
        start: S,
        mut step: impl FnMut(S, u8) -> Option<S>,
        mut accept: impl FnMut(&S, TokenId),
    ) {
        let nodes = &self.nodes[..];
        let n = nodes.len();
        // On the heap, sized by the longest token: a state may be large (several automata in
        // lockstep) and callers' threads may have small stacks.
        let mut ends = vec![0u32; self.max_depth + 1];
        let mut states = vec![start; self.max_depth + 1];
        let mut depth = 0usize;
        let mut i = 1usize;
        while i < n {
            while depth > 0 && i >= ends[depth - 1] as usize {
                depth -= 1;
            }
            let node = nodes[i];
            match step(states[depth], node.byte()) {
                Some(t) => {
                    let tok = node.token_plus_one();
                    if tok != 0 {
                        accept(&t, TokenId(tok - 1));
                        if node.size & DUP_FLAG != 0 {
                            for &d in self.dups[&(i as u32)].iter() {
                                accept(&t, d);
                            }
                        }
                    }
                    let sub = node.subtree();
                    if sub > 1 {
                        ends[depth] = (i + sub) as u32;
                        depth += 1;
                        states[depth] = t;
                    }
                    i += 1;
                }
                None => i += node.subtree(),
            }
        }
    }

    /// Calls `f(len, token)` for every token whose bytes are a non-empty prefix of `bytes`,
    /// shortest first (duplicates of the same bytes included).
    pub fn prefix_tokens(&self, bytes: &[u8], mut f: impl FnMut(usize, TokenId)) {
        let nodes = &self.nodes[..];
        let (mut i, mut end) = (1usize, nodes.len());
        for (d, &b) in bytes.iter().enumerate() {
            if d == 0 {
                // The root's children by table.
                match self.root_child[b as usize] {
                    0 => return,
                    c => i = c as usize,
                }
            }
            // Siblings are in byte order, each followed by its subtree.
            loop {
                if i >= end || nodes[i].byte() > b {
                    return;
                }
                if nodes[i].byte() == b {
                    break;
                }
                i += nodes[i].subtree();
            }
            let node = nodes[i];
            let t = node.token_plus_one();
            if t != 0 {
                f(d + 1, TokenId(t - 1));
                if node.size & DUP_FLAG != 0 {
                    for &x in self.dups[&(i as u32)].iter() {
                        f(d + 1, x);
                    }
                }
            }
            end = i + node.subtree();
            i += 1;
        }
    }

    #[inline(always)]
    fn mark(&self, i: usize, node: Node, mask: &mut TokenMask) {
        let t = node.token_plus_one();
        if t != 0 {
            let words = mask.words_mut();
            let t = (t - 1) as usize;
            words[t / WORD_BITS] |= 1 << (t % WORD_BITS);
            if node.size & DUP_FLAG != 0 {
                for d in self.dups[&(i as u32)].iter() {
                    words[d.index() / WORD_BITS] |= 1 << (d.index() % WORD_BITS);
                }
            }
        }
    }

    /// Every `(token, bytes)` in the trie, depth-first (for tests and diagnostics).
    pub fn tokens(&self) -> Vec<(TokenId, Vec<u8>)> {
        let mut out = Vec::new();
        let mut path: Vec<u8> = Vec::new();
        let mut ends: Vec<usize> = Vec::new();
        for i in 1..self.nodes.len() {
            while ends.last().is_some_and(|&e| i >= e) {
                ends.pop();
                path.pop();
            }
            let node = self.nodes[i];
            path.push(node.byte());
            ends.push(i + node.subtree());
            if node.token_plus_one() != 0 {
                out.push((TokenId(node.token_plus_one() - 1), path.clone()));
                if let Some(d) = self.dups.get(&(i as u32)) {
                    out.extend(d.iter().map(|&t| (t, path.clone())));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recognizer::{ByteLogic, CopyStack};

    /// The tiny vocabulary used by the trie tests, drawn as the tree the builder must produce:
    ///
    /// ```text
    /// (root)
    /// ├─ a            #0
    /// │  ├─ b         #1
    /// │  │  └─ c      #2
    /// │  └─ c         #3
    /// ├─ b            #4, #6 (duplicate bytes)
    /// └─ {            (no token)
    ///    └─ "         #5
    /// ```
    fn tiny() -> TokTrie {
        let toks: Vec<(TokenId, &[u8])> = vec![
            (TokenId(0), b"a"),
            (TokenId(1), b"ab"),
            (TokenId(2), b"abc"),
            (TokenId(3), b"ac"),
            (TokenId(4), b"b"),
            (TokenId(5), b"{\""),
            (TokenId(6), b"b"),
            (TokenId(7), b""),
        ];
        TokTrie::build(toks)
    }

    /// Accepts strings over an allowed byte set, up to a length.
    struct Bytes(&'static [u8], u8);
    impl ByteLogic for Bytes {
        type State = u8;
        fn step(&self, s: &u8, b: u8) -> Option<u8> {
            (self.0.contains(&b) && *s < self.1).then_some(s + 1)
        }
    }

    fn mask_of(trie: &TokTrie, logic: &Bytes) -> Vec<u32> {
        let mut m = TokenMask::new(8);
        let mut buf = Vec::new();
        let mut rec = CopyStack::new(logic, 0, &mut buf, trie.max_depth());
        trie.walk(&mut rec, &mut m);
        assert_eq!(rec.depth(), 0, "walk leaves the recogniser at its base");
        m.iter().map(|t| t.0).collect()
    }

    /// `[a-z]*[0-9]*` as a stack of states (0: letters, 1: digits), reporting the bytes that
    /// loop on its current state when `stay` is on.
    struct LettersDigits {
        stack: Vec<u8>,
        stay: bool,
        pushes: usize,
    }
    impl Recognizer for LettersDigits {
        fn try_push_byte(&mut self, b: u8) -> bool {
            let s = *self.stack.last().expect("base");
            let next = match (s, b) {
                (0, b'a'..=b'z') => 0,
                (_, b'0'..=b'9') => 1,
                _ => return false,
            };
            self.pushes += 1;
            self.stack.push(next);
            true
        }
        fn pop_bytes(&mut self, n: usize) {
            self.stack.truncate(self.stack.len() - n);
        }
        fn stay_set(&self) -> ByteSet {
            let set: &[u8] = match self.stack.last() {
                Some(0) if self.stay => b"abcdefghijklmnopqrstuvwxyz",
                Some(1) if self.stay => b"0123456789",
                _ => b"",
            };
            ByteSet::of(set)
        }
    }

    #[test]
    fn subtrees_within_the_stay_set_are_taken_whole() {
        let words: Vec<String> = [
            "a", "ab", "abc", "abcd", "ab1", "ab12", "ab1c", "a-b", "b", "ba", "bab", "b9", "99",
            "9a", "x", "xyz", "xy z", "xyz0", "q1", "q12", "q123x", "zz", "zzz", "z.z",
            // Same bytes as an earlier token, below a subtree taken whole.
            "abcd",
        ]
        .iter()
        .map(|w| w.to_string())
        .collect();
        let toks: Vec<(TokenId, &[u8])> =
            words.iter().enumerate().map(|(i, w)| (TokenId(i as u32), w.as_bytes())).collect();
        let trie = TokTrie::build(toks);
        let run = |stay: bool| {
            let mut m = TokenMask::new(words.len());
            let mut rec = LettersDigits { stack: vec![0], stay, pushes: 0 };
            trie.walk_staying(&mut rec, &mut m);
            assert_eq!(rec.stack, vec![0], "walk leaves the recogniser at its base");
            (m.iter().map(|t| words[t.index()].clone()).collect::<Vec<_>>(), rec.pushes)
        };
        let (plain, plain_pushes) = run(false);
        let (fast, fast_pushes) = run(true);
        assert_eq!(fast, plain);
        assert!(plain.contains(&"ab12".to_string()) && !plain.contains(&"ab1c".to_string()));
        assert_eq!(fast.iter().filter(|w| *w == "abcd").count(), 2, "both ids of `abcd`");
        assert!(fast_pushes < plain_pushes, "{fast_pushes} pushes, {plain_pushes} without");
    }

    #[test]
    fn layout_matches_the_drawing() {
        let t = tiny();
        // root, a, b, c, c, b, {, "
        assert_eq!(t.node_count(), 8);
        assert_eq!(t.max_depth(), 3);
        assert_eq!(t.token_count(), 7);
        let mut toks = t.tokens();
        toks.sort();
        let names: Vec<(u32, String)> =
            toks.iter().map(|(t, b)| (t.0, String::from_utf8(b.clone()).unwrap())).collect();
        assert_eq!(
            names,
            vec![
                (0, "a".into()),
                (1, "ab".into()),
                (2, "abc".into()),
                (3, "ac".into()),
                (4, "b".into()),
                (5, "{\"".into()),
                (6, "b".into())
            ]
        );
    }

    #[test]
    fn walk_prunes_and_collects() {
        let t = tiny();
        assert_eq!(mask_of(&t, &Bytes(b"abc{\"", 9)), vec![0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(mask_of(&t, &Bytes(b"ab", 9)), vec![0, 1, 4, 6]);
        assert_eq!(mask_of(&t, &Bytes(b"abc", 2)), vec![0, 1, 3, 4, 6]);
        assert_eq!(mask_of(&t, &Bytes(b"c", 9)), Vec::<u32>::new());
        assert_eq!(mask_of(&t, &Bytes(b"\"", 9)), Vec::<u32>::new());
    }

    #[test]
    fn prefix_tokens_follow_one_path() {
        let t = tiny();
        let along = |bytes: &[u8]| {
            let mut v = Vec::new();
            t.prefix_tokens(bytes, |d, tok| v.push((d, tok.0)));
            v.sort();
            v
        };
        assert_eq!(along(b"abcd"), vec![(1, 0), (2, 1), (3, 2)]);
        assert_eq!(along(b"ac"), vec![(1, 0), (2, 3)]);
        assert_eq!(along(b"b"), vec![(1, 4), (1, 6)]);
        assert_eq!(along(b"ca"), vec![]);
        assert_eq!(along(b""), vec![]);
    }
}
