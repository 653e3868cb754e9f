//! OTLP trace requests → [`Span`]s: the protobuf encoding (`application/x-protobuf`, the
//! generated `ExportTraceServiceRequest`) and the JSON encoding (`application/json`: lower
//! camel case keys — snake case accepted too —, hex trace and span ids, 64-bit integers as
//! strings or numbers, enums as integers), per the OTLP specification. A span whose ids are
//! malformed is rejected and counted (the response's partial success names them); nothing
//! else in a well-formed request is refused.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;
use serde_json::Value;

use crate::spans::{AttrValue, Attributes, Span, SpanEvent, StatusCode};

/// The spans of one request, and the spans it rejected.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Well-formed spans.
    pub spans: Vec<Span>,
    /// How many spans were rejected.
    pub rejected: usize,
    /// Why (the first few), for the partial-success message.
    pub rejections: Vec<String>,
}

impl Decoded {
    fn reject(&mut self, why: String) {
        self.rejected += 1;
        if self.rejections.len() < 5 {
            self.rejections.push(why);
        }
    }

    fn push(&mut self, span: Span) {
        if span.trace_id.len() != 32 || span.trace_id.bytes().all(|b| b == b'0') {
            self.reject(format!(
                "span {:?}: trace id must be 16 non-zero bytes",
                span.name
            ));
        } else if span.span_id.len() != 16 || span.span_id.bytes().all(|b| b == b'0') {
            self.reject(format!(
                "span {:?}: span id must be 8 non-zero bytes",
                span.name
            ));
        } else {
            self.spans.push(span);
        }
    }
}

/// Why a request body is not a trace request.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not a protobuf `ExportTraceServiceRequest`.
    #[error("not an OTLP ExportTraceServiceRequest (protobuf)")]
    Protobuf(#[source] prost::DecodeError),
    /// Not JSON, or not the OTLP JSON shape.
    #[error("not an OTLP ExportTraceServiceRequest (JSON)")]
    Json(#[source] serde_json::Error),
    /// JSON of another shape.
    #[error("not an OTLP ExportTraceServiceRequest (JSON): {0}")]
    Shape(&'static str),
}

/// Decode a protobuf `ExportTraceServiceRequest`.
pub fn decode_protobuf(body: &[u8]) -> Result<Decoded, DecodeError> {
    let request = ExportTraceServiceRequest::decode(body).map_err(DecodeError::Protobuf)?;
    let mut out = Decoded::default();
    for resource_spans in request.resource_spans {
        let resource = Arc::new(
            resource_spans
                .resource
                .map(|r| attributes_of(&r.attributes))
                .unwrap_or_default(),
        );
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                let status = span.status.unwrap_or_default();
                out.push(Span {
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty())
                        .then(|| hex::encode(&span.parent_span_id)),
                    name: span.name,
                    start_unix_nano: span.start_time_unix_nano,
                    end_unix_nano: span.end_time_unix_nano,
                    attributes: attributes_of(&span.attributes),
                    status: status_code(i64::from(status.code)),
                    status_message: status.message,
                    events: span
                        .events
                        .into_iter()
                        .map(|e| SpanEvent {
                            attributes: attributes_of(&e.attributes),
                            name: e.name,
                        })
                        .collect(),
                    resource: Arc::clone(&resource),
                });
            }
        }
    }
    Ok(out)
}

fn status_code(code: i64) -> StatusCode {
    match code {
        1 => StatusCode::Ok,
        2 => StatusCode::Error,
        _ => StatusCode::Unset,
    }
}

fn attributes_of(kvs: &[KeyValue]) -> Attributes {
    kvs.iter()
        .map(|kv| (kv.key.clone(), any_value(kv.value.as_ref())))
        .collect()
}

fn any_value(value: Option<&AnyValue>) -> AttrValue {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => AttrValue::Str(s.clone()),
        Some(any_value::Value::IntValue(i)) => AttrValue::Int(*i),
        Some(any_value::Value::DoubleValue(d)) => AttrValue::Double(*d),
        Some(any_value::Value::BoolValue(b)) => AttrValue::Bool(*b),
        Some(any_value::Value::BytesValue(b)) => AttrValue::Other(hex::encode(b)),
        Some(any_value::Value::ArrayValue(a)) => AttrValue::Other(
            Value::Array(
                a.values
                    .iter()
                    .map(|v| Value::String(any_value(Some(v)).as_text()))
                    .collect(),
            )
            .to_string(),
        ),
        Some(any_value::Value::KvlistValue(kv)) => AttrValue::Other(
            Value::Object(
                kv.values
                    .iter()
                    .map(|kv| {
                        (
                            kv.key.clone(),
                            Value::String(any_value(kv.value.as_ref()).as_text()),
                        )
                    })
                    .collect(),
            )
            .to_string(),
        ),
        None => AttrValue::Other(String::new()),
    }
}

/// A field by its lower camel case name or its snake case name.
fn field<'a>(object: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    object.get(camel).or_else(|| object.get(snake))
}

fn array<'a>(object: &'a Value, camel: &str, snake: &str) -> &'a [Value] {
    field(object, camel, snake)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn text(object: &Value, camel: &str, snake: &str) -> String {
    field(object, camel, snake)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A 64-bit integer written as a number or a decimal string.
fn integer(value: Option<&Value>) -> Option<i64> {
    match value? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_u64().map(|u| u as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn unsigned(value: Option<&Value>) -> u64 {
    match value {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    }
}

fn json_any_value(value: Option<&Value>) -> AttrValue {
    let Some(value) = value else {
        return AttrValue::Other(String::new());
    };
    if let Some(s) = field(value, "stringValue", "string_value").and_then(Value::as_str) {
        return AttrValue::Str(s.to_string());
    }
    if let Some(i) = integer(field(value, "intValue", "int_value")) {
        return AttrValue::Int(i);
    }
    if let Some(d) = field(value, "doubleValue", "double_value").and_then(|v| match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }) {
        return AttrValue::Double(d);
    }
    if let Some(b) = field(value, "boolValue", "bool_value").and_then(Value::as_bool) {
        return AttrValue::Bool(b);
    }
    if let Some(a) = field(value, "arrayValue", "array_value") {
        let items: Vec<Value> = array(a, "values", "values")
            .iter()
            .map(|v| Value::String(json_any_value(Some(v)).as_text()))
            .collect();
        return AttrValue::Other(Value::Array(items).to_string());
    }
    AttrValue::Other(value.to_string())
}

fn json_attributes(object: &Value) -> Attributes {
    array(object, "attributes", "attributes")
        .iter()
        .filter_map(|kv| {
            let key = kv.get("key")?.as_str()?.to_string();
            Some((key, json_any_value(kv.get("value"))))
        })
        .collect()
}

/// Decode a JSON `ExportTraceServiceRequest`.
pub fn decode_json(body: &[u8]) -> Result<Decoded, DecodeError> {
    let request: Value = serde_json::from_slice(body).map_err(DecodeError::Json)?;
    if !request.is_object() {
        return Err(DecodeError::Shape("the body must be a JSON object"));
    }
    let mut out = Decoded::default();
    for resource_spans in array(&request, "resourceSpans", "resource_spans") {
        let resource = Arc::new(
            field(resource_spans, "resource", "resource")
                .map(json_attributes)
                .unwrap_or_default(),
        );
        for scope_spans in array(resource_spans, "scopeSpans", "scope_spans") {
            for span in array(scope_spans, "spans", "spans") {
                let status = field(span, "status", "status");
                let parent = text(span, "parentSpanId", "parent_span_id").to_ascii_lowercase();
                out.push(Span {
                    trace_id: text(span, "traceId", "trace_id").to_ascii_lowercase(),
                    span_id: text(span, "spanId", "span_id").to_ascii_lowercase(),
                    parent_span_id: (!parent.is_empty()).then_some(parent),
                    name: text(span, "name", "name"),
                    start_unix_nano: unsigned(field(
                        span,
                        "startTimeUnixNano",
                        "start_time_unix_nano",
                    )),
                    end_unix_nano: unsigned(field(span, "endTimeUnixNano", "end_time_unix_nano")),
                    attributes: json_attributes(span),
                    status: status_code(
                        status
                            .and_then(|s| integer(s.get("code")))
                            .unwrap_or_default(),
                    ),
                    status_message: status
                        .map(|s| text(s, "message", "message"))
                        .unwrap_or_default(),
                    events: array(span, "events", "events")
                        .iter()
                        .map(|e| SpanEvent {
                            name: text(e, "name", "name"),
                            attributes: json_attributes(e),
                        })
                        .collect(),
                    resource: Arc::clone(&resource),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status};

    fn kv(key: &str, value: any_value::Value) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
        }
    }

    #[test]
    fn protobuf_and_json_decode_to_the_same_spans() {
        let span = opentelemetry_proto::tonic::trace::v1::Span {
            trace_id: vec![0xab; 16],
            span_id: vec![0x01; 8],
            parent_span_id: vec![0x02; 8],
            name: "SELECT".into(),
            start_time_unix_nano: 1_000,
            end_time_unix_nano: 7_480_000,
            attributes: vec![
                kv(
                    "db.query.text",
                    any_value::Value::StringValue("SELECT 1".into()),
                ),
                kv("db.response.returned_rows", any_value::Value::IntValue(3)),
            ],
            status: Some(Status {
                message: "boom".into(),
                code: 2,
            }),
            ..Default::default()
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv(
                        "service.name",
                        any_value::Value::StringValue("agent".into()),
                    )],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans: vec![span],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let from_proto = decode_protobuf(&request.encode_to_vec()).unwrap();
        let json = serde_json::json!({"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
            "scopeSpans": [{"scope": {"name": "x"}, "spans": [{
                "traceId": "ABABABABABABABABABABABABABABABAB", "spanId": "0101010101010101",
                "parentSpanId": "0202020202020202", "name": "SELECT", "kind": 3,
                "startTimeUnixNano": "1000", "endTimeUnixNano": 7480000,
                "attributes": [
                    {"key": "db.query.text", "value": {"stringValue": "SELECT 1"}},
                    {"key": "db.response.returned_rows", "value": {"intValue": "3"}}],
                "status": {"code": 2, "message": "boom"}}]}]}]});
        let from_json = decode_json(json.to_string().as_bytes()).unwrap();
        assert_eq!(from_proto.spans, from_json.spans);
        assert_eq!(from_proto.spans.len(), 1);
        assert_eq!(from_proto.spans[0].status, StatusCode::Error);
        assert_eq!(from_proto.rejected, 0);
    }

    #[test]
    fn malformed_ids_are_rejected_and_garbage_is_an_error() {
        let json = serde_json::json!({"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": "abc", "spanId": "0101010101010101", "name": "short trace id"},
            {"traceId": "abababababababababababababababab", "spanId": "0000000000000000"}]}]}]});
        let decoded = decode_json(json.to_string().as_bytes()).unwrap();
        assert_eq!((decoded.spans.len(), decoded.rejected), (0, 2));
        assert!(decoded.rejections[0].contains("trace id"));
        assert!(decode_protobuf(b"\xff\xff\xff garbage").is_err());
        assert!(decode_json(b"[1,2]").is_err());
        assert!(decode_json(b"{not json").is_err());
        // An empty request is a valid one.
        assert!(decode_json(b"{}").unwrap().spans.is_empty());
    }
}
