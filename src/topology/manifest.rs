//! A manifest's documents and the two ways the readers take a value out of one: the pieces
//! `k8s.rs` (workloads) and `autoscaler.rs` (HPAs, ScaledObjects) share.

use serde_json::Value;

/// One YAML document of the stream and the line it starts on.
#[derive(Clone)]
pub(super) struct Doc {
    pub(super) value: Value,
    pub(super) line: usize,
    pub(super) text: String,
}

/// The string at a JSON pointer, when it is one.
pub(super) fn s<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    v.pointer(path).and_then(Value::as_str)
}

/// A scalar as text: a string as it is, null as nothing, a number or boolean as written.
pub(super) fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
