//! Chat templates: the model's Jinja template (`tokenizer.chat_template`) rendered with
//! minijinja for `system`/`user`/`assistant` messages, as `transformers`'
//! `apply_chat_template` does: the variables `messages`, `add_generation_prompt`, `bos_token`,
//! `eos_token`, and `raise_exception(msg)`. Python string methods that Hugging Face templates
//! call (`.strip()`, `.startswith()`, …) come from `minijinja-contrib`'s `pycompat`.

use super::error::{ModelError, ModelErrorKind};
use serde::Serialize;

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message from `role`.
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }
}

/// A compiled-once, checked chat template.
///
/// # Example
/// ```
/// use grammask::model::{ChatMessage, ChatTemplate};
/// let t = ChatTemplate::new(
///     "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}\
///      {% if add_generation_prompt %}<|assistant|>{% endif %}",
/// )?;
/// let text = t.render(&[ChatMessage::new("user", "hi")], true)?;
/// assert_eq!(text, "<|user|>hi\n<|assistant|>");
/// # Ok::<(), grammask::model::ModelError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ChatTemplate {
    source: String,
    bos: String,
    eos: String,
}

fn env() -> minijinja::Environment<'static> {
    let mut env = minijinja::Environment::new();
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<String, minijinja::Error> {
        Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
    });
    env
}

fn template_error(e: minijinja::Error) -> ModelError {
    let mut why = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        why.push_str(&format!(": {s}"));
        src = s.source();
    }
    ModelError::new(ModelErrorKind::Template(why))
}

impl ChatTemplate {
    /// Parse `source` (a Jinja template).
    ///
    /// # Errors
    /// [`ModelErrorKind::Template`] when it does not parse.
    pub fn new(source: &str) -> Result<ChatTemplate, ModelError> {
        env().template_from_str(source).map_err(template_error)?;
        Ok(ChatTemplate { source: source.into(), bos: String::new(), eos: String::new() })
    }

    /// Set the `bos_token` / `eos_token` strings the template may use (default: empty).
    pub fn with_special_tokens(mut self, bos: &str, eos: &str) -> ChatTemplate {
        self.bos = bos.into();
        self.eos = eos.into();
        self
    }

    /// The template's source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Render `messages`; with `add_generation_prompt` the text ends where the assistant's
    /// answer starts.
    ///
    /// # Errors
    /// [`ModelErrorKind::Template`] when rendering fails (`raise_exception`, a type error).
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ModelError> {
        let env = env();
        let t = env.template_from_str(&self.source).map_err(template_error)?;
        t.render(minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos,
            eos_token => self.eos,
        })
        .map_err(template_error)
    }
}
