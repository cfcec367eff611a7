//! Token strings → the exact bytes each token contributes to the output.
//!
//! Hugging Face vocabularies store tokens as strings in one of a few encodings; the decoder in
//! `tokenizer.json` says which. This module mirrors what `tokenizers`' decoders do to one token,
//! so that concatenating our bytes gives exactly what `Tokenizer::decode` would (without the
//! whole-sequence steps such as `Strip`, which only touch the start of a text):
//!
//! - **Byte-level BPE** (GPT-2, Llama-3, Qwen, o200k): every byte is drawn as one printable char
//!   through the GPT-2 byte↔unicode map. A token whose chars are not all in the map (added
//!   tokens such as `<｜User｜>`) decodes to its raw UTF-8, as the `ByteLevel` decoder does.
//! - **SentencePiece style** (Llama-2, Gemma): `▁` stands for a space and, with byte fallback,
//!   `<0xNN>` stands for the single byte `NN` (which may be a fragment of a UTF-8 character).
//! - **Raw**: anything else is taken as its UTF-8 text.

/// How the tokenizer's vocabulary strings encode bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenEncoding {
    /// GPT-2 byte-level BPE: one printable char per byte.
    ByteLevel,
    /// SentencePiece style: `▁` is a space; `<0xNN>` is a raw byte when `byte_fallback` is set.
    Metaspace {
        /// Whether `<0xNN>` tokens decode to the byte `NN`.
        byte_fallback: bool,
    },
    /// Tokens are their own UTF-8 text.
    Raw,
}

/// The GPT-2 map from byte to char (`bytes_to_unicode` in the original encoder.py).
pub(crate) fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u32 {
        let printable =
            (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        table[b as usize] = if printable {
            char::from_u32(b).expect("valid char")
        } else {
            let c = char::from_u32(256 + n).expect("valid char");
            n += 1;
            c
        };
    }
    table
}

/// The inverse of [`byte_to_char_table`], indexed by char code (all codes are < 0x144).
pub(crate) struct CharToByte {
    table: Vec<i16>,
}

impl CharToByte {
    pub(crate) fn new() -> CharToByte {
        let mut table = vec![-1i16; 0x200];
        for (b, c) in byte_to_char_table().iter().enumerate() {
            table[*c as usize] = b as i16;
        }
        CharToByte { table }
    }

    #[inline]
    pub(crate) fn get(&self, c: char) -> Option<u8> {
        match self.table.get(c as usize) {
            Some(&v) if v >= 0 => Some(v as u8),
            _ => None,
        }
    }
}

/// Decode one vocabulary string to bytes, appending to `out`.
pub(crate) fn decode_token(enc: TokenEncoding, map: &CharToByte, s: &str, out: &mut Vec<u8>) {
    match enc {
        TokenEncoding::ByteLevel => {
            let start = out.len();
            for c in s.chars() {
                match map.get(c) {
                    Some(b) => out.push(b),
                    None => {
                        // The ByteLevel decoder keeps tokens with unmapped chars as raw text.
                        out.truncate(start);
                        out.extend_from_slice(s.as_bytes());
                        return;
                    }
                }
            }
        }
        TokenEncoding::Metaspace { byte_fallback } => {
            if byte_fallback {
                if let Some(b) = parse_byte_fallback(s) {
                    out.push(b);
                    return;
                }
            }
            for c in s.chars() {
                if c == '▁' {
                    out.push(b' ');
                } else {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        TokenEncoding::Raw => out.extend_from_slice(s.as_bytes()),
    }
}

/// `<0xNN>` → `NN`.
fn parse_byte_fallback(s: &str) -> Option<u8> {
    let b = s.as_bytes();
    if b.len() == 6 && b.starts_with(b"<0x") && b[5] == b'>' {
        let hex = std::str::from_utf8(&b[3..5]).ok()?;
        u8::from_str_radix(hex, 16).ok()
    } else {
        None
    }
}

/// Work out the encoding from the `decoder` section of `tokenizer.json` (as JSON).
pub(crate) fn encoding_from_decoder(decoder: Option<&serde_json::Value>) -> TokenEncoding {
    fn scan(v: &serde_json::Value, byte_level: &mut bool, metaspace: &mut bool, fb: &mut bool) {
        let ty = v.get("type").and_then(|t| t.as_str()).unwrap_or("");
        match ty {
            "ByteLevel" => *byte_level = true,
            "Metaspace" => *metaspace = true,
            "ByteFallback" => *fb = true,
            "Replace" => {
                let pat = v.get("pattern").and_then(|p| p.get("String")).and_then(|s| s.as_str());
                if pat == Some("▁") {
                    *metaspace = true;
                }
            }
            "Sequence" => {
                if let Some(ds) = v.get("decoders").and_then(|d| d.as_array()) {
                    for d in ds {
                        scan(d, byte_level, metaspace, fb);
                    }
                }
            }
            _ => {}
        }
    }
    let (mut bl, mut ms, mut fb) = (false, false, false);
    if let Some(d) = decoder {
        scan(d, &mut bl, &mut ms, &mut fb);
    }
    if bl {
        TokenEncoding::ByteLevel
    } else if ms || fb {
        TokenEncoding::Metaspace { byte_fallback: fb }
    } else {
        TokenEncoding::Raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(enc: TokenEncoding, s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        decode_token(enc, &CharToByte::new(), s, &mut out);
        out
    }

    #[test]
    fn gpt2_map_round_trips_every_byte() {
        let t = byte_to_char_table();
        let inv = CharToByte::new();
        for b in 0..=255u8 {
            assert_eq!(inv.get(t[b as usize]), Some(b));
        }
        assert_eq!(t[b' ' as usize], 'Ġ');
        assert_eq!(t[b'\n' as usize], 'Ċ');
    }

    #[test]
    fn byte_level_tokens() {
        assert_eq!(dec(TokenEncoding::ByteLevel, "Ġhello"), b" hello");
        // "é" is C3 A9, drawn as "Ã©".
        assert_eq!(dec(TokenEncoding::ByteLevel, "Ã©"), "é".as_bytes());
        // A fragment: the first byte of a 3-byte char alone.
        assert_eq!(dec(TokenEncoding::ByteLevel, "ä"), vec![0xE4]);
        // Unmapped chars: raw text.
        assert_eq!(dec(TokenEncoding::ByteLevel, "<｜User｜>"), "<｜User｜>".as_bytes());
    }

    #[test]
    fn metaspace_tokens() {
        let enc = TokenEncoding::Metaspace { byte_fallback: true };
        assert_eq!(dec(enc, "▁hello"), b" hello");
        assert_eq!(dec(enc, "<0x0A>"), b"\n");
        assert_eq!(dec(enc, "<0xE4>"), vec![0xE4]);
        assert_eq!(dec(TokenEncoding::Metaspace { byte_fallback: false }, "<0x0A>"), b"<0x0A>");
    }
}
