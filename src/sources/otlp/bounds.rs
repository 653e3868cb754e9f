//! What an OTLP trace request holds, counted before it is decoded: its spans and attributes.
//!
//! A body's bytes do not bound what decoding it costs: a span with no fields is two bytes of
//! protobuf and a few hundred once decoded, so a 2 MB request of a million empty spans (2 KB
//! gzipped) took ~500 MB to decode. These counts walk the wire format without building anything
//! (protobuf: tags and lengths; JSON: serde's visitor over borrowed input, nothing kept), so a
//! request over [`RequestBounds`] is refused for what it would cost, before it costs it.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The most a request may hold (`[source.otlp] max_spans_per_request`,
/// `max_attributes_per_request`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBounds {
    /// Spans in one request.
    pub spans: usize,
    /// Attributes in one request: the resources', scopes', spans', events' and links'.
    pub attributes: usize,
}

impl RequestBounds {
    /// The bounds `[source.otlp]` sets.
    pub fn of(config: &crate::sources::config::OtlpConfig) -> RequestBounds {
        RequestBounds {
            spans: config.max_spans_per_request,
            attributes: config.max_attributes_per_request,
        }
    }
}

/// What a request holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Spans.
    pub spans: usize,
    /// Attributes (resource, scope, span, event and link attributes together).
    pub attributes: usize,
}

impl Tally {
    /// Why the request is over `bounds`, if it is.
    pub fn over(&self, bounds: RequestBounds) -> Option<String> {
        if self.spans > bounds.spans {
            return Some(format!(
                "the request holds more than {} spans (max_spans_per_request); send smaller batches",
                bounds.spans
            ));
        }
        if self.attributes > bounds.attributes {
            return Some(format!(
                "the request holds more than {} attributes (max_attributes_per_request); send smaller batches",
                bounds.attributes
            ));
        }
        None
    }
}

/// Why a request was not decoded.
#[derive(Debug)]
pub enum Refused {
    /// It holds more than the bounds allow (the message says which and how much).
    OverBounds(String),
    /// It is not a well-formed request.
    Malformed(super::decode::DecodeError),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::OverBounds(why) => f.write_str(why),
            Refused::Malformed(error) => match std::error::Error::source(error) {
                Some(source) => write!(f, "{error}: {source}"),
                None => write!(f, "{error}"),
            },
        }
    }
}

/// Decode a request (protobuf, or JSON when `json`) once its counts are within `bounds`.
pub fn decode_within(
    body: &[u8],
    json: bool,
    bounds: RequestBounds,
) -> Result<super::decode::Decoded, Refused> {
    let tally = if json {
        count_json(body)
    } else {
        Some(count_protobuf(body, bounds))
    };
    if let Some(why) = tally.and_then(|t| t.over(bounds)) {
        return Err(Refused::OverBounds(why));
    }
    let decoded = if json {
        super::decode::decode_json(body)
    } else {
        super::decode::decode_protobuf(body)
    };
    decoded.map_err(Refused::Malformed)
}

/// Count the spans and attributes of a protobuf `ExportTraceServiceRequest`, stopping as soon
/// as either passes `bounds` (the counts then say by how much at least). Malformed input counts
/// what it could; the decoder reports the error.
pub fn count_protobuf(body: &[u8], bounds: RequestBounds) -> Tally {
    let mut tally = Tally::default();
    // ExportTraceServiceRequest: resource_spans = 1.
    for_each_field(body, |field, value| {
        if field == 1 {
            resource_spans(value, &mut tally);
        }
        tally.over(bounds).is_none()
    });
    tally
}

/// ResourceSpans: resource = 1 (Resource: attributes = 1), scope_spans = 2.
fn resource_spans(message: &[u8], tally: &mut Tally) {
    for_each_field(message, |field, value| {
        match field {
            1 => count_repeated(value, 1, tally),
            2 => scope_spans(value, tally),
            _ => {}
        }
        true
    });
}

/// ScopeSpans: scope = 1 (InstrumentationScope: attributes = 3), spans = 2.
fn scope_spans(message: &[u8], tally: &mut Tally) {
    for_each_field(message, |field, value| {
        match field {
            1 => count_repeated(value, 3, tally),
            2 => {
                tally.spans += 1;
                span(value, tally);
            }
            _ => {}
        }
        true
    });
}

/// Span: attributes = 9, events = 11 (Event: attributes = 3), links = 13 (Link: attributes = 4).
fn span(message: &[u8], tally: &mut Tally) {
    for_each_field(message, |field, value| {
        match field {
            9 => tally.attributes += 1,
            11 => count_repeated(value, 3, tally),
            13 => count_repeated(value, 4, tally),
            _ => {}
        }
        true
    });
}

/// Add the occurrences of length-delimited field `attributes` in `message` to the attributes.
fn count_repeated(message: &[u8], attributes: u32, tally: &mut Tally) {
    for_each_field(message, |field, _| {
        if field == attributes {
            tally.attributes += 1;
        }
        true
    });
}

/// Call `each(field number, bytes)` for every length-delimited field of `message` (other wire
/// types are skipped) until it returns false or the input ends or is malformed.
fn for_each_field(mut message: &[u8], mut each: impl FnMut(u32, &[u8]) -> bool) {
    while !message.is_empty() {
        let Some(key) = varint(&mut message) else {
            return;
        };
        let field = u32::try_from(key >> 3).unwrap_or(0);
        match key & 7 {
            0 => {
                if varint(&mut message).is_none() {
                    return;
                }
            }
            1 => match message.get(8..) {
                Some(rest) => message = rest,
                None => return,
            },
            5 => match message.get(4..) {
                Some(rest) => message = rest,
                None => return,
            },
            2 => {
                let Some(length) = varint(&mut message).and_then(|l| usize::try_from(l).ok())
                else {
                    return;
                };
                let (Some(value), Some(rest)) = (message.get(..length), message.get(length..))
                else {
                    return;
                };
                if !each(field, value) {
                    return;
                }
                message = rest;
            }
            // Groups (3, 4) are not in OTLP; anything else is malformed.
            _ => return,
        }
    }
}

/// Read one varint off the front of `input`.
fn varint(input: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, byte) in input.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *input = input.get(i + 1..)?;
            return Some(value);
        }
    }
    None
}

/// Count the spans and attributes of an OTLP/JSON request (`resourceSpans` or
/// `resource_spans`: every element of an array under the key `spans` is a span, of one under
/// `attributes` an attribute), holding nothing of it. `None` when it is not JSON (the decoder
/// reports why).
pub fn count_json(body: &[u8]) -> Option<Tally> {
    let mut tally = Tally::default();
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    Walk {
        tally: &mut tally,
        counts: None,
    }
    .deserialize(&mut deserializer)
    .ok()?;
    Some(tally)
}

/// Which count an array's elements go to.
#[derive(Clone, Copy)]
enum Counts {
    Spans,
    Attributes,
}

/// Walks any JSON value, counting the elements of the arrays it is told to.
struct Walk<'a> {
    tally: &'a mut Tally,
    /// Set for the value of a `spans` or `attributes` key.
    counts: Option<Counts>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let counts = self.counts;
        loop {
            let element = Walk {
                tally: &mut *self.tally,
                counts: None,
            };
            if seq.next_element_seed(element)?.is_none() {
                return Ok(());
            }
            match counts {
                Some(Counts::Spans) => self.tally.spans += 1,
                Some(Counts::Attributes) => self.tally.attributes += 1,
                None => {}
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let counts = match &*key {
                "spans" => Some(Counts::Spans),
                "attributes" => Some(Counts::Attributes),
                _ => None,
            };
            map.next_value_seed(Walk {
                tally: &mut *self.tally,
                counts,
            })?;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    use opentelemetry_proto::tonic::collector::trace::v1 as collector;
    use opentelemetry_proto::tonic::common::v1 as common;
    use opentelemetry_proto::tonic::resource::v1 as resource;
    use opentelemetry_proto::tonic::trace::v1 as trace;

    /// The generated types under one name.
    mod pb {
        pub use super::collector::ExportTraceServiceRequest;
        pub use super::common::{InstrumentationScope, KeyValue};
        pub use super::resource::Resource;
        pub use super::trace::{ResourceSpans, ScopeSpans, Span, span};
    }

    const BOUNDS: RequestBounds = RequestBounds {
        spans: usize::MAX,
        attributes: usize::MAX,
    };

    fn attribute(key: &str) -> pb::KeyValue {
        pb::KeyValue {
            key: key.into(),
            value: None,
        }
    }

    #[test]
    fn protobuf_and_json_counts_agree_with_the_request() {
        let span = pb::Span {
            name: "SELECT".into(),
            attributes: vec![attribute("db.query.text"), attribute("db.system.name")],
            events: vec![pb::span::Event {
                attributes: vec![attribute("e")],
                ..Default::default()
            }],
            links: vec![pb::span::Link {
                attributes: vec![attribute("l")],
                ..Default::default()
            }],
            ..Default::default()
        };
        let request = pb::ExportTraceServiceRequest {
            resource_spans: vec![pb::ResourceSpans {
                resource: Some(pb::Resource {
                    attributes: vec![attribute("service.name")],
                    ..Default::default()
                }),
                scope_spans: vec![pb::ScopeSpans {
                    scope: Some(pb::InstrumentationScope {
                        attributes: vec![attribute("s")],
                        ..Default::default()
                    }),
                    spans: vec![span.clone(), span.clone(), pb::Span::default()],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let want = Tally {
            spans: 3,
            attributes: 1 + 1 + 2 * 4,
        };
        assert_eq!(count_protobuf(&request.encode_to_vec(), BOUNDS), want);
        let json = br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name"}]},
            "scopeSpans":[{"scope":{"attributes":[{"key":"s"}]},"spans":[
              {"name":"a","attributes":[{"key":"x","value":{"stringValue":"spans"}},{"key":"y"}],
               "events":[{"attributes":[{"key":"e"}]}],"links":[{"attributes":[{"key":"l"}]}]},
              {"attributes":[{"key":"x"},{"key":"y"}],"events":[{"attributes":[{"key":"e"}]}],
               "links":[{"attributes":[{"key":"l"}]}]},
              {}]}]}]}"#;
        assert_eq!(count_json(json), Some(want));
        assert_eq!(count_json(b"not json"), None);
    }

    #[test]
    fn a_million_empty_spans_are_counted_without_decoding_and_stop_at_the_bound() {
        // ScopeSpans.spans = field 2, length 0: two bytes per span.
        let mut scope = Vec::new();
        for _ in 0..1_000_000 {
            scope.extend_from_slice(&[0x12, 0x00]);
        }
        let mut resource = vec![0x12];
        encode_varint(scope.len() as u64, &mut resource);
        resource.extend_from_slice(&scope);
        let mut body = vec![0x0a];
        encode_varint(resource.len() as u64, &mut body);
        body.extend_from_slice(&resource);
        assert_eq!(count_protobuf(&body, BOUNDS).spans, 1_000_000);
        let bounds = RequestBounds {
            spans: 20_000,
            attributes: 400_000,
        };
        let tally = count_protobuf(&body, bounds);
        assert!(tally.over(bounds).is_some(), "{tally:?}");
        // Malformed input: no panic, whatever could be counted.
        let _ = count_protobuf(&body[..body.len() / 2], BOUNDS);
        let _ = count_protobuf(&[0xff; 32], BOUNDS);
        let json = format!(
            "{{\"resourceSpans\":[{{\"scopeSpans\":[{{\"spans\":[{}{{}}]}}]}}]}}",
            "{},".repeat(999_999)
        );
        assert_eq!(count_json(json.as_bytes()).unwrap().spans, 1_000_000);
    }

    fn encode_varint(mut value: u64, out: &mut Vec<u8>) {
        while value >= 0x80 {
            out.push((value as u8) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }
}
