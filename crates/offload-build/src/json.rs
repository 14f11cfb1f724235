//! Cargo's JSON (`cargo metadata`, `--message-format=json` messages), read with `tinyjson`.
//!
//! A build script reads cargo's JSON but never derives types from it, so a dependency-free
//! reader of JSON values serves: it compiles in a fraction of the time of `serde` and
//! `serde_json`, which every host crate's first build would otherwise pay for (see the prebuilt
//! bundles' cold build in BENCHMARKS.md).

use std::collections::HashMap;
use std::fmt;

pub use tinyjson::JsonValue;

/// Lookups on a [`JsonValue`] that give `None` where `tinyjson`'s indexing would panic: a
/// missing key, or a value of another kind.
pub trait JsonExt {
    /// The value of `key` in an object.
    fn get_key(&self, key: &str) -> Option<&JsonValue>;
    /// The value at `path`, one object key after another.
    fn at(&self, path: &[&str]) -> Option<&JsonValue>;
    /// A string's text.
    fn as_str(&self) -> Option<&str>;
    /// An array's items.
    fn as_array(&self) -> Option<&[JsonValue]>;
    /// A boolean's value.
    fn as_bool(&self) -> Option<bool>;
    /// The string at `path`.
    fn str_at(&self, path: &[&str]) -> Option<&str> {
        self.at(path)?.as_str()
    }
    /// The strings of the array at `path`; none when there is no array there.
    fn strs_at(&self, path: &[&str]) -> Vec<&str> {
        self.at(path)
            .and_then(JsonExt::as_array)
            .into_iter()
            .flatten()
            .filter_map(JsonExt::as_str)
            .collect()
    }
}

impl JsonExt for JsonValue {
    fn get_key(&self, key: &str) -> Option<&JsonValue> {
        match self {
            JsonValue::Object(map) => map.get(key),
            _ => None,
        }
    }

    fn at(&self, path: &[&str]) -> Option<&JsonValue> {
        path.iter().try_fold(self, |v, key| v.get_key(key))
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            JsonValue::String(s) => Some(s),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<&[JsonValue]> {
        match self {
            JsonValue::Array(items) => Some(items),
            _ => None,
        }
    }

    fn as_bool(&self) -> Option<bool> {
        match self {
            JsonValue::Boolean(b) => Some(*b),
            _ => None,
        }
    }
}

/// Parses one JSON text.
pub fn parse(text: &str) -> Result<JsonValue, tinyjson::JsonParseError> {
    text.parse()
}

/// One of cargo's `--message-format=json` messages (a line of its output).
#[derive(Debug, Clone, PartialEq)]
pub struct CargoMessage(JsonValue);

impl CargoMessage {
    /// The message on `line`, if it is a JSON object.
    pub fn parse(line: &str) -> Option<CargoMessage> {
        match parse(line) {
            Ok(value @ JsonValue::Object(_)) => Some(CargoMessage(value)),
            _ => None,
        }
    }

    /// Its `reason`: `compiler-message`, `compiler-artifact`, `build-script-executed`, ….
    pub fn reason(&self) -> Option<&str> {
        self.0.str_at(&["reason"])
    }

    /// Whether its `reason` is `reason`.
    pub fn is(&self, reason: &str) -> bool {
        self.reason() == Some(reason)
    }

    /// The message as JSON.
    pub fn json(&self) -> &JsonValue {
        &self.0
    }

    /// Removes `key` from the message.
    pub fn remove(&mut self, key: &str) {
        if let JsonValue::Object(map) = &mut self.0 {
            map.remove(key);
        }
    }

    /// Sets `key` of the message to `value`.
    pub fn insert(&mut self, key: &str, value: JsonValue) {
        if let JsonValue::Object(map) = &mut self.0 {
            map.insert(key.to_owned(), value);
        }
    }

    /// The object under `key`, to change in place.
    pub fn object_mut(&mut self, key: &str) -> Option<&mut HashMap<String, JsonValue>> {
        match &mut self.0 {
            JsonValue::Object(map) => match map.get_mut(key) {
                Some(JsonValue::Object(inner)) => Some(inner),
                _ => None,
            },
            _ => None,
        }
    }
}

impl fmt::Display for CargoMessage {
    /// One line of JSON, as cargo writes its messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A parsed message holds no infinite or NaN number, the only values tinyjson refuses.
        f.write_str(&self.0.stringify().map_err(|_| fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_give_none_where_indexing_would_panic() {
        let v = parse(r#"{"a": {"b": ["x", true, 3]}, "s": "t"}"#).unwrap();
        assert_eq!(v.str_at(&["s"]), Some("t"));
        let items = v.at(&["a", "b"]).and_then(JsonExt::as_array).unwrap();
        assert_eq!(items[0].as_str(), Some("x"));
        assert_eq!(items[1].as_bool(), Some(true));
        assert_eq!(items[2].as_str(), None);
        assert_eq!(v.at(&["a", "missing"]), None);
        assert_eq!(v.at(&["s", "deeper"]), None);
        assert_eq!(v.str_at(&["a"]), None);
        assert_eq!(v.strs_at(&["a", "b"]), ["x"]);
        assert!(v.strs_at(&["s"]).is_empty());
    }

    #[test]
    fn a_message_keeps_what_it_was_given_through_a_round_trip() {
        let line = r#"{"reason":"compiler-message","message":{"rendered":"w\n\u001b[0m","spans":[{"line_start":10}]}}"#;
        let mut message = CargoMessage::parse(line).unwrap();
        assert!(message.is("compiler-message"));
        message.insert(
            "offload_archs",
            JsonValue::from(vec![JsonValue::from("sm_80".to_owned())]),
        );
        let again = CargoMessage::parse(&message.to_string()).unwrap();
        assert_eq!(again, message);
        assert!(
            message.to_string().contains(r#""line_start":10"#),
            "{message}"
        );
        assert_eq!(CargoMessage::parse("[1]"), None);
        assert_eq!(CargoMessage::parse("Compiling x"), None);
    }
}
