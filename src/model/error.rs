//! The model-phase error: every way loading a GGUF file, building its vocabulary or template,
//! or running its forward pass fails, with the file, key, tensor or token count named.

use std::fmt;

/// An error loading or running a model.
#[derive(Debug)]
pub struct ModelError {
    kind: ModelErrorKind,
}

/// What went wrong with a model.
#[derive(Debug)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// Reading the file failed.
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file does not start with the GGUF magic.
    NotGguf,
    /// A GGUF version this reader does not know (it reads 2 and 3).
    UnsupportedVersion(u32),
    /// The bytes end before the header or a tensor does (a truncated download).
    Truncated {
        /// What was being read.
        what: String,
        /// Where it starts.
        offset: u64,
        /// The file's length.
        len: u64,
    },
    /// The header is inconsistent (unknown value type, bad alignment, …).
    Malformed(String),
    /// A required metadata key is absent or has the wrong type.
    MissingKey {
        /// The key.
        key: String,
    },
    /// A required tensor is absent or has the wrong shape.
    BadTensor {
        /// The tensor.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// An architecture the backend does not run (it runs `llama`).
    UnsupportedArchitecture(String),
    /// A tensor stored in a type the backend has no kernel for.
    UnsupportedQuantization {
        /// The tensor.
        tensor: String,
        /// The ggml type name.
        ggml_type: String,
    },
    /// A tokenizer model other than `gpt2` (byte-level BPE) and `llama` (SentencePiece).
    UnsupportedTokenizer(String),
    /// The vocabulary could not be built from the GGUF tokenizer.
    Vocab(crate::vocab::VocabError),
    /// The chat template does not parse or does not render.
    Template(String),
    /// The prompt and generation do not fit the context window.
    ContextFull {
        /// Tokens asked for (prompt plus generated).
        tokens: usize,
        /// The context length.
        context: usize,
    },
    /// A token id outside the model's vocabulary.
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// The vocabulary size.
        n_vocab: usize,
    },
    /// A constraint's vocabulary is not the model's (size or token bytes differ).
    VocabMismatch(String),
    /// An invalid [`ModelConfig`](super::ModelConfig).
    Config(String),
}

impl ModelError {
    pub(crate) fn new(kind: ModelErrorKind) -> Self {
        ModelError { kind }
    }

    /// What went wrong.
    pub fn kind(&self) -> &ModelErrorKind {
        &self.kind
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ModelErrorKind::Io { path, source } => write!(f, "cannot read {path}: {source}"),
            ModelErrorKind::NotGguf => write!(f, "not a GGUF file (no `GGUF` magic)"),
            ModelErrorKind::UnsupportedVersion(v) => {
                write!(f, "GGUF version {v} is not supported (2 and 3 are)")
            }
            ModelErrorKind::Truncated { what, offset, len } => write!(
                f,
                "truncated GGUF file: {what} at byte {offset} runs past the end ({len} bytes)"
            ),
            ModelErrorKind::Malformed(why) => write!(f, "malformed GGUF file: {why}"),
            ModelErrorKind::MissingKey { key } => {
                write!(f, "GGUF metadata key `{key}` is missing or has the wrong type")
            }
            ModelErrorKind::BadTensor { name, why } => write!(f, "tensor `{name}`: {why}"),
            ModelErrorKind::UnsupportedArchitecture(a) => {
                write!(f, "architecture `{a}` is not supported (the backend runs `llama`)")
            }
            ModelErrorKind::UnsupportedQuantization { tensor, ggml_type } => write!(
                f,
                "tensor `{tensor}` is {ggml_type}, which the backend has no kernel for \
                 (F32, F16, Q4_0, Q4_1, Q8_0 are supported)"
            ),
            ModelErrorKind::UnsupportedTokenizer(m) => write!(
                f,
                "tokenizer model `{m}` is not supported (`gpt2` byte-level BPE and `llama` \
                 SentencePiece are)"
            ),
            ModelErrorKind::Vocab(e) => write!(f, "vocabulary from GGUF: {e}"),
            ModelErrorKind::Template(why) => write!(f, "chat template: {why}"),
            ModelErrorKind::ContextFull { tokens, context } => {
                write!(f, "{tokens} tokens do not fit the context window of {context} tokens")
            }
            ModelErrorKind::TokenOutOfRange { id, n_vocab } => {
                write!(f, "token id {id} is outside the model's {n_vocab} tokens")
            }
            ModelErrorKind::VocabMismatch(why) => {
                write!(f, "the constraint's vocabulary is not the model's: {why}")
            }
            ModelErrorKind::Config(why) => write!(f, "invalid model config: {why}"),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ModelErrorKind::Io { source, .. } => Some(source),
            ModelErrorKind::Vocab(e) => Some(e),
            _ => None,
        }
    }
}
