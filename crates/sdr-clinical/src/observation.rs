//! The 14 CheXpert observations and a report's labels over them.

use std::fmt;
use std::ops::{Index, IndexMut};

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One of the 14 CheXpert observations (Irvin et al., AAAI 2019), in
/// CheXpert's column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Observation {
    /// "No Finding", set from the others: see [`Labels::no_finding_from_others`].
    NoFinding,
    /// "Enlarged Cardiomediastinum".
    EnlargedCardiomediastinum,
    /// "Cardiomegaly".
    Cardiomegaly,
    /// "Lung Lesion".
    LungLesion,
    /// "Lung Opacity".
    LungOpacity,
    /// "Edema".
    Edema,
    /// "Consolidation".
    Consolidation,
    /// "Pneumonia".
    Pneumonia,
    /// "Atelectasis".
    Atelectasis,
    /// "Pneumothorax".
    Pneumothorax,
    /// "Pleural Effusion".
    PleuralEffusion,
    /// "Pleural Other".
    PleuralOther,
    /// "Fracture".
    Fracture,
    /// "Support Devices" (they do not stop No Finding).
    SupportDevices,
}

impl Observation {
    /// All 14 in CheXpert's order; `Observation::ALL[o.index()] == o`.
    pub const ALL: [Observation; 14] = [
        Observation::NoFinding,
        Observation::EnlargedCardiomediastinum,
        Observation::Cardiomegaly,
        Observation::LungLesion,
        Observation::LungOpacity,
        Observation::Edema,
        Observation::Consolidation,
        Observation::Pneumonia,
        Observation::Atelectasis,
        Observation::Pneumothorax,
        Observation::PleuralEffusion,
        Observation::PleuralOther,
        Observation::Fracture,
        Observation::SupportDevices,
    ];

    /// The five observations of the common "CheXpert-5" F1 variant.
    pub const FIVE: [Observation; 5] = [
        Observation::Atelectasis,
        Observation::Cardiomegaly,
        Observation::Consolidation,
        Observation::Edema,
        Observation::PleuralEffusion,
    ];

    /// CheXpert's spelling, e.g. `"Pleural Effusion"`.
    pub fn name(self) -> &'static str {
        match self {
            Observation::NoFinding => "No Finding",
            Observation::EnlargedCardiomediastinum => "Enlarged Cardiomediastinum",
            Observation::Cardiomegaly => "Cardiomegaly",
            Observation::LungLesion => "Lung Lesion",
            Observation::LungOpacity => "Lung Opacity",
            Observation::Edema => "Edema",
            Observation::Consolidation => "Consolidation",
            Observation::Pneumonia => "Pneumonia",
            Observation::Atelectasis => "Atelectasis",
            Observation::Pneumothorax => "Pneumothorax",
            Observation::PleuralEffusion => "Pleural Effusion",
            Observation::PleuralOther => "Pleural Other",
            Observation::Fracture => "Fracture",
            Observation::SupportDevices => "Support Devices",
        }
    }

    /// The observation spelled `name` exactly (CheXpert's spelling).
    pub fn from_name(name: &str) -> Option<Observation> {
        Observation::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Position in [`Observation::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A mentioned observation's label. Not mentioned is `None` in [`Labels`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Label {
    /// `1`: present.
    Positive,
    /// `0`: mentioned as absent.
    Negative,
    /// `-1`: mentioned with uncertainty ("may represent", "cannot be excluded").
    Uncertain,
}

impl Label {
    /// CheXpert's code: 1, 0 or -1.
    pub fn code(self) -> i8 {
        match self {
            Label::Positive => 1,
            Label::Negative => 0,
            Label::Uncertain => -1,
        }
    }

    /// The label with CheXpert code `code`.
    pub fn from_code(code: i64) -> Option<Label> {
        match code {
            1 => Some(Label::Positive),
            0 => Some(Label::Negative),
            -1 => Some(Label::Uncertain),
            _ => None,
        }
    }

    /// CheXpert's aggregation over several mentions of one observation:
    /// positive beats uncertain beats negative.
    pub fn merge(a: Option<Label>, b: Label) -> Label {
        fn rank(l: Label) -> u8 {
            match l {
                Label::Negative => 0,
                Label::Uncertain => 1,
                Label::Positive => 2,
            }
        }
        match a {
            Some(a) if rank(a) >= rank(b) => a,
            _ => b,
        }
    }
}

/// A report's labels: one `Option<Label>` per observation, indexed by
/// [`Observation`] (`None` = not mentioned).
///
/// Serialises as a JSON object with all 14 names in CheXpert's order and
/// values `1`, `0`, `-1` or `null`:
/// `{"No Finding": 1, "Enlarged Cardiomediastinum": null, ...}`.
/// Deserialising accepts any subset of the names (missing ones are `null`)
/// and rejects unknown names and other values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Labels(pub [Option<Label>; 14]);

impl Labels {
    /// Whether `o` counts as present: positive, or uncertain when
    /// `uncertain_as_positive`.
    pub fn is_positive(&self, o: Observation, uncertain_as_positive: bool) -> bool {
        match self[o] {
            Some(Label::Positive) => true,
            Some(Label::Uncertain) => uncertain_as_positive,
            _ => false,
        }
    }

    /// Sets `No Finding` by CheXpert's rule: `1` when no other observation
    /// except Support Devices is positive or uncertain, otherwise not
    /// mentioned (CheXpert never writes 0 for No Finding).
    pub fn no_finding_from_others(&mut self) {
        let finding = Observation::ALL.iter().any(|&o| {
            !matches!(o, Observation::NoFinding | Observation::SupportDevices)
                && matches!(self[o], Some(Label::Positive | Label::Uncertain))
        });
        self[Observation::NoFinding] = (!finding).then_some(Label::Positive);
    }

    /// `(observation, label)` for all 14, in CheXpert's order.
    pub fn iter(&self) -> impl Iterator<Item = (Observation, Option<Label>)> + '_ {
        Observation::ALL.into_iter().map(move |o| (o, self[o]))
    }
}

impl Index<Observation> for Labels {
    type Output = Option<Label>;
    fn index(&self, o: Observation) -> &Option<Label> {
        &self.0[o.index()]
    }
}

impl IndexMut<Observation> for Labels {
    fn index_mut(&mut self, o: Observation) -> &mut Option<Label> {
        &mut self.0[o.index()]
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(14))?;
        for (o, l) in self.iter() {
            map.serialize_entry(o.name(), &l.map(Label::code))?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Labels;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object from CheXpert observation names to 1, 0, -1 or null")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Labels, A::Error> {
                let mut labels = Labels::default();
                while let Some(name) = map.next_key::<String>()? {
                    let o = Observation::from_name(&name).ok_or_else(|| {
                        de::Error::custom(format!("unknown observation `{name}`"))
                    })?;
                    let v: Option<i64> = map.next_value()?;
                    labels[o] = match v {
                        None => None,
                        Some(c) => Some(Label::from_code(c).ok_or_else(|| {
                            de::Error::custom(format!("`{name}`: {c} is not 1, 0, -1 or null"))
                        })?),
                    };
                }
                Ok(labels)
            }
        }
        deserializer.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_order() {
        for (i, o) in Observation::ALL.into_iter().enumerate() {
            assert_eq!(o.index(), i);
            assert_eq!(Observation::from_name(o.name()), Some(o));
        }
        assert_eq!(Observation::from_name("pleural effusion"), None);
    }

    #[test]
    fn merge_prefers_positive_then_uncertain() {
        use Label::*;
        assert_eq!(Label::merge(None, Negative), Negative);
        assert_eq!(Label::merge(Some(Negative), Uncertain), Uncertain);
        assert_eq!(Label::merge(Some(Uncertain), Negative), Uncertain);
        assert_eq!(Label::merge(Some(Uncertain), Positive), Positive);
        assert_eq!(Label::merge(Some(Positive), Negative), Positive);
    }

    #[test]
    fn no_finding_ignores_support_devices_and_negatives() {
        let mut l = Labels::default();
        l[Observation::SupportDevices] = Some(Label::Positive);
        l[Observation::Pneumothorax] = Some(Label::Negative);
        l.no_finding_from_others();
        assert_eq!(l[Observation::NoFinding], Some(Label::Positive));
        l[Observation::Edema] = Some(Label::Uncertain);
        l.no_finding_from_others();
        assert_eq!(l[Observation::NoFinding], None);
    }

    #[test]
    fn serde_object_in_order() {
        let mut l = Labels::default();
        l[Observation::Cardiomegaly] = Some(Label::Positive);
        l[Observation::Edema] = Some(Label::Uncertain);
        l[Observation::Pneumothorax] = Some(Label::Negative);
        let json = serde_json::to_string(&l).unwrap();
        assert!(json.starts_with(
            r#"{"No Finding":null,"Enlarged Cardiomediastinum":null,"Cardiomegaly":1,"#
        ));
        assert!(json.contains(r#""Edema":-1"#) && json.contains(r#""Pneumothorax":0"#));
        assert_eq!(serde_json::from_str::<Labels>(&json).unwrap(), l);
        let partial: Labels = serde_json::from_str(r#"{"Edema": -1}"#).unwrap();
        assert_eq!(partial[Observation::Edema], Some(Label::Uncertain));
        assert!(serde_json::from_str::<Labels>(r#"{"Edemas": 1}"#).is_err());
        assert!(serde_json::from_str::<Labels>(r#"{"Edema": 2}"#).is_err());
    }
}
