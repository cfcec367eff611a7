//! The GGUF container: header, metadata and tensor directory, read from bytes in memory.
//!
//! GGUF (the llama.cpp file format, `ggml/docs/gguf.md`) is a little-endian file: the magic
//! `GGUF`, a version (2 or 3 here), the tensor and metadata counts, the metadata key/value
//! pairs, the tensor infos (name, dimensions, ggml type, offset), then the tensor data, aligned
//! to `general.alignment` (default 32). This module owns only the container: every length is
//! checked against the bytes left before anything is allocated, so a truncated or corrupt file
//! is a [`ModelErrorKind::Truncated`] / [`ModelErrorKind::Malformed`] error, never a panic or a
//! huge allocation. What the tensors mean is `llama.rs`'s business; what the tokenizer keys
//! mean is `vocab.rs`'s.

use super::error::{ModelError, ModelErrorKind};
use std::ops::Range;

/// `GGUF` read as a little-endian `u32`.
const MAGIC: u32 = 0x4655_4747;
/// Alignment of the tensor data when `general.alignment` is absent.
const DEFAULT_ALIGNMENT: u64 = 32;

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum GgufValue {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `f32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// A UTF-8 string (invalid UTF-8 is replaced, GGUF requires UTF-8).
    String(String),
    /// An array of values of one type.
    Array(Vec<GgufValue>),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f64`.
    F64(f64),
}

impl GgufValue {
    /// The value as an unsigned integer, when it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer of any width.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            GgufValue::I8(v) => Some(v.into()),
            GgufValue::I16(v) => Some(v.into()),
            GgufValue::I32(v) => Some(v.into()),
            GgufValue::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as a float (either width).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// One tensor of the directory: where its data is and how it is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions, innermost first (ggml `ne`): a matrix of `rows` rows of `cols` is
    /// `[cols, rows]`.
    pub dims: Vec<u64>,
    /// The ggml type id (0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 8 Q8_0, …).
    pub ggml_type: u32,
    /// Byte range of the data in the file.
    pub range: Range<usize>,
}

impl TensorInfo {
    /// Number of elements.
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// A parsed GGUF header: version, metadata and tensor directory (the data stays in the
/// caller's bytes, addressed by [`TensorInfo::range`]).
#[derive(Clone, Debug)]
pub struct GgufFile {
    /// Format version.
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(String, GgufValue)>,
    /// Tensors in file order.
    pub tensors: Vec<TensorInfo>,
}

/// Bytes per block and elements per block of a ggml type, for the types whose size this
/// reader knows (enough to bound every tensor's range; the model decides what it can run).
pub(crate) fn type_layout(ggml_type: u32) -> Option<(u64, u64)> {
    Some(match ggml_type {
        0 => (4, 1),      // F32
        1 => (2, 1),      // F16
        2 => (18, 32),    // Q4_0
        3 => (20, 32),    // Q4_1
        6 => (22, 32),    // Q5_0
        7 => (24, 32),    // Q5_1
        8 => (34, 32),    // Q8_0
        9 => (36, 32),    // Q8_1
        10 => (84, 256),  // Q2_K
        11 => (110, 256), // Q3_K
        12 => (144, 256), // Q4_K
        13 => (176, 256), // Q5_K
        14 => (210, 256), // Q6_K
        15 => (292, 256), // Q8_K
        30 => (2, 1),     // BF16
        _ => return None,
    })
}

/// The ggml name of a type id, for messages.
pub fn type_name(ggml_type: u32) -> &'static str {
    match ggml_type {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        6 => "Q5_0",
        7 => "Q5_1",
        8 => "Q8_0",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        12 => "Q4_K",
        13 => "Q5_K",
        14 => "Q6_K",
        15 => "Q8_K",
        30 => "BF16",
        _ => "unknown",
    }
}

/// A cursor over the file bytes; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ModelError> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.bytes.len() => {
                let s = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => Err(ModelError::new(ModelErrorKind::Truncated {
                what: what.to_string(),
                offset: self.pos as u64,
                len: self.bytes.len() as u64,
            })),
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], ModelError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32, ModelError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, ModelError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count that must fit in the bytes left, each item at least `min_item` bytes long.
    fn count(&mut self, min_item: usize, what: &str) -> Result<usize, ModelError> {
        let at = self.pos;
        let n = self.u64(what)?;
        let left = (self.bytes.len() - self.pos) as u64;
        if n.saturating_mul(min_item as u64) > left {
            return Err(ModelError::new(ModelErrorKind::Truncated {
                what: format!("{what} ({n} items)"),
                offset: at as u64,
                len: self.bytes.len() as u64,
            }));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Result<String, ModelError> {
        let n = self.count(1, what)?;
        let s = self.take(n, what)?;
        Ok(String::from_utf8_lossy(s).into_owned())
    }

    fn value(&mut self, ty: u32, key: &str, depth: usize) -> Result<GgufValue, ModelError> {
        Ok(match ty {
            0 => GgufValue::U8(self.array::<1>(key)?[0]),
            1 => GgufValue::I8(self.array::<1>(key)?[0] as i8),
            2 => GgufValue::U16(u16::from_le_bytes(self.array(key)?)),
            3 => GgufValue::I16(i16::from_le_bytes(self.array(key)?)),
            4 => GgufValue::U32(self.u32(key)?),
            5 => GgufValue::I32(i32::from_le_bytes(self.array(key)?)),
            6 => GgufValue::F32(f32::from_le_bytes(self.array(key)?)),
            7 => GgufValue::Bool(self.array::<1>(key)?[0] != 0),
            8 => GgufValue::String(self.string(key)?),
            9 => {
                if depth > 2 {
                    return Err(malformed(format!("`{key}`: arrays nested too deep")));
                }
                let inner = self.u32(key)?;
                let n = self.count(value_min_size(inner), key)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.value(inner, key, depth + 1)?);
                }
                GgufValue::Array(v)
            }
            10 => GgufValue::U64(self.u64(key)?),
            11 => GgufValue::I64(i64::from_le_bytes(self.array(key)?)),
            12 => GgufValue::F64(f64::from_le_bytes(self.array(key)?)),
            other => return Err(malformed(format!("`{key}`: unknown value type {other}"))),
        })
    }
}

/// The smallest encoding of a value of type `ty` (bounds array counts before allocating).
fn value_min_size(ty: u32) -> usize {
    match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => 12,
        _ => 1,
    }
}

fn malformed(why: String) -> ModelError {
    ModelError::new(ModelErrorKind::Malformed(why))
}

impl GgufFile {
    /// Parse the header, metadata and tensor directory of a GGUF file held in `bytes`, and
    /// check that every tensor's data lies inside `bytes`.
    ///
    /// # Errors
    /// [`ModelErrorKind::NotGguf`] (bad magic), [`ModelErrorKind::UnsupportedVersion`],
    /// [`ModelErrorKind::Truncated`] (the bytes end inside the header or a tensor),
    /// [`ModelErrorKind::Malformed`] (unknown value types, bad alignment, overlapping
    /// offsets).
    pub fn parse(bytes: &[u8]) -> Result<GgufFile, ModelError> {
        let mut r = Reader { bytes, pos: 0 };
        if bytes.len() < 4 || u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) != MAGIC {
            return Err(ModelError::new(ModelErrorKind::NotGguf));
        }
        r.pos = 4;
        let version = r.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(ModelError::new(ModelErrorKind::UnsupportedVersion(version)));
        }
        let n_tensors = r.count(24, "tensor count")?;
        let n_kv = r.count(12, "metadata count")?;
        let mut metadata = Vec::with_capacity(n_kv);
        for _ in 0..n_kv {
            let key = r.string("metadata key")?;
            let ty = r.u32(&key)?;
            let v = r.value(ty, &key, 0)?;
            metadata.push((key, v));
        }
        let mut raw = Vec::with_capacity(n_tensors);
        for _ in 0..n_tensors {
            let name = r.string("tensor name")?;
            let n_dims = r.u32(&name)? as usize;
            if n_dims == 0 || n_dims > 4 {
                return Err(malformed(format!("tensor `{name}` has {n_dims} dimensions")));
            }
            let mut dims = Vec::with_capacity(n_dims);
            for _ in 0..n_dims {
                dims.push(r.u64(&name)?);
            }
            let ty = r.u32(&name)?;
            let offset = r.u64(&name)?;
            raw.push((name, dims, ty, offset));
        }
        let alignment = metadata
            .iter()
            .find(|(k, _)| k == "general.alignment")
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(DEFAULT_ALIGNMENT);
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(malformed(format!("general.alignment {alignment} is not a power of two")));
        }
        let data_start = (r.pos as u64).div_ceil(alignment) * alignment;
        let mut tensors = Vec::with_capacity(raw.len());
        for (name, dims, ty, offset) in raw {
            let n: u64 = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| {
                malformed(format!("tensor `{name}`: dimensions {dims:?} overflow"))
            })?;
            let size = match type_layout(ty) {
                Some((block_bytes, block_elems)) => {
                    if dims[0] % block_elems != 0 {
                        return Err(malformed(format!(
                            "tensor `{name}`: row of {} is not a multiple of the {}-element \
                             block of {}",
                            dims[0],
                            block_elems,
                            type_name(ty)
                        )));
                    }
                    n / block_elems * block_bytes
                }
                // Unknown type: the size is unknown, so the model will refuse it by name; the
                // range is left empty.
                None => 0,
            };
            if offset % alignment != 0 {
                return Err(malformed(format!("tensor `{name}`: offset {offset} is not aligned")));
            }
            let start = data_start.checked_add(offset);
            let end = start.and_then(|s| s.checked_add(size));
            let (start, end) = match (start, end) {
                (Some(s), Some(e)) if e <= bytes.len() as u64 => (s as usize, e as usize),
                _ => {
                    return Err(ModelError::new(ModelErrorKind::Truncated {
                        what: format!("tensor `{name}` ({size} bytes at {offset})"),
                        offset: data_start.saturating_add(offset),
                        len: bytes.len() as u64,
                    }))
                }
            };
            tensors.push(TensorInfo { name, dims, ggml_type: ty, range: start..end });
        }
        Ok(GgufFile { version, metadata, tensors })
    }

    /// The metadata value under `key`.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The string under `key`.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(GgufValue::as_str)
    }

    /// The unsigned integer under `key`.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(GgufValue::as_u64)
    }

    /// The float under `key`.
    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(GgufValue::as_f64)
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// Writes GGUF files: the inverse of [`GgufFile::parse`], for tests and tools that build
/// small models or tokenizer-only files.
#[derive(Clone, Debug, Default)]
pub struct GgufWriter {
    metadata: Vec<(String, GgufValue)>,
    tensors: Vec<(String, Vec<u64>, u32, Vec<u8>)>,
}

impl GgufWriter {
    /// An empty file.
    pub fn new() -> GgufWriter {
        GgufWriter::default()
    }

    /// Add a metadata pair.
    pub fn kv(mut self, key: &str, value: GgufValue) -> GgufWriter {
        self.metadata.push((key.to_string(), value));
        self
    }

    /// Add a tensor: its dims (innermost first), ggml type and raw data.
    pub fn tensor(mut self, name: &str, dims: &[u64], ggml_type: u32, data: Vec<u8>) -> Self {
        self.tensors.push((name.to_string(), dims.to_vec(), ggml_type, data));
        self
    }

    /// The file's bytes (version 3, alignment 32).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_str(&mut out, k);
            out.extend_from_slice(&value_type(v).to_le_bytes());
            put_value(&mut out, v);
        }
        let mut offset = 0u64;
        for (name, dims, ty, data) in &self.tensors {
            put_str(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset = (offset + data.len() as u64).div_ceil(DEFAULT_ALIGNMENT) * DEFAULT_ALIGNMENT;
        }
        let pad = |out: &mut Vec<u8>| {
            while !(out.len() as u64).is_multiple_of(DEFAULT_ALIGNMENT) {
                out.push(0);
            }
        };
        pad(&mut out);
        for (_, _, _, data) in &self.tensors {
            out.extend_from_slice(data);
            pad(&mut out);
        }
        out
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn value_type(v: &GgufValue) -> u32 {
    match v {
        GgufValue::U8(_) => 0,
        GgufValue::I8(_) => 1,
        GgufValue::U16(_) => 2,
        GgufValue::I16(_) => 3,
        GgufValue::U32(_) => 4,
        GgufValue::I32(_) => 5,
        GgufValue::F32(_) => 6,
        GgufValue::Bool(_) => 7,
        GgufValue::String(_) => 8,
        GgufValue::Array(_) => 9,
        GgufValue::U64(_) => 10,
        GgufValue::I64(_) => 11,
        GgufValue::F64(_) => 12,
    }
}

fn put_value(out: &mut Vec<u8>, v: &GgufValue) {
    match v {
        GgufValue::U8(x) => out.push(*x),
        GgufValue::I8(x) => out.push(*x as u8),
        GgufValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::Bool(x) => out.push(u8::from(*x)),
        GgufValue::String(s) => put_str(out, s),
        GgufValue::Array(a) => {
            // An empty array is written as an array of u8.
            let inner = a.first().map_or(0, value_type);
            out.extend_from_slice(&inner.to_le_bytes());
            out.extend_from_slice(&(a.len() as u64).to_le_bytes());
            for x in a {
                put_value(out, x);
            }
        }
        GgufValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        GgufValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}
