//! JSON text written the way `serde_json::to_writer` writes it, byte for byte, at less cost per
//! string: the compact form every JSON-lines sink and every line-rate row's `details` use.
//!
//! Why not `serde_json` itself: its string writer tests each byte against an escape table one at
//! a time (~9 instructions per byte), and a row is ~2,500 bytes of keys and values; on the line
//! rate that loop alone was ~17,500 instructions per event, more than any stage of STEF but the
//! parse. Here a string is scanned eight bytes at a time (one `u64`, three borrow tests: a byte
//! below 0x20, a `"`, a `\`) and copied in runs. Everything else is `serde_json`'s behaviour
//! exactly, which the tests pin by comparing the two writers on every row shape, on JSON values
//! from the shared data and on random strings:
//!
//! - escapes: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other bytes below 0x20 as `\u00xx`
//!   (lower-case hex); nothing else (`/`, DEL and non-ASCII are written as they are);
//! - numbers: integers by `itoa`, floats by `zmij` (what `serde_json` uses), NaN and ±∞ as `null`;
//! - `None` and `()` as `null`, unit variants as their name, newtype variants and the other
//!   variants as one-key objects, bytes as arrays of numbers, map keys that are numbers or
//!   booleans quoted (other keys are an error, as there);
//! - a [`serde_json::value::RawValue`] (and the row's rendered `details`, which serialise the same
//!   way) written verbatim.
//!
//! No `unsafe`: the output is `Vec<u8>`, and callers that need a `String` convert it (the ASCII
//! fast path of `String::from_utf8`).

use serde::ser::{self, Impossible, Serialize};

/// The struct name (and field name) through which `serde_json` passes raw JSON text: what a
/// [`serde_json::value::RawValue`] serialises as. `serde_json` keeps it private; the tests fail
/// if it changes (a raw value would then be written as a one-key object).
pub const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Why a value could not be written as JSON (the same cases as `serde_json`'s writer).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JsonTextError {
    /// A map key that is not a string, a number, a boolean or a unit variant.
    #[error("key must be a string")]
    KeyMustBeAString,
    /// A float map key that is NaN or infinite.
    #[error("float key must be finite")]
    FloatKeyMustBeFinite,
    /// A raw value whose content is not a string.
    #[error("expected value")]
    InvalidRawValue,
    /// What the value's `Serialize` reported.
    #[error("{0}")]
    Custom(String),
}

impl ser::Error for JsonTextError {
    fn custom<T: std::fmt::Display>(msg: T) -> JsonTextError {
        JsonTextError::Custom(msg.to_string())
    }
}

/// Append `value`'s compact JSON text to `out` (what `serde_json::to_writer` would append).
pub fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), JsonTextError> {
    value.serialize(&mut JsonWriter { out })
}

/// `value`'s compact JSON text (what `serde_json::to_string` returns).
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, JsonTextError> {
    to_string_with_capacity(value, 128)
}

/// [`to_string`] into a buffer that starts with room for `capacity` bytes (a caller that knows
/// its texts' size writes them without growing it).
pub fn to_string_with_capacity<T: Serialize + ?Sized>(
    value: &T,
    capacity: usize,
) -> Result<String, JsonTextError> {
    let mut out = Vec::with_capacity(capacity);
    write(&mut out, value)?;
    // Only `&str` pieces and ASCII are ever written, so this cannot fail; if it did, say so.
    String::from_utf8(out).map_err(|error| JsonTextError::Custom(error.to_string()))
}

/// The serializer: appends to a byte buffer.
pub struct JsonWriter<'a> {
    out: &'a mut Vec<u8>,
}

/// One in every byte lane of a `u64`.
const LANES_ONE: u64 = 0x0101_0101_0101_0101;
/// The high bit of every byte lane of a `u64`.
const LANES_HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit set in the lane of every byte of `word` that JSON escapes (below 0x20, `"`,
/// `\`), and possibly in lanes above such a byte (a borrow carries up): the lowest set lane is
/// always a byte to escape, and a zero result means none is.
#[inline]
fn lanes_to_escape(word: u64) -> u64 {
    let quote = word ^ (LANES_ONE * u64::from(b'"'));
    let backslash = word ^ (LANES_ONE * u64::from(b'\\'));
    let control = word.wrapping_sub(LANES_ONE * 0x20) & !word;
    let quote = quote.wrapping_sub(LANES_ONE) & !quote;
    let backslash = backslash.wrapping_sub(LANES_ONE) & !backslash;
    (control | quote | backslash) & LANES_HIGH
}

/// Lower-case hex digits, as `serde_json` writes `\u00xx`.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Append the escape of `byte` (one JSON escapes).
fn write_escape(out: &mut Vec<u8>, byte: u8) {
    let short = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0C => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX_DIGITS[usize::from(byte >> 4)],
                HEX_DIGITS[usize::from(byte & 0xF)],
            ]);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

/// Room reserved past a string's own bytes: its two quotes and the padding of a tail word.
const STRING_SLACK: usize = 2 + 8;

/// Append `text` as a JSON string.
///
/// Most strings here are short keys and names, so the cost per string matters more than per
/// byte: whole words with nothing to escape are copied a `u64` at a time in a tight loop (a
/// fixed-size copy, no `memcpy` call); the last 1–7 bytes are gathered into one padded word with
/// at most two overlapping loads, written whole, and the padding cut off again. A word with a
/// byte to escape is written up to that byte, the escape after it, and the scan goes on from the
/// next byte. A string of at most 16 bytes with nothing to escape (most keys and names: ~105 of
/// a line-rate event's ~133 strings) is written quotes and all as one fixed-size piece, inline
/// where it is written.
#[inline]
fn write_str(out: &mut Vec<u8>, text: &str) {
    if let Some((low, high)) = short_words(text.as_bytes())
        && lanes_to_escape(low) | lanes_to_escape(high) == 0
    {
        write_short(out, low, high, text.len());
    } else {
        write_long(out, text);
    }
}

/// [`write_str`] for a text longer than 16 bytes or with a byte to escape.
#[inline(never)]
fn write_long(out: &mut Vec<u8>, text: &str) {
    out.reserve(text.len() + STRING_SLACK);
    out.push(b'"');
    let mut rest = text.as_bytes();
    loop {
        while let Some((chunk, after)) = rest.split_first_chunk::<8>() {
            if lanes_to_escape(u64::from_le_bytes(*chunk)) != 0 {
                break;
            }
            out.extend_from_slice(chunk);
            rest = after;
        }
        // A whole word with a byte to escape, or the last 1–7 bytes, or nothing.
        let (word, len) = match rest.first_chunk::<8>() {
            Some(chunk) => (u64::from_le_bytes(*chunk), 8),
            None if rest.is_empty() => break,
            None => (tail_word(rest), rest.len()),
        };
        let lanes = lanes_to_escape(word);
        let plain = if lanes == 0 {
            len
        } else {
            (lanes.trailing_zeros() / 8) as usize
        };
        out.extend_from_slice(&word.to_le_bytes());
        out.truncate(out.len() - (8 - plain));
        if plain == len {
            // Only a tail is ever plain to its end here: the string is done.
            break;
        }
        write_escape(out, word.to_le_bytes()[plain]);
        rest = rest.get(plain + 1..).unwrap_or_default();
    }
    out.push(b'"');
}

/// The bytes of a text of at most 16 bytes as two padded words (the lanes past its end hold a
/// byte that is never escaped), or `None` for a longer text.
#[inline]
fn short_words(bytes: &[u8]) -> Option<(u64, u64)> {
    match bytes.split_first_chunk::<8>() {
        None => Some((tail_word(bytes), tail_word(&[]))),
        Some((low, rest)) => {
            let high = match rest.first_chunk::<8>() {
                Some(high) if rest.len() == 8 => u64::from_le_bytes(*high),
                Some(_) => return None,
                None => tail_word(rest),
            };
            Some((u64::from_le_bytes(*low), high))
        }
    }
}

/// Append the `len` (at most 16) bytes held by `low` and `high` ([`short_words`]) between
/// quotes: one fixed-size piece written whole, then cut to its length.
#[inline]
fn write_short(out: &mut Vec<u8>, low: u64, high: u64, len: usize) {
    let mut piece = [b'"'; 24];
    piece[1..9].copy_from_slice(&low.to_le_bytes());
    piece[9..17].copy_from_slice(&high.to_le_bytes());
    let end = out.len() + len.min(16) + 2;
    if let Some(close) = piece.get_mut(len.min(16) + 1) {
        *close = b'"';
    }
    out.extend_from_slice(&piece);
    out.truncate(end);
}

/// The 1–7 bytes of `tail` as the low lanes of a word whose other lanes hold a byte that is
/// never escaped: two loads that may overlap (an overlapping byte is the same in both, so OR
/// keeps it).
#[inline]
fn tail_word(tail: &[u8]) -> u64 {
    const PADDING: u64 = LANES_ONE * b'a' as u64;
    let len = tail.len();
    let bytes = match tail {
        [a, b, c, d, ..] => {
            let low = u32::from_le_bytes([*a, *b, *c, *d]);
            let high = tail
                .last_chunk::<4>()
                .map_or(0, |chunk| u32::from_le_bytes(*chunk));
            u64::from(low) | (u64::from(high) << (8 * (len - 4)))
        }
        [a, b, ..] => {
            let low = u16::from_le_bytes([*a, *b]);
            let high = tail
                .last_chunk::<2>()
                .map_or(0, |chunk| u16::from_le_bytes(*chunk));
            u64::from(low) | (u64::from(high) << (8 * (len - 2)))
        }
        [a] => u64::from(*a),
        [] => 0,
    };
    // `len` is below 8 here; a longer tail would keep no padding rather than shift by 64.
    let padding = u32::try_from(8 * len)
        .ok()
        .and_then(|shift| PADDING.checked_shl(shift))
        .unwrap_or(0);
    bytes | padding
}

/// Append `value` as `itoa` writes it.
fn write_integer<I: itoa::Integer>(out: &mut Vec<u8>, value: I) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// Append a finite float as `zmij` writes it (what `serde_json` does).
fn write_finite<F: zmij::Float>(out: &mut Vec<u8>, value: F) {
    out.extend_from_slice(zmij::Buffer::new().format_finite(value).as_bytes());
}

/// `serialize_*` methods for the integer types, each `$body` with the value as `$value` and the
/// serializer as `$this`.
macro_rules! integers {
    (|$this:ident, $value:ident| $body:expr) => {
        integers!(@each |$this, $value| $body;
            serialize_i8(i8), serialize_i16(i16), serialize_i32(i32), serialize_i64(i64),
            serialize_i128(i128), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
            serialize_u64(u64), serialize_u128(u128));
    };
    (@each |$this:ident, $value:ident| $body:expr; $($method:ident($ty:ty)),*) => {
        $(fn $method($this, $value: $ty) -> Result<(), JsonTextError> {
            $body
        })*
    };
}

impl<'a, 'b> ser::Serializer for &'a mut JsonWriter<'b> {
    type Ok = ();
    type Error = JsonTextError;
    type SerializeSeq = Compound<'a, 'b>;
    type SerializeTuple = Compound<'a, 'b>;
    type SerializeTupleStruct = Compound<'a, 'b>;
    type SerializeTupleVariant = Compound<'a, 'b>;
    type SerializeMap = Compound<'a, 'b>;
    type SerializeStruct = Compound<'a, 'b>;
    type SerializeStructVariant = Compound<'a, 'b>;

    fn serialize_bool(self, value: bool) -> Result<(), JsonTextError> {
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
        Ok(())
    }

    integers!(|self, value| {
        write_integer(self.out, value);
        Ok(())
    });

    fn serialize_f32(self, value: f32) -> Result<(), JsonTextError> {
        if value.is_finite() {
            write_finite(self.out, value);
        } else {
            self.out.extend_from_slice(b"null");
        }
        Ok(())
    }

    fn serialize_f64(self, value: f64) -> Result<(), JsonTextError> {
        if value.is_finite() {
            write_finite(self.out, value);
        } else {
            self.out.extend_from_slice(b"null");
        }
        Ok(())
    }

    fn serialize_char(self, value: char) -> Result<(), JsonTextError> {
        write_str(self.out, value.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_str(self, value: &str) -> Result<(), JsonTextError> {
        write_str(self.out, value);
        Ok(())
    }

    fn serialize_bytes(self, value: &[u8]) -> Result<(), JsonTextError> {
        self.out.push(b'[');
        for (index, byte) in value.iter().enumerate() {
            if index > 0 {
                self.out.push(b',');
            }
            write_integer(self.out, *byte);
        }
        self.out.push(b']');
        Ok(())
    }

    fn serialize_none(self) -> Result<(), JsonTextError> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), JsonTextError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), JsonTextError> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), JsonTextError> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), JsonTextError> {
        write_str(self.out, variant);
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), JsonTextError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), JsonTextError> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'a, 'b>, JsonTextError> {
        self.out.push(b'[');
        Ok(Compound::open(self, len, b']'))
    }

    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, 'b>, JsonTextError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'b>, JsonTextError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'b>, JsonTextError> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        let mut compound = self.serialize_seq(Some(len))?;
        compound.in_variant = true;
        Ok(compound)
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'a, 'b>, JsonTextError> {
        self.out.push(b'{');
        Ok(Compound::open(self, len, b'}'))
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'b>, JsonTextError> {
        if name == RAW_VALUE_TOKEN {
            return Ok(Compound {
                writer: self,
                state: State::Raw,
                close: 0,
                in_variant: false,
            });
        }
        self.serialize_map(Some(len))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'b>, JsonTextError> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        let mut compound = self.serialize_map(Some(len))?;
        compound.in_variant = true;
        Ok(compound)
    }
}

/// Where an array or object is: `serde_json`'s states (an announced length of 0 closes the
/// brackets at once; elements after that are written without a separator, as there).
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Empty,
    First,
    Rest,
    /// Inside a raw value: its one field is written verbatim.
    Raw,
}

/// An array, object or raw value being written.
pub struct Compound<'a, 'b> {
    writer: &'a mut JsonWriter<'b>,
    state: State,
    /// The closing bracket.
    close: u8,
    /// Inside a one-key object naming a variant, which `end` closes too.
    in_variant: bool,
}

impl<'a, 'b> Compound<'a, 'b> {
    fn open(writer: &'a mut JsonWriter<'b>, len: Option<usize>, close: u8) -> Compound<'a, 'b> {
        let state = if len == Some(0) {
            writer.out.push(close);
            State::Empty
        } else {
            State::First
        };
        Compound {
            writer,
            state,
            close,
            in_variant: false,
        }
    }

    /// The separator before an element or a key.
    fn separate(&mut self) {
        if self.state != State::First {
            self.writer.out.push(b',');
        }
        self.state = State::Rest;
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonTextError> {
        self.separate();
        value.serialize(&mut *self.writer)
    }

    fn finish(self) -> Result<(), JsonTextError> {
        match self.state {
            State::Raw => return Ok(()),
            State::Empty => {}
            State::First | State::Rest => self.writer.out.push(self.close),
        }
        if self.in_variant {
            self.writer.out.push(b'}');
        }
        Ok(())
    }
}

/// The four array-shaped traits: each element after a separator, the bracket closed at the end.
macro_rules! array_shaped {
    ($($trait:ident::$method:ident),* $(,)?) => {
        $(impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = JsonTextError;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonTextError> {
                self.element(value)
            }

            fn end(self) -> Result<(), JsonTextError> {
                self.finish()
            }
        })*
    };
}

array_shaped!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = JsonTextError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), JsonTextError> {
        self.separate();
        key.serialize(KeyWriter {
            out: &mut *self.writer.out,
        })?;
        self.writer.out.push(b':');
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonTextError> {
        value.serialize(&mut *self.writer)
    }

    fn end(self) -> Result<(), JsonTextError> {
        self.finish()
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = JsonTextError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), JsonTextError> {
        if self.state == State::Raw {
            if key != RAW_VALUE_TOKEN {
                return Err(JsonTextError::InvalidRawValue);
            }
            return value.serialize(RawWriter {
                out: &mut *self.writer.out,
            });
        }
        self.separate();
        write_str(self.writer.out, key);
        self.writer.out.push(b':');
        value.serialize(&mut *self.writer)
    }

    fn end(self) -> Result<(), JsonTextError> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = JsonTextError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), JsonTextError> {
        ser::SerializeStruct::serialize_field(self, key, value)
    }

    fn end(self) -> Result<(), JsonTextError> {
        self.finish()
    }
}

/// The associated types of a serializer that writes one value and no compound (a map key, a raw
/// value's text).
macro_rules! no_compounds {
    () => {
        type Ok = ();
        type Error = JsonTextError;
        type SerializeSeq = Impossible<(), JsonTextError>;
        type SerializeTuple = Impossible<(), JsonTextError>;
        type SerializeTupleStruct = Impossible<(), JsonTextError>;
        type SerializeTupleVariant = Impossible<(), JsonTextError>;
        type SerializeMap = Impossible<(), JsonTextError>;
        type SerializeStruct = Impossible<(), JsonTextError>;
        type SerializeStructVariant = Impossible<(), JsonTextError>;
    };
}

/// `serialize_*` methods that refuse their value with `$error`: scalars by their type, the rest
/// by name.
macro_rules! refuse {
    ($error:expr; scalars: $($scalar:ident($ty:ty)),* $(,)?) => {
        $(fn $scalar(self, _value: $ty) -> Result<(), JsonTextError> {
            Err($error)
        })*
    };
    ($error:expr; shapes) => {
        fn serialize_bytes(self, _value: &[u8]) -> Result<(), JsonTextError> {
            Err($error)
        }

        fn serialize_none(self) -> Result<(), JsonTextError> {
            Err($error)
        }

        fn serialize_unit(self) -> Result<(), JsonTextError> {
            Err($error)
        }

        fn serialize_unit_struct(self, _name: &'static str) -> Result<(), JsonTextError> {
            Err($error)
        }

        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _value: &T,
        ) -> Result<(), JsonTextError> {
            Err($error)
        }

        fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, JsonTextError> {
            Err($error)
        }

        fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, JsonTextError> {
            Err($error)
        }

        fn serialize_tuple_struct(
            self,
            _name: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeTupleStruct, JsonTextError> {
            Err($error)
        }

        fn serialize_tuple_variant(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeTupleVariant, JsonTextError> {
            Err($error)
        }

        fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, JsonTextError> {
            Err($error)
        }

        fn serialize_struct(
            self,
            _name: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeStruct, JsonTextError> {
            Err($error)
        }

        fn serialize_struct_variant(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeStructVariant, JsonTextError> {
            Err($error)
        }
    };
}

/// Writes a map key: strings as they are, numbers and booleans quoted, anything else an error.
struct KeyWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl KeyWriter<'_> {
    fn quoted_integer<I: itoa::Integer>(self, value: I) -> Result<(), JsonTextError> {
        self.out.push(b'"');
        write_integer(self.out, value);
        self.out.push(b'"');
        Ok(())
    }

    fn quoted_float<F: zmij::Float>(self, value: F, finite: bool) -> Result<(), JsonTextError> {
        if !finite {
            return Err(JsonTextError::FloatKeyMustBeFinite);
        }
        self.out.push(b'"');
        write_finite(self.out, value);
        self.out.push(b'"');
        Ok(())
    }
}

impl ser::Serializer for KeyWriter<'_> {
    no_compounds!();

    fn serialize_str(self, value: &str) -> Result<(), JsonTextError> {
        write_str(self.out, value);
        Ok(())
    }

    fn serialize_char(self, value: char) -> Result<(), JsonTextError> {
        write_str(self.out, value.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), JsonTextError> {
        write_str(self.out, variant);
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), JsonTextError> {
        value.serialize(self)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), JsonTextError> {
        value.serialize(self)
    }

    fn serialize_bool(self, value: bool) -> Result<(), JsonTextError> {
        self.out
            .extend_from_slice(if value { b"\"true\"" } else { b"\"false\"" });
        Ok(())
    }

    integers!(|self, value| self.quoted_integer(value));

    fn serialize_f32(self, value: f32) -> Result<(), JsonTextError> {
        self.quoted_float(value, value.is_finite())
    }

    fn serialize_f64(self, value: f64) -> Result<(), JsonTextError> {
        self.quoted_float(value, value.is_finite())
    }

    refuse!(JsonTextError::KeyMustBeAString; shapes);
}

/// Writes a raw value's text verbatim; its content must be a string, as in `serde_json`.
struct RawWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl ser::Serializer for RawWriter<'_> {
    no_compounds!();

    fn serialize_str(self, value: &str) -> Result<(), JsonTextError> {
        self.out.extend_from_slice(value.as_bytes());
        Ok(())
    }

    refuse!(JsonTextError::InvalidRawValue; scalars:
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
        serialize_i64(i64), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_f32(f32), serialize_f64(f64), serialize_char(char),
    );

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), JsonTextError> {
        Err(JsonTextError::InvalidRawValue)
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<(), JsonTextError> {
        Err(JsonTextError::InvalidRawValue)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _value: &T,
    ) -> Result<(), JsonTextError> {
        Err(JsonTextError::InvalidRawValue)
    }

    refuse!(JsonTextError::InvalidRawValue; shapes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use std::collections::BTreeMap;

    /// Both writers' text for `value`: equal, or the test fails with both.
    fn assert_same_text<T: Serialize + ?Sized>(value: &T) {
        let ours = to_string(value).expect("writes");
        let theirs = serde_json::to_string(value).expect("serde_json writes");
        assert_eq!(ours, theirs);
    }

    #[test]
    fn every_byte_and_its_neighbours_escape_as_serde_json_escapes_them() {
        // Each ASCII byte alone, at every position of a 1- to 19-byte string (the word scan and
        // the padded tail), next to another escaped byte, and next to multi-byte characters.
        for byte in 0u8..0x80 {
            let c = char::from(byte);
            for len in 1..20 {
                for at in 0..len {
                    let text: String = (0..len).map(|i| if i == at { c } else { 'x' }).collect();
                    assert_same_text(&text);
                }
            }
            assert_same_text(&format!("{c}\"{c}\\{c}\n{c}"));
            assert_same_text(&format!("é{c}日本{c}😀{c}\u{7f}"));
        }
        assert_same_text("");
        assert_same_text("\u{0}\u{1f}\u{20}\u{21}\u{22}\u{5b}\u{5c}\u{5d}\u{7f}\u{80}/");
    }

    #[test]
    fn random_texts_escape_as_serde_json_escapes_them() {
        // Random strings over an alphabet heavy in bytes to escape and bytes next to them (0x1f,
        // 0x20, 0x21, 0x5b, 0x5d), with non-ASCII characters, of every length to 70.
        let alphabet: Vec<char> = "\"\\\n\r\t\u{0}\u{8}\u{c}\u{1f} !#[]abcé日😀\u{7f}"
            .chars()
            .collect();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 70) as usize;
            let mut pick = state;
            let text: String = (0..len)
                .map(|_| {
                    pick = pick.rotate_left(5).wrapping_mul(0x2545_f491_4f6c_dd1d);
                    alphabet[(pick >> 33) as usize % alphabet.len()]
                })
                .collect();
            assert_same_text(&text);
        }
    }

    #[test]
    fn numbers_write_as_serde_json_writes_them() {
        let floats = [
            0.0,
            -0.0,
            1.0,
            80.0,
            0.1,
            0.603_504_833_731_017,
            1e21,
            1e-7,
            123_456_789.125,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        assert_same_text(&floats);
        assert_same_text(&floats.map(|f| f as f32));
        assert_same_text(&[i64::MIN, -1, 0, 1, i64::MAX]);
        assert_same_text(&[u64::MAX, 0]);
        assert_same_text(&(i128::MIN, u128::MAX, -7i8, 255u8, -300i16, 65_535u16));
        assert_same_text(&(true, false, 'x', '"', '\n', (), None::<u8>, Some(3)));
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Newtype(u8),
        Tuple(u8, String),
        EmptyTuple(),
        Struct { a: Option<f64>, b: Vec<u8> },
        EmptyStruct {},
    }

    #[derive(Serialize)]
    struct Everything {
        unit: (),
        shapes: Vec<Shape>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        #[serde(with = "serde_bytes_like")]
        bytes: Vec<u8>,
        empty_seq: Vec<u8>,
        empty_map: BTreeMap<String, u8>,
        int_keys: BTreeMap<i32, &'static str>,
        bool_keys: BTreeMap<bool, u8>,
        char_keys: BTreeMap<char, u8>,
        nested: Vec<Vec<BTreeMap<String, Option<String>>>>,
        #[serde(flatten)]
        flattened: BTreeMap<String, u8>,
        raw: Box<serde_json::value::RawValue>,
        value: serde_json::Value,
    }

    /// `serialize_bytes`, which derive does not call for `Vec<u8>`.
    mod serde_bytes_like {
        pub fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(bytes)
        }
    }

    #[test]
    fn every_shape_writes_as_serde_json_writes_it() {
        let value = Everything {
            unit: (),
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(7),
                Shape::Tuple(1, "t\"".into()),
                Shape::EmptyTuple(),
                Shape::Struct {
                    a: Some(0.5),
                    b: vec![1, 2],
                },
                Shape::Struct { a: None, b: vec![] },
                Shape::EmptyStruct {},
            ],
            skipped: None,
            bytes: vec![0, 10, 255],
            empty_seq: vec![],
            empty_map: BTreeMap::new(),
            int_keys: [(-1, "a"), (20, "b")].into(),
            bool_keys: [(true, 1), (false, 0)].into(),
            char_keys: [('"', 1), ('k', 2)].into(),
            nested: vec![vec![], vec![[("k\n".to_string(), None)].into()]],
            flattened: [("flat".to_string(), 1)].into(),
            raw: serde_json::value::RawValue::from_string(r#"{"a": [1, 2]}"#.into())
                .expect("raw JSON"),
            value: serde_json::json!({"x": [null, 1.5, -2, "y\u{1}"], "z": {}}),
        };
        assert_same_text(&value);
    }

    #[test]
    fn json_documents_of_the_shared_data_write_as_serde_json_writes_them() {
        // Every JSON line and file of the shared data (questions, gold SQL, predictions, labels,
        // schemas, reference verdicts), parsed into a value tree and written back by both.
        let documents = crate::shared_data::json_documents();
        assert!(documents.len() > 1_000, "{} documents", documents.len());
        for document in &documents {
            assert_same_text(document);
        }
    }

    #[test]
    fn non_string_keys_and_bad_raw_values_fail_as_in_serde_json() {
        let map: BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into();
        assert_eq!(to_string(&map), Err(JsonTextError::KeyMustBeAString));
        assert!(serde_json::to_string(&map).is_err());
        let map: BTreeMap<String, u8> = BTreeMap::new();
        let float_keys: Vec<(f64, u8)> = vec![(f64::NAN, 1)];
        let as_map = FloatKeyMap(float_keys);
        assert_eq!(to_string(&as_map), Err(JsonTextError::FloatKeyMustBeFinite));
        assert!(serde_json::to_string(&as_map).is_err());
        assert_same_text(&FloatKeyMap(vec![(1.5, 1), (2.0, 2)]));
        assert_same_text(&map);
        // A raw value whose content is not a string.
        assert_eq!(to_string(&NotRawText), Err(JsonTextError::InvalidRawValue));
        assert!(serde_json::to_string(&NotRawText).is_err());
    }

    /// What a raw value serialises as, with a number where its text belongs.
    struct NotRawText;

    impl Serialize for NotRawText {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeStruct;
            let mut raw = s.serialize_struct(RAW_VALUE_TOKEN, 1)?;
            raw.serialize_field(RAW_VALUE_TOKEN, &1)?;
            raw.end()
        }
    }

    /// A map with float keys (no std map holds them).
    struct FloatKeyMap(Vec<(f64, u8)>);

    impl Serialize for FloatKeyMap {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(Some(self.0.len()))?;
            for (key, value) in &self.0 {
                map.serialize_entry(key, value)?;
            }
            map.end()
        }
    }
}
