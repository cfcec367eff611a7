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
    /// Masks kept in the state-keyed cache (default 8; 0 disables caching).
    pub mask_cache: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions { history: 64, mask_cache: 8 }
    }
}


impl EngineOptions {
    /// How many advanced tokens `rollback` can undo.
    #[must_use]
    pub fn with_history(mut self, tokens: usize) -> Self {
        self.history = tokens;
        self
    }

    /// Masks kept in the state-keyed cache (0 disables caching).
    #[must_use]
    pub fn with_mask_cache(mut self, masks: usize) -> Self {
        self.mask_cache = masks;
        self
    }
}
