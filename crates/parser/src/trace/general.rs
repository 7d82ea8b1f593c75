//! The general reader: any document shape the module reads (OTLP/JSON
//! lines, Tempo's and Jaeger's query responses, pretty-printed or not),
//! deserialised with serde into borrowed shapes. The fast path
//! ([`super::fast`]) is held to this reader.

use std::borrow::Cow;

use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::value::RawValue;

use super::values::{Num, ResourceIds, Scalar, SpanAttrs, ns_to_secs};
use super::{FILTER_SPAN, Filters, PROFILE_SPAN, SpanRef, TraceReader};

/// Jaeger's tag `value`: a JSON string, number or boolean.
struct JaegerValue<'a>(Scalar<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for JaegerValue<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<JaegerValue<'a>, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = JaegerValue<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a tag value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Str(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Str(Cow::Owned(v.to_string()))))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Num(Num::U(v))))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Num(Num::F(v as f64))))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Num(Num::F(v))))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Bool(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Other))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(JaegerValue(Scalar::Other))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {}
                Ok(JaegerValue(Scalar::Other))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Doc<'a> {
    #[serde(borrow, default, rename = "resourceSpans")]
    resource_spans: Option<Vec<ResourceSpans<'a>>>,
    #[serde(borrow, default)]
    batches: Option<Vec<ResourceSpans<'a>>>,
    #[serde(borrow, default)]
    trace: Option<Inner<'a>>,
    #[serde(borrow, default)]
    result: Option<Inner<'a>>,
    #[serde(borrow, default)]
    data: Option<Vec<JaegerTrace<'a>>>,
}

#[derive(Deserialize)]
struct Inner<'a> {
    #[serde(borrow, default, rename = "resourceSpans")]
    resource_spans: Option<Vec<ResourceSpans<'a>>>,
}

#[derive(Deserialize)]
struct ResourceSpans<'a> {
    #[serde(borrow, default)]
    resource: Option<Resource<'a>>,
    #[serde(borrow, default, rename = "scopeSpans")]
    scope_spans: Option<Vec<ScopeSpans<'a>>>,
    #[serde(borrow, default, rename = "instrumentationLibrarySpans")]
    library_spans: Option<Vec<ScopeSpans<'a>>>,
}

#[derive(Deserialize)]
struct Resource<'a> {
    #[serde(borrow, default)]
    attributes: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ScopeSpans<'a> {
    #[serde(borrow, default)]
    spans: Option<Vec<OtlpSpan<'a>>>,
}

#[derive(Deserialize)]
struct OtlpSpan<'a> {
    #[serde(borrow, default, rename = "spanId")]
    span_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "parentSpanId")]
    parent_span_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(default, rename = "startTimeUnixNano")]
    start_ns: Option<Num>,
    #[serde(borrow, default)]
    attributes: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct KeyValue<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    value: Option<AnyValue<'a>>,
}

#[derive(Deserialize)]
struct AnyValue<'a> {
    #[serde(borrow, default, rename = "stringValue")]
    string_value: Option<Cow<'a, str>>,
    #[serde(default, rename = "intValue")]
    int_value: Option<Num>,
    #[serde(default, rename = "doubleValue")]
    double_value: Option<Num>,
    #[serde(default, rename = "boolValue")]
    bool_value: Option<bool>,
}

impl<'a> AnyValue<'a> {
    fn scalar(self) -> Scalar<'a> {
        Scalar::of_any_value(
            self.string_value,
            self.int_value,
            self.double_value,
            self.bool_value,
        )
    }
}

#[derive(Deserialize)]
struct JaegerTrace<'a> {
    #[serde(borrow, default)]
    spans: Option<Vec<JaegerSpan<'a>>>,
    #[serde(borrow, default)]
    processes: Option<FxHashMap<Cow<'a, str>, JaegerProcess<'a>>>,
}

#[derive(Deserialize)]
struct JaegerSpan<'a> {
    #[serde(borrow, default, rename = "spanID")]
    span_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "parentSpanID")]
    parent_span_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "operationName")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    references: Option<Vec<JaegerRef<'a>>>,
    #[serde(default, rename = "startTime")]
    start_us: Option<Num>,
    #[serde(borrow, default)]
    tags: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "processID")]
    process_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct JaegerRef<'a> {
    #[serde(borrow, default, rename = "refType")]
    ref_type: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "spanID")]
    span_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct JaegerProcess<'a> {
    #[serde(borrow, default, rename = "serviceName")]
    service_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tags: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct JaegerTag<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    value: Option<JaegerValue<'a>>,
}

/// How a span's attributes are written.
#[derive(Clone, Copy)]
enum AttrKind {
    Otlp,
    Jaeger,
}

/// Calls `f` with every attribute of a list, OTLP or Jaeger shaped.
fn for_attrs<'a>(
    raw: Option<&'a RawValue>,
    kind: AttrKind,
    mut f: impl FnMut(&str, Scalar<'a>),
) -> Result<(), serde_json::Error> {
    let Some(raw) = raw else { return Ok(()) };
    match kind {
        AttrKind::Otlp => {
            let kvs: Vec<KeyValue<'a>> = serde_json::from_str(raw.get())?;
            for kv in kvs {
                let v = kv.value.map_or(Scalar::Other, AnyValue::scalar);
                f(&kv.key, v);
            }
        }
        AttrKind::Jaeger => {
            let tags: Vec<JaegerTag<'a>> = serde_json::from_str(raw.get())?;
            for t in tags {
                f(&t.key, t.value.map_or(Scalar::Other, |v| v.0));
            }
        }
    }
    Ok(())
}

/// The resource ids of an attribute list; `service` is Jaeger's
/// `serviceName`, overridden by a `service.name` tag.
fn resource_ids(raw: Option<&RawValue>, kind: AttrKind, service: Option<&str>) -> ResourceIds {
    let mut r = ResourceIds {
        service: service.map(str::to_string),
        ..ResourceIds::default()
    };
    // A resource whose attributes do not parse names nothing.
    let _ = for_attrs(raw, kind, |k, v| r.set(k, v));
    r
}

/// The attributes of a filter or profile span.
fn span_attrs(raw: Option<&RawValue>, kind: AttrKind) -> Result<SpanAttrs<'_>, serde_json::Error> {
    let mut a = SpanAttrs::default();
    for_attrs(raw, kind, |k, v| a.set(k, v))?;
    Ok(a)
}

/// Reads one document: its spans, and the decisions of its filter spans
/// with the id of each one's parent, in document order (OTLP resources
/// first, then Jaeger traces).
pub(super) fn read<'a>(
    tr: &TraceReader<'_>,
    bytes: &'a [u8],
    line: u64,
    spans: &mut Vec<SpanRef<'a>>,
    filters: &mut Filters<'a>,
) -> Result<(), serde_json::Error> {
    if let Some(at) = crate::json::too_deep(bytes) {
        return Err(serde::de::Error::custom(format!(
            "JSON nested deeper than {} levels at byte {at}",
            crate::MAX_JSON_DEPTH
        )));
    }
    let doc: Doc<'a> = serde_json::from_slice(bytes)?;
    let Doc {
        resource_spans,
        batches,
        trace,
        result,
        data,
    } = doc;
    for rs in [
        resource_spans,
        batches,
        trace.and_then(|t| t.resource_spans),
        result.and_then(|t| t.resource_spans),
    ]
    .into_iter()
    .flatten()
    {
        otlp(tr, rs, line, spans, filters)?;
    }
    for t in data.into_iter().flatten() {
        let procs: FxHashMap<Cow<'a, str>, ResourceIds> = t
            .processes
            .into_iter()
            .flatten()
            .map(|(k, p)| {
                let ids = resource_ids(p.tags, AttrKind::Jaeger, p.service_name.as_deref());
                (k, ids)
            })
            .collect();
        let none = ResourceIds::default();
        for s in t.spans.into_iter().flatten() {
            let Some(id) = s.span_id else { continue };
            let parent = s
                .references
                .into_iter()
                .flatten()
                .find(|r| r.ref_type.as_deref().is_none_or(|t| t == "CHILD_OF"))
                .and_then(|r| r.span_id)
                .or(s.parent_span_id)
                .filter(|p| !p.is_empty());
            let ts = s.start_us.map(|n| n.f64() / 1e6);
            let profile = match s.name.as_deref() {
                Some(FILTER_SPAN) => {
                    let ids = s
                        .process_id
                        .as_deref()
                        .and_then(|p| procs.get(p))
                        .unwrap_or(&none);
                    let a = span_attrs(s.tags, AttrKind::Jaeger)?;
                    filters.push((tr.decision(ids, a, ts, "startTime", line), parent.clone()));
                    None
                }
                Some(PROFILE_SPAN) => Some(span_attrs(s.tags, AttrKind::Jaeger)?.profile()),
                _ => None,
            };
            spans.push(SpanRef {
                id,
                parent,
                profile,
            });
        }
    }
    Ok(())
}

/// The spans of OTLP resource spans.
fn otlp<'a>(
    tr: &TraceReader<'_>,
    rs: Vec<ResourceSpans<'a>>,
    line: u64,
    spans: &mut Vec<SpanRef<'a>>,
    filters: &mut Filters<'a>,
) -> Result<(), serde_json::Error> {
    for r in rs {
        let ids = resource_ids(
            r.resource.as_ref().and_then(|x| x.attributes),
            AttrKind::Otlp,
            None,
        );
        let scopes = r.scope_spans.into_iter().chain(r.library_spans).flatten();
        for sc in scopes {
            for s in sc.spans.into_iter().flatten() {
                let Some(id) = s.span_id else { continue };
                let parent = s.parent_span_id.filter(|p| !p.is_empty());
                let ts = s.start_ns.map(ns_to_secs);
                let profile = match s.name.as_deref() {
                    Some(FILTER_SPAN) => {
                        let a = span_attrs(s.attributes, AttrKind::Otlp)?;
                        filters.push((
                            tr.decision(&ids, a, ts, "startTimeUnixNano", line),
                            parent.clone(),
                        ));
                        None
                    }
                    Some(PROFILE_SPAN) => Some(span_attrs(s.attributes, AttrKind::Otlp)?.profile()),
                    _ => None,
                };
                spans.push(SpanRef {
                    id,
                    parent,
                    profile,
                });
            }
        }
    }
    Ok(())
}
