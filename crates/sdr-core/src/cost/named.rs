//! The spec of a sentence cost that the registry knows by name
//! (`sdr_clinical::costs`, or one a user registered): `name` or
//! `name:key=value[,key=value]`. Only the syntax is checked here; the
//! registry checks the name and the values when it opens the cost.
//!
//! Held inline (at most [`NamedCost::MAX`] bytes) so that [`super::CostKind`]
//! and the option records that hold one stay `Copy`.

use std::fmt;

/// A registered cost's spec, e.g. `length:weight=0.5`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NamedCost {
    len: u8,
    bytes: [u8; NamedCost::MAX],
}

impl NamedCost {
    /// The longest spec held.
    pub const MAX: usize = 62;

    /// The spec, with the spaces around its parts removed.
    ///
    /// ```
    /// use sdr_core::cost::NamedCost;
    /// let c = NamedCost::parse(" length : weight = 0.5 ").unwrap();
    /// assert_eq!((c.as_str(), c.name()), ("length:weight=0.5", "length"));
    /// assert_eq!(c.params().collect::<Vec<_>>(), [("weight", "0.5")]);
    /// assert!(NamedCost::parse("Length").is_err());
    /// assert!(NamedCost::parse("length:weight").is_err());
    /// let twice = NamedCost::parse("length:weight=1,weight=2").unwrap_err();
    /// assert_eq!(twice, "parameter `weight` given twice");
    /// ```
    ///
    /// # Errors
    /// A name that is not lower-case letters, digits and `-`, a parameter
    /// that is not `key=value` or is given twice, or a spec longer than
    /// [`NamedCost::MAX`].
    pub fn parse(spec: &str) -> Result<NamedCost, String> {
        let s = spec.trim();
        let (name, params) = s.split_once(':').unwrap_or((s, ""));
        let name = name.trim();
        let word = |w: &str| {
            !w.is_empty()
                && w.starts_with(|c: char| c.is_ascii_lowercase())
                && w.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        };
        if !word(name) {
            return Err(format!(
                "unknown cost `{name}` (expected `cosine`, `clinical[:lambda=L,unmatched=U]`, \
                 `clinical:lambda=L,added=A,omitted=O` or a registered cost's name)"
            ));
        }
        let mut out = name.to_string();
        let mut seen: Vec<&str> = Vec::new();
        for (k, part) in params.split(',').map(str::trim).enumerate() {
            if part.is_empty() && params.trim().is_empty() {
                break;
            }
            let (key, value) = part
                .split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .filter(|(k, v)| word(k) && !v.is_empty() && !v.contains([':', '=']))
                .ok_or_else(|| format!("parameter `{part}` is not key=value"))?;
            if seen.contains(&key) {
                return Err(format!("parameter `{key}` given twice"));
            }
            seen.push(key);
            out.push(if k == 0 { ':' } else { ',' });
            out.push_str(key);
            out.push('=');
            out.push_str(value);
        }
        if out.len() > NamedCost::MAX {
            return Err(format!(
                "a cost spec is at most {} bytes, this one has {}",
                NamedCost::MAX,
                out.len()
            ));
        }
        let mut bytes = [0u8; NamedCost::MAX];
        bytes[..out.len()].copy_from_slice(out.as_bytes());
        Ok(NamedCost {
            len: out.len() as u8,
            bytes,
        })
    }

    /// The spec.
    pub fn as_str(&self) -> &str {
        // Built from a `&str` cut at char boundaries: always UTF-8.
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or_default()
    }

    /// The cost's name (the part before `:`).
    pub fn name(&self) -> &str {
        let s = self.as_str();
        s.split_once(':').map_or(s, |(n, _)| n)
    }

    /// The `key=value` parameters, in the order written.
    pub fn params(&self) -> impl Iterator<Item = (&str, &str)> {
        self.as_str()
            .split_once(':')
            .map(|(_, p)| p)
            .unwrap_or("")
            .split(',')
            .filter_map(|kv| kv.split_once('='))
    }
}

impl fmt::Display for NamedCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for NamedCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NamedCost({:?})", self.as_str())
    }
}
