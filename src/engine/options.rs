//! Per-request limits every engine shares: how far `rollback` reaches and how many masks the
//! state-keyed cache keeps. Lives in the engine contract layer so every engine (JSON, regex,
//! schema, CFG) takes the same options from the same place.

/// Limits every engine shares.
///
/// ```
/// use grammask::EngineOptions;
/// let o = EngineOptions::default().with_history(256).with_mask_cache(0);
/// assert_eq!((o.history, o.mask_cache), (256, 0));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineOptions {
    /// How many advanced tokens `rollback` can undo (default 64).
    pub history: usize,
    /// Masks kept in the state-keyed cache (default 8; 0 disables caching, the shared cache
    /// too).
    pub mask_cache: usize,
    /// Masks a compiled JSON Schema or GBNF grammar keeps for all its engines (default 256,
    /// cleared when full: at most 4 MB at 128k tokens; 0 disables it), keyed by exact state
    /// (schema) or by the 64-bit signature of the chart's future (grammar, the key of its
    /// own cache too). A state met by one request (after `{"`, after `"price": `, inside a
    /// bounded number, a statement start) is then a hit for the next.
    pub shared_masks: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions { history: 64, mask_cache: 8, shared_masks: 256 }
    }
}

impl EngineOptions {
    /// How many masks the shared cache may hold: [`EngineOptions::shared_masks`], or 0 (off)
    /// when the engine's own cache is off, so that `mask_cache: 0` still measures walks.
    pub(crate) fn shared_cap(&self) -> usize {
        if self.mask_cache > 0 {
            self.shared_masks
        } else {
            0
        }
    }
}

builder!(EngineOptions {
    /// How many advanced tokens `rollback` can undo (default 64).
    with_history => history: usize,
    /// Masks kept in the state-keyed cache (default 8; 0 disables caching, the shared cache
    /// too).
    with_mask_cache => mask_cache: usize,
    /// Masks a compiled JSON Schema or grammar keeps for all its engines (default 256; 0
    /// disables it).
    with_shared_masks => shared_masks: usize,
});

/// Whitespace a JSON engine allows between JSON tokens: one policy type for the free-form JSON
/// engine ([`crate::JsonConfig`]) and the schema engine ([`crate::SchemaOptions`]). Each
/// config documents its own default (free-form JSON: flexible runs of at most 32 bytes; JSON
/// Schema: at most 4, which accepts compact output and `json.dumps`'s separators).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Whitespace {
    /// No whitespace at all: `{"a":[1,2]}`.
    Compact,
    /// Any JSON whitespace inside the document, in runs of at most `max_run` bytes (≥ 1);
    /// none before or after the top-level value.
    Flexible {
        /// Longest whitespace run (≥ 1).
        max_run: u8,
    },
    /// Exactly these separators and no other whitespace, e.g. Python `json.dumps`'s `", "`
    /// and `": "`. Each must be `,` (resp. `:`) with optional whitespace around it. The JSON
    /// Schema engine only; the free-form JSON engine refuses it with a typed error.
    Separators {
        /// Between items and members, e.g. `", "`.
        item: String,
        /// Between a key and its value, e.g. `": "`.
        key: String,
    },
}
