"""Type stubs of the native module `grammask._grammask` (bindings/python/src/)."""

from os import PathLike
from typing import Any, Sequence

__version__: str

class Vocabulary:
    """A tokenizer's vocabulary: token bytes, EOS ids, the logits width. Immutable, shareable
    across threads, picklable (as its loading recipe)."""

    @staticmethod
    def from_tokenizer_json(
        path: str | PathLike[str],
        *,
        config_path: str | PathLike[str] | None = None,
        vocab_size: int | None = None,
        eos_token_ids: Sequence[int] | None = None,
        cache: bool | str | PathLike[str] | None = None,
    ) -> Vocabulary: ...
    @staticmethod
    def from_gguf(path: str | PathLike[str], *, vocab_size: int | None = None) -> Vocabulary: ...
    @staticmethod
    def from_hf_tokenizer(
        tokenizer: Any,
        *,
        config: str | None = None,
        vocab_size: int | None = None,
        eos_token_ids: Sequence[int] | None = None,
    ) -> Vocabulary: ...
    @staticmethod
    def embedded(
        *, vocab_size: int | None = None, cache: bool | str | PathLike[str] | None = None
    ) -> Vocabulary: ...
    @property
    def cache_outcome(self) -> str | None: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def n_tokens(self) -> int: ...
    @property
    def eos_token_ids(self) -> list[int]: ...
    @property
    def recipe(self) -> tuple[Any, ...]: ...
    def token_bytes(self, token_id: int) -> bytes: ...
    def encode(self, text: str) -> list[int]: ...

class CompiledConstraint:
    """A constraint compiled once against a vocabulary; shared by matchers and threads,
    picklable (source + vocabulary recipe, compiled again on load)."""

    @staticmethod
    def json_object(
        vocab: Vocabulary,
        *,
        any_value: bool = False,
        whitespace: str | None = None,
        max_whitespace_run: int | None = None,
        max_depth: int | None = None,
        rollback_history: int | None = None,
        mask_cache: int | None = None,
    ) -> CompiledConstraint: ...
    @staticmethod
    def json_schema(
        vocab: Vocabulary,
        schema: str | dict[str, Any] | bool,
        *,
        whitespace: str | None = None,
        max_whitespace_run: int | None = None,
        any_whitespace: bool | None = None,
        separators: tuple[str, str] | None = None,
        property_order: str | None = None,
        lenient: bool = False,
        formats: str | None = None,
        rollback_history: int | None = None,
        mask_cache: int | None = None,
        plain_integers: bool = False,
        literal_keys: bool = False,
        literal_values: bool = False,
    ) -> CompiledConstraint: ...
    @staticmethod
    def regex(
        vocab: Vocabulary,
        pattern: str,
        *,
        rollback_history: int | None = None,
        mask_cache: int | None = None,
    ) -> CompiledConstraint: ...
    @staticmethod
    def gbnf(
        vocab: Vocabulary,
        grammar: str,
        *,
        rollback_history: int | None = None,
        mask_cache: int | None = None,
        position_masks: int | None = None,
        warm_positions: int | None = None,
        warm_ms: int | None = None,
    ) -> CompiledConstraint: ...
    @staticmethod
    def structural_tag(
        vocab: Vocabulary,
        spec: str,
        *,
        at_least_one: bool = False,
        stop_after_first: bool = False,
        max_tags: int | None = None,
        rollback_history: int | None = None,
        mask_cache: int | None = None,
    ) -> CompiledConstraint: ...
    @property
    def kind(self) -> str: ...
    @property
    def vocab(self) -> Vocabulary: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def source(self) -> str | None: ...

class Matcher:
    """One request's constraint state (XGrammar's GrammarMatcher method names)."""

    def __init__(self, compiled: CompiledConstraint) -> None: ...
    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> bool: ...
    def accept_token(self, token_id: int) -> bool: ...
    def accept_string(self, text: str | bytes) -> bool: ...
    def rollback(self, num_tokens: int = 1) -> None: ...
    def is_terminated(self) -> bool: ...
    def is_accepting(self) -> bool: ...
    def reset(self) -> None: ...
    def find_jump_forward_string(self) -> str: ...
    @property
    def accepted_tokens(self) -> list[int]: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def compiled(self) -> CompiledConstraint: ...
    def _time_fill_mask(self, iterations: int) -> float: ...

def fill_next_token_bitmask_batch(
    matchers: Sequence[Matcher],
    bitmask: Any,
    n_threads: int | None = None,
    indices: Sequence[int] | None = None,
) -> None: ...
def apply_bitmask_rows(logits: Any, bitmask: Any, rows: Sequence[int], vocab: int) -> bool:
    """`-inf` into `logits[r, i]` for `r` in `rows`, `i < vocab` whose bit in `bitmask[r]` is
    clear, for float32/float64/float16 buffers with a contiguous last axis; `False` (nothing
    written) for others. Internal: `apply_token_bitmask_inplace` calls it."""
