//! Attribute values and the attributes a decision is built from, shared by
//! the general reader ([`super::general`]) and the fast path
//! ([`super::fast`]): both feed the same [`SpanAttrs`] and [`ResourceIds`],
//! so a span read by either gives the same decision.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::{
    ATTR_CANDIDATES, ATTR_DECISION, ATTR_MODEL, ATTR_PENALTY, ATTR_PROFILE, ATTR_REQUEST_ID,
    ATTR_STICKY, ATTR_THRESHOLD,
};

/// A number written as a JSON number or a string (`"123"`, `"NaN"`,
/// `"Infinity"`, `"-Infinity"`), as protobuf's JSON mapping does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Num {
    U(u64),
    F(f64),
}

impl Num {
    pub(super) fn f64(self) -> f64 {
        match self {
            Num::U(u) => u as f64,
            Num::F(f) => f,
        }
    }
}

/// The number a JSON string stands for, as protobuf's JSON mapping writes
/// 64-bit integers and non-finite doubles.
pub(super) fn num_of_str(s: &str) -> Option<Num> {
    if let Ok(u) = s.parse::<u64>() {
        return Some(Num::U(u));
    }
    match s {
        "NaN" => Some(Num::F(f64::NAN)),
        "Infinity" | "+Infinity" => Some(Num::F(f64::INFINITY)),
        "-Infinity" => Some(Num::F(f64::NEG_INFINITY)),
        _ => s.parse::<f64>().ok().map(Num::F),
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number or a numeric string")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num::U(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num::F(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num::F(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                num_of_str(v).ok_or_else(|| E::custom(format!("not a number: {v:?}")))
            }
        }
        d.deserialize_any(V)
    }
}

/// Epoch seconds of a time in ns since the epoch.
pub(super) fn ns_to_secs(n: Num) -> f64 {
    match n {
        Num::U(u) => (u / 1_000_000_000) as f64 + (u % 1_000_000_000) as f64 / 1e9,
        Num::F(f) => f / 1e9,
    }
}

/// A count attribute as a `u32`, when it is one.
pub(super) fn count_u32(v: f64) -> Option<u32> {
    (v.is_finite() && v >= 0.0 && v <= f64::from(u32::MAX)).then_some(v as u32)
}

/// A scalar attribute value, OTLP or Jaeger.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Scalar<'a> {
    Str(Cow<'a, str>),
    Num(Num),
    Bool(bool),
    Other,
}

impl<'a> Scalar<'a> {
    /// The value of an OTLP `AnyValue` with these members: the string if
    /// any, else the integer, else the double, else the boolean.
    pub(super) fn of_any_value(
        string: Option<Cow<'a, str>>,
        int: Option<Num>,
        double: Option<Num>,
        boolean: Option<bool>,
    ) -> Scalar<'a> {
        if let Some(s) = string {
            Scalar::Str(s)
        } else if let Some(n) = int.or(double) {
            Scalar::Num(n)
        } else if let Some(b) = boolean {
            Scalar::Bool(b)
        } else {
            Scalar::Other
        }
    }

    pub(super) fn as_f64(&self) -> Option<f64> {
        match self {
            Scalar::Num(n) => Some(n.f64()),
            Scalar::Str(s) => num_of_str(s).map(Num::f64),
            _ => None,
        }
    }

    /// The value as text (numbers and booleans printed), borrowed when it
    /// is a string.
    pub(super) fn into_cow(self) -> Option<Cow<'a, str>> {
        match self {
            Scalar::Str(s) => Some(s),
            Scalar::Num(Num::U(u)) => Some(Cow::Owned(u.to_string())),
            Scalar::Num(Num::F(f)) => Some(Cow::Owned(f.to_string())),
            Scalar::Bool(b) => Some(Cow::Owned(b.to_string())),
            Scalar::Other => None,
        }
    }

    pub(super) fn into_string(self) -> Option<String> {
        self.into_cow().map(Cow::into_owned)
    }
}

/// The attributes of a span that a decision or a profile is read from, the
/// last value of each key (as a list read in order would leave them).
#[derive(Debug, Default)]
pub(super) struct SpanAttrs<'a> {
    pub(super) decision: Option<Scalar<'a>>,
    pub(super) penalty: Option<Scalar<'a>>,
    pub(super) sticky: Option<Scalar<'a>>,
    pub(super) candidates: Option<Scalar<'a>>,
    pub(super) threshold: Option<Scalar<'a>>,
    pub(super) request_id: Option<Scalar<'a>>,
    pub(super) model: Option<Scalar<'a>>,
    pub(super) profile: Option<Scalar<'a>>,
}

impl<'a> SpanAttrs<'a> {
    /// Takes one attribute; keys read by no decision are dropped.
    pub(super) fn set(&mut self, key: &str, v: Scalar<'a>) {
        let slot = match key {
            ATTR_DECISION => &mut self.decision,
            ATTR_PENALTY => &mut self.penalty,
            ATTR_STICKY => &mut self.sticky,
            ATTR_CANDIDATES => &mut self.candidates,
            ATTR_THRESHOLD => &mut self.threshold,
            ATTR_REQUEST_ID => &mut self.request_id,
            ATTR_MODEL => &mut self.model,
            ATTR_PROFILE => &mut self.profile,
            _ => return,
        };
        *slot = Some(v);
    }

    /// The profile name of a [`super::PROFILE_SPAN`].
    pub(super) fn profile(self) -> Option<Cow<'a, str>> {
        self.profile.and_then(Scalar::into_cow)
    }
}

/// The resource attributes that name a deployment.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct ResourceIds {
    pub(super) namespace: Option<String>,
    pub(super) deployment: Option<String>,
    pub(super) pod: Option<String>,
    pub(super) service: Option<String>,
}

impl ResourceIds {
    /// Takes one resource attribute; an empty value unsets its slot.
    pub(super) fn set(&mut self, key: &str, v: Scalar<'_>) {
        let slot = match key {
            "k8s.namespace.name" => &mut self.namespace,
            "k8s.deployment.name" => &mut self.deployment,
            "k8s.pod.name" => &mut self.pod,
            "service.name" => &mut self.service,
            _ => return,
        };
        *slot = v.into_string().filter(|s| !s.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(num_of_str("12"), Some(Num::U(12)));
        assert!(num_of_str("NaN").is_some_and(|n| n.f64().is_nan()));
        assert_eq!(num_of_str("-Infinity"), Some(Num::F(f64::NEG_INFINITY)));
        assert_eq!(num_of_str("1.5"), Some(Num::F(1.5)));
        assert_eq!(num_of_str("x"), None);
        assert_eq!(
            ns_to_secs(Num::U(1_764_482_019_250_000_000)),
            1_764_482_019.25
        );
    }

    #[test]
    fn last_value_of_a_key_wins() {
        let mut a = SpanAttrs::default();
        a.set(ATTR_PROFILE, Scalar::Str("decode".into()));
        a.set("other", Scalar::Bool(true));
        a.set(ATTR_PROFILE, Scalar::Num(Num::U(7)));
        assert_eq!(a.profile().as_deref(), Some("7"));
        let mut r = ResourceIds::default();
        r.set("k8s.pod.name", Scalar::Str("p".into()));
        r.set("k8s.pod.name", Scalar::Str("".into()));
        assert_eq!(r.pod, None);
    }
}
