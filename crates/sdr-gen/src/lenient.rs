//! Fields of a candidates line as its readers take them: typed as
//! `sdr generate` writes them ([`crate::replay::GenRecord`]), yet accepting
//! what other writers put there (a numeric id, an unknown `finish`, a token
//! count that is not one), kept as written so that a reader can echo it back
//! or name it in an error. A leaf: it knows nothing of the records.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::End;

/// A field a record's writer types as `T` and its reader takes leniently:
/// [`Lenient::Typed`] where the JSON reads as `T`, else [`Lenient::Other`]
/// with the JSON as written. Written back as read. Reading fails only where
/// the line is not JSON at all (or the field is missing where required).
#[derive(Debug, Clone, PartialEq)]
pub enum Lenient<T> {
    Typed(T),
    Other(Value),
}

impl<T: DeserializeOwned> Lenient<T> {
    /// `v` as `T` where it reads as one, else as it is.
    pub fn from_value(v: Value) -> Self {
        match T::deserialize(&v) {
            Ok(t) => Lenient::Typed(t),
            Err(_) => Lenient::Other(v),
        }
    }
}

impl<T> Lenient<T> {
    /// The typed value, where the JSON was one.
    pub fn typed(&self) -> Option<&T> {
        match self {
            Lenient::Typed(t) => Some(t),
            Lenient::Other(_) => None,
        }
    }
}

impl<T> From<T> for Lenient<T> {
    fn from(t: T) -> Self {
        Lenient::Typed(t)
    }
}

impl<T: Serialize> Serialize for Lenient<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Lenient::Typed(t) => t.serialize(s),
            Lenient::Other(v) => v.serialize(s),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Lenient::from_value)
    }
}

/// A study id as a line holds it: a string (as `sdr generate` writes it) or
/// any other JSON value (a number, `null`, ...), echoed back as written.
pub type StudyId = Lenient<String>;

impl Lenient<String> {
    /// The id as text: a string as it is, anything else as JSON (`7`, `null`).
    pub fn text(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Lenient<String> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lenient::Typed(s) => f.write_str(s),
            Lenient::Other(v) => write!(f, "{v}"),
        }
    }
}

/// How a candidate ended, as a line holds it: an [`End`] (or `null`) as
/// `sdr generate` writes it, or any other value, which says nothing but
/// an `{"error": ...}` among it ([`Lenient::error`]).
pub type Finish = Lenient<Option<End>>;

impl Lenient<Option<End>> {
    /// The message of a candidate that failed in generation: any object with
    /// an `"error"` (a message that is not a string as JSON).
    pub fn error(&self) -> Option<String> {
        match self {
            Lenient::Typed(Some(End::Error(m))) => Some(m.clone()),
            Lenient::Typed(_) => None,
            Lenient::Other(v) => {
                let e = v.get("error")?;
                Some(e.as_str().map_or_else(|| e.to_string(), str::to_string))
            }
        }
    }
}

/// A token count as a line holds it: checked where it is used
/// ([`Lenient::count`]), so that a bad one's error names its field.
pub type TokenCount = Lenient<usize>;

impl Lenient<usize> {
    /// The count; anything but a non-negative integer is an error naming `field`.
    pub fn count(&self, field: &str) -> Result<usize, String> {
        match self {
            Lenient::Typed(n) => Ok(*n),
            Lenient::Other(v) => Err(not_a_count(v, field)),
        }
    }
}

/// The error of a token count `t` under `field` that is not one.
pub(crate) fn not_a_count(t: &Value, field: &str) -> String {
    format!("\"{field}\" must be a non-negative integer, got {t}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read<T: DeserializeOwned>(line: &str) -> T {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn ids_keep_what_was_written() {
        for line in [
            r#""10""#,
            "7",
            "1.5",
            "null",
            "-3",
            r#"{"a":[1,"x"]}"#,
            "true",
        ] {
            let id: StudyId = read(line);
            // Echoed back byte for byte.
            assert_eq!(serde_json::to_string(&id).unwrap(), line);
        }
        let s: StudyId = read(r#""10""#);
        assert_eq!(s, Lenient::Typed("10".to_string()));
        assert_eq!(s.text(), "10");
        let n: StudyId = read("7");
        assert_eq!(n, Lenient::Other(json!(7)));
        assert_eq!(n.text(), "7");
        assert_eq!(read::<StudyId>("null").text(), "null");
        assert_eq!(read::<StudyId>("1.5").to_string(), "1.5");
        // A string id with escapes is its text, written back as JSON.
        let e: StudyId = read(r#""a\"b""#);
        assert_eq!(e.text(), "a\"b");
        assert_eq!(serde_json::to_string(&e).unwrap(), r#""a\"b""#);
    }

    #[test]
    fn finish_takes_any_value_and_finds_errors() {
        let f: Vec<Finish> = read(
            r#"["stop", "length", "cancelled", null, "weird", 3, {"error": "idle timeout"},
                {"error": 5}, {"error": "x", "more": 1}, {"Error": "y"}, {"error": null}]"#,
        );
        assert_eq!(f[0], Lenient::Typed(Some(End::Stop)));
        assert_eq!(f[2], Lenient::Typed(Some(End::Cancelled)));
        assert_eq!(f[3], Lenient::Typed(None));
        assert_eq!(f[4], Lenient::Other(json!("weird")));
        assert_eq!(
            f[6],
            Lenient::Typed(Some(End::Error("idle timeout".into())))
        );
        let errors: Vec<Option<String>> = f.iter().map(Finish::error).collect();
        let want = [
            None,
            None,
            None,
            None,
            None,
            None,
            Some("idle timeout"),
            Some("5"),
            Some("x"),
            None,
            Some("null"),
        ];
        assert_eq!(errors, want.map(|w| w.map(String::from)));
        // Written back as read.
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!(["stop", "length", "cancelled", null, "weird", 3, {"error": "idle timeout"},
                {"error": 5}, {"error": "x", "more": 1}, {"Error": "y"}, {"error": null}])
        );
    }

    #[test]
    fn token_counts_are_checked_where_used() {
        let t: Vec<TokenCount> = read(r#"[3, 0, -1, 1.5, 1e30, "3", null, 3.0]"#);
        assert_eq!(t[0].count("tokens[0]"), Ok(3));
        assert_eq!(t[1].count("tokens[1]"), Ok(0));
        for (i, got) in [
            (2, "-1"),
            (3, "1.5"),
            (4, "1e+30"),
            (5, "\"3\""),
            (6, "null"),
            (7, "3.0"),
        ] {
            assert_eq!(
                t[i].count(&format!("tokens[{i}]")).unwrap_err(),
                format!("\"tokens[{i}]\" must be a non-negative integer, got {got}")
            );
        }
        // Raw counts are written back as read.
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"[3,0,-1,1.5,1e+30,"3",null,3.0]"#
        );
    }

    #[test]
    fn typed_values_write_as_their_type() {
        let id: StudyId = "s1".to_string().into();
        let f: Finish = Some(End::Error("boom".into())).into();
        let n: TokenCount = 12.into();
        assert_eq!(
            serde_json::to_string(&(id, f, n)).unwrap(),
            r#"["s1",{"error":"boom"},12]"#
        );
        assert_eq!(Lenient::<usize>::from_value(json!(4)).typed(), Some(&4));
        assert_eq!(Lenient::<usize>::from_value(json!(-4)).typed(), None);
    }
}
