//! ClickHouse's `RowBinary` format, written by the sink itself so that a batch's rows can be
//! encoded — and compressed — on several threads at once, leaving the writer task only the
//! sending (the scaling issue: no serial stage per event).
//!
//! The `clickhouse` crate's own row serializer is private to it (its `Insert` encodes on the task
//! that sends). [`RowBinarySerializer`] is a serde `Serializer` writing the same bytes for the
//! types the sink's records use (a unit test checks each layout; the ClickHouse integration
//! tests read the rows back from a real server):
//!
//! | Rust | RowBinary |
//! |---|---|
//! | `bool`, integers, `f32`, `f64` | little-endian, fixed width (`bool` one byte 0/1) |
//! | `&str`, `String`, `&[u8]` | LEB128 length, then the bytes (`String`) |
//! | `Option<T>` | one byte, 1 = NULL, else 0 and the value (`Nullable(T)`) |
//! | sequences | LEB128 element count, then the elements (`Array(T)`) |
//! | structs, tuples | the fields in declaration order, nothing between them |
//!
//! Anything else (maps, enums with data, `char`, units) is an error, not a guess.
//!
//! [`encode_chunks`] lays rows out in chunks of about [`CHUNK_BYTES`] and compresses each chunk
//! as the client would (LZ4 blocks with ClickHouse's checksum); from
//! [`MIN_CORES_FOR_PARALLEL_ENCODING`](crate::stores::MIN_CORES_FOR_PARALLEL_ENCODING) cores on, and
//! for batches of at least twice [`MIN_ROWS_PER_ENCODER`] rows, the rows are cut into consecutive
//! slices encoded on rayon's pool, and the chunks kept in order, so the server receives the rows
//! in the order of the batch whatever the threads.

use serde::ser::{self, Serialize};

/// Rows per rayon task below which a batch is encoded on the calling thread.
pub const MIN_ROWS_PER_ENCODER: usize = 256;

/// The size a chunk is closed at (after the row that reaches it): the `clickhouse` crate's own
/// insert buffer flushes at 256 KiB less 2 KiB, and ClickHouse reads each compressed chunk as one
/// block.
pub const CHUNK_BYTES: usize = 256 * 1024 - 2048;

/// A row the sink's records cannot be written as.
#[derive(Debug, thiserror::Error)]
pub enum RowBinaryError {
    /// A value of a kind RowBinary has no layout for here.
    #[error("RowBinary cannot encode {0}")]
    Unsupported(&'static str),
    /// serde's own error (a `Serialize` implementation that failed).
    #[error("{0}")]
    Custom(String),
    /// The `clickhouse` crate could not compress a chunk.
    #[error("compressing a RowBinary chunk")]
    Compress(#[source] clickhouse::error::Error),
}

impl ser::Error for RowBinaryError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        RowBinaryError::Custom(msg.to_string())
    }
}

/// Append `value` to `out` in RowBinary.
pub fn encode_into<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), RowBinaryError> {
    value.serialize(RowBinarySerializer { out })
}

/// One chunk of an insert's body, ready to send.
pub enum Chunk {
    /// RowBinary bytes, compressed as the client's `Compression` says.
    Compressed(clickhouse::insert_formatted::CompressedData),
    /// RowBinary bytes as they are (the client sends without compression).
    Plain(bytes::Bytes),
}

/// The RowBinary body of `items` in chunks of about [`CHUNK_BYTES`], each compressed with
/// `compression` unless it is `None`. `encode` writes one item's row (it may build the record
/// from the item first), with a state of its own per slice of the batch (`new_state`: a cache
/// of parsed event times, say); it is called on rayon's threads when the batch is cut (see the
/// module documentation), so the chunks' bytes, concatenated, are those of one serial pass
/// whenever `encode` writes the same row whatever its state holds.
pub fn encode_chunks<T, S, F>(
    items: &[T],
    compression: clickhouse::Compression,
    parallel: bool,
    new_state: impl Fn() -> S + Sync,
    encode: F,
) -> Result<Vec<Chunk>, RowBinaryError>
where
    T: Sync,
    F: Fn(&mut S, &T, &mut Vec<u8>) -> Result<(), RowBinaryError> + Sync,
{
    let threads = rayon::current_num_threads().min(items.len() / MIN_ROWS_PER_ENCODER);
    if !parallel || threads <= 1 {
        return encode_serial(items, compression, &mut new_state(), &encode);
    }
    // rayon's prelude: the parallel-iterator traits, by the crate's own convention.
    use rayon::prelude::*;
    let per_thread = items.len().div_ceil(threads);
    let parts: Vec<Result<Vec<Chunk>, RowBinaryError>> = items
        .par_chunks(per_thread)
        .map(|slice| encode_serial(slice, compression, &mut new_state(), &encode))
        .collect();
    let mut chunks = Vec::new();
    for part in parts {
        chunks.extend(part?);
    }
    Ok(chunks)
}

fn encode_serial<T, S>(
    items: &[T],
    compression: clickhouse::Compression,
    state: &mut S,
    encode: &impl Fn(&mut S, &T, &mut Vec<u8>) -> Result<(), RowBinaryError>,
) -> Result<Vec<Chunk>, RowBinaryError> {
    let mut chunks = Vec::new();
    let mut buffer = Vec::with_capacity(CHUNK_BYTES + 4096);
    for item in items {
        encode(state, item, &mut buffer)?;
        if buffer.len() >= CHUNK_BYTES {
            chunks.push(close_chunk(&buffer, compression)?);
            buffer.clear();
        }
    }
    if !buffer.is_empty() {
        chunks.push(close_chunk(&buffer, compression)?);
    }
    Ok(chunks)
}

fn close_chunk(
    buffer: &[u8],
    compression: clickhouse::Compression,
) -> Result<Chunk, RowBinaryError> {
    if compression != clickhouse::Compression::None {
        clickhouse::insert_formatted::CompressedData::new(buffer, compression)
            .map(Chunk::Compressed)
            .map_err(RowBinaryError::Compress)
    } else {
        Ok(Chunk::Plain(bytes::Bytes::copy_from_slice(buffer)))
    }
}

/// A serde `Serializer` appending RowBinary to a buffer (see the module documentation).
pub struct RowBinarySerializer<'a> {
    out: &'a mut Vec<u8>,
}

impl RowBinarySerializer<'_> {
    fn leb128(&mut self, mut n: u64) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.out.push(byte);
                return;
            }
            self.out.push(byte | 0x80);
        }
    }

    fn bytes(&mut self, v: &[u8]) {
        self.leb128(v.len() as u64);
        self.out.extend_from_slice(v);
    }
}

macro_rules! fixed {
    ($($method:ident: $ty:ty),*) => {
        $(fn $method(self, v: $ty) -> Result<(), RowBinaryError> {
            self.out.extend_from_slice(&v.to_le_bytes());
            Ok(())
        })*
    };
}

impl ser::Serializer for RowBinarySerializer<'_> {
    type Ok = ();
    type Error = RowBinaryError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = ser::Impossible<(), RowBinaryError>;
    type SerializeMap = ser::Impossible<(), RowBinaryError>;
    type SerializeStruct = Self;
    type SerializeStructVariant = ser::Impossible<(), RowBinaryError>;

    fixed!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128, serialize_f32: f32, serialize_f64: f64);

    fn serialize_bool(self, v: bool) -> Result<(), RowBinaryError> {
        self.out.push(u8::from(v));
        Ok(())
    }

    fn serialize_char(self, _: char) -> Result<(), RowBinaryError> {
        Err(RowBinaryError::Unsupported("a char"))
    }

    fn serialize_str(mut self, v: &str) -> Result<(), RowBinaryError> {
        self.bytes(v.as_bytes());
        Ok(())
    }

    fn serialize_bytes(mut self, v: &[u8]) -> Result<(), RowBinaryError> {
        self.bytes(v);
        Ok(())
    }

    fn serialize_none(self) -> Result<(), RowBinaryError> {
        self.out.push(1);
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), RowBinaryError> {
        self.out.push(0);
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), RowBinaryError> {
        Err(RowBinaryError::Unsupported("a unit"))
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), RowBinaryError> {
        Err(RowBinaryError::Unsupported("a unit struct"))
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), RowBinaryError> {
        Err(RowBinaryError::Unsupported("an enum variant"))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), RowBinaryError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), RowBinaryError> {
        Err(RowBinaryError::Unsupported("an enum variant"))
    }

    fn serialize_seq(mut self, len: Option<usize>) -> Result<Self, RowBinaryError> {
        let len = len.ok_or(RowBinaryError::Unsupported("a sequence of unknown length"))?;
        self.leb128(len as u64);
        Ok(self)
    }

    fn serialize_tuple(self, _: usize) -> Result<Self, RowBinaryError> {
        Ok(self)
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, RowBinaryError> {
        Ok(self)
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, RowBinaryError> {
        Err(RowBinaryError::Unsupported("an enum variant"))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, RowBinaryError> {
        Err(RowBinaryError::Unsupported("a map"))
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, RowBinaryError> {
        Ok(self)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, RowBinaryError> {
        Err(RowBinaryError::Unsupported("an enum variant"))
    }
}

/// Sequences, tuples and tuple structs: the elements one after another (a sequence's count is
/// written by `serialize_seq`).
macro_rules! elements {
    ($($trait:ident :: $method:ident),*) => {
        $(impl ser::$trait for RowBinarySerializer<'_> {
            type Ok = ();
            type Error = RowBinaryError;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), RowBinaryError> {
                value.serialize(RowBinarySerializer { out: self.out })
            }

            fn end(self) -> Result<(), RowBinaryError> {
                Ok(())
            }
        })*
    };
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

impl ser::SerializeStruct for RowBinarySerializer<'_> {
    type Ok = ();
    type Error = RowBinaryError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), RowBinaryError> {
        value.serialize(RowBinarySerializer { out: self.out })
    }

    fn end(self) -> Result<(), RowBinaryError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
        let mut out = Vec::new();
        encode_into(value, &mut out).unwrap();
        out
    }

    #[derive(serde::Serialize)]
    struct Record<'a> {
        id: &'a str,
        ts: u32,
        app: Option<&'a str>,
        value: f64,
        verdict: Option<u8>,
        codes: Vec<std::borrow::Cow<'a, str>>,
        rules: &'a [String],
        tokens: u64,
        flag: bool,
    }

    #[test]
    fn each_type_has_clickhouse_layout() {
        assert_eq!(encoded(&7u8), [7]);
        assert_eq!(encoded(&0x0102_0304u32), [4, 3, 2, 1]);
        assert_eq!(encoded(&1u64), [1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(encoded(&-2i16), [0xfe, 0xff]);
        assert_eq!(encoded(&1.5f64), 1.5f64.to_le_bytes());
        assert_eq!(encoded(&true), [1]);
        assert_eq!(encoded("ab"), [2, b'a', b'b']);
        // LEB128 lengths: 127 in one byte, 128 in two, 300 as 0xac 0x02.
        assert_eq!(encoded(&"x".repeat(127))[..1], [127]);
        assert_eq!(encoded(&"x".repeat(128))[..2], [0x80, 0x01]);
        assert_eq!(encoded(&"x".repeat(300))[..2], [0xac, 0x02]);
        assert_eq!(encoded(&"x".repeat(300)).len(), 302);
        assert_eq!(encoded(&None::<&str>), [1]);
        assert_eq!(encoded(&Some("a")), [0, 1, b'a']);
        assert_eq!(encoded(&Some(3u8)), [0, 3]);
        assert_eq!(encoded(&vec!["a", "bc"]), [2, 1, b'a', 2, b'b', b'c']);
        assert_eq!(encoded(&Vec::<String>::new()), [0]);
        assert_eq!(encoded(&(1u8, "a")), [1, 1, b'a']);
        assert_eq!(
            encoded("é"),
            [2, 0xc3, 0xa9],
            "the UTF-8 bytes, length in bytes"
        );
    }

    #[test]
    fn a_struct_is_its_fields_in_order() {
        let rules = vec!["r1".to_string()];
        let row = Record {
            id: "e1",
            ts: 10,
            app: None,
            value: 2.0,
            verdict: Some(1),
            codes: vec!["c".into()],
            rules: &rules,
            tokens: 5,
            flag: false,
        };
        let mut want = vec![2, b'e', b'1', 10, 0, 0, 0, 1];
        want.extend_from_slice(&2.0f64.to_le_bytes());
        want.extend_from_slice(&[0, 1, 1, 1, b'c', 1, 2, b'r', b'1']);
        want.extend_from_slice(&5u64.to_le_bytes());
        want.push(0);
        assert_eq!(encoded(&row), want);
    }

    #[test]
    fn kinds_without_a_layout_are_errors() {
        let mut out = Vec::new();
        let map: std::collections::BTreeMap<&str, u8> = [("a", 1)].into();
        assert!(matches!(
            encode_into(&map, &mut out),
            Err(RowBinaryError::Unsupported("a map"))
        ));
        assert!(matches!(
            encode_into(&'c', &mut out),
            Err(RowBinaryError::Unsupported("a char"))
        ));
        assert!(encode_into(&(), &mut out).is_err());
    }

    fn plain(chunks: Vec<Chunk>) -> Vec<Vec<u8>> {
        chunks
            .into_iter()
            .map(|c| match c {
                Chunk::Plain(b) => b.to_vec(),
                Chunk::Compressed(_) => panic!("compressed without compression"),
            })
            .collect()
    }

    #[test]
    fn chunks_close_after_the_row_that_fills_them_and_keep_the_order() {
        let items: Vec<String> = (0..3_000).map(|i| format!("{i:0>200}")).collect();
        let encode = |_: &mut (), s: &String, out: &mut Vec<u8>| encode_into(s, out);
        let none = clickhouse::Compression::None;
        let serial = plain(encode_chunks(&items, none, false, || (), encode).unwrap());
        // 3,000 rows of 202 bytes: 606,000 bytes, closed after the row that reaches 260,096.
        assert_eq!(serial.len(), 3);
        assert!(
            serial[..2]
                .iter()
                .all(|c| c.len() >= CHUNK_BYTES && c.len() < CHUNK_BYTES + 202)
        );
        let mut whole = Vec::new();
        for s in &items {
            encode_into(s, &mut whole).unwrap();
        }
        assert_eq!(serial.concat(), whole);
        let parallel = plain(encode_chunks(&items, none, true, || (), encode).unwrap());
        assert_eq!(parallel.concat(), whole, "the rows in the batch's order");
        let empty: &[String] = &[];
        assert!(plain(encode_chunks(empty, none, true, || (), encode).unwrap()).is_empty());
    }

    #[test]
    fn chunks_are_compressed_when_the_client_compresses() {
        let items: Vec<String> = (0..600).map(|i| format!("row {i}")).collect();
        let lz4 = clickhouse::Compression::Lz4;
        let chunks =
            encode_chunks(&items, lz4, true, || (), |_, s, out| encode_into(s, out)).unwrap();
        assert!(!chunks.is_empty());
        assert!(chunks.iter().all(|c| matches!(c, Chunk::Compressed(_))));
    }

    #[test]
    fn an_encoding_error_fails_the_batch() {
        let items = vec![1u8; 1_000];
        let none = clickhouse::Compression::None;
        let failed = encode_chunks(
            &items,
            none,
            true,
            || (),
            |_, _, _| Err(RowBinaryError::Unsupported("a test row")),
        );
        assert!(failed.is_err());
    }
}
