//! The README's library example as a program of a downstream crate: it must build against the
//! public API with grammask's default features off, and run to the end.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    use grammask::{Constraint, TokenMask, Vocabulary};

    let vocab = Vocabulary::embedded()?; // or Vocabulary::from_file("tokenizer.json")?
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "age"]
    });
    let compiled = Constraint::json_schema(&schema).compile(&vocab)?; // once per schema
    let mut engine = compiled.engine(); // once per request: cheap
    let mut mask = TokenMask::new(vocab.n_vocab());
    for token in vocab.encode(r#"{"name": "Café", "age": 42}"#)? {
        engine.fill_mask(&mut mask)?; // per step: the allow-mask
        assert!(mask.contains(token)); // ...the model samples under it...
        engine.advance(token)?; // ...and the engine follows
    }
    engine.fill_mask(&mut mask)?;
    assert!(vocab.eos_ids().iter().all(|&e| mask.contains(e))); // complete: EOS allowed
    println!("downstream: the README example ran ({} tokens in the vocabulary)", vocab.n_vocab());
    Ok(())
}
