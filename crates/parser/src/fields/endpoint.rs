//! Endpoint ids in every logged shape, normalised to `namespace/name`
//! (or `name`, `ip:port`), into the block's arena.

use crate::arena::{Arena, Span, Spans};
use crate::json::{Val, arr_elems, obj_members, unescape};

/// Normalises an endpoint id given as a string: `ns/name`, `name`, `ip:port`
/// are kept as they are (trimmed).
fn endpoint_str(s: &str, a: &mut Arena) -> Option<Span> {
    let t = trim(s);
    if t.is_empty() {
        None
    } else {
        Some(a.push(t.as_bytes()))
    }
}

/// `s` without leading and trailing whitespace, as `str::trim`; ids
/// usually start and end with an ASCII letter or digit, which is checked
/// first (`str::trim` decodes a character at each end).
#[inline]
fn trim(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric() => s,
        _ => s.trim(),
    }
}

/// Joins a namespace and a name into `namespace/name` (or `name`).
fn join_id(ns: Option<&str>, name: Option<&str>, a: &mut Arena) -> Option<Span> {
    let name = trim(name?);
    if name.is_empty() {
        return None;
    }
    match ns.map(trim) {
        Some(n) if !n.is_empty() => Some(a.push_join(n, name)),
        _ => Some(a.push(name.as_bytes())),
    }
}

/// An endpoint id in any logged shape: `{"name","namespace"}`,
/// `{"Name","Namespace"}`, `"ns/name"`, `"name"`, `"ip:port"`; inside a
/// reflected dump, the `ID` (or `NamespacedName`, ...) member, searched
/// before the dump's own `Name` (which is the pod's).
pub(crate) fn endpoint(v: Val<'_>, a: &mut Arena) -> Option<Span> {
    match v {
        Val::Str(..) => endpoint_str(&v.as_str()?, a),
        Val::Obj(raw) => endpoint_deep(raw, 0, a),
        _ => None,
    }
}

const ID_KEYS: [&str; 8] = [
    "ID",
    "NamespacedName",
    "Endpoint",
    "EndpointMetadata",
    "Metadata",
    "Pod",
    "metadata",
    "endpoint",
];

/// The usual id object, `{"name":"N","namespace":"S"}` or
/// `{"Namespace":"S","Name":"N"}` (two string members, any order and
/// spelling, no escapes or whitespace, valid UTF-8), read without the
/// scanner: the id as [`endpoint_deep`] makes it (`Some(None)` where that is
/// none) and the offset after the closing brace. `None` for any other
/// object or text: the caller walks it.
fn id_pair(b: &[u8], a: &mut Arena) -> Option<(Option<Span>, usize)> {
    if let Some((ns, name, end)) = id_literal(b) {
        return Some((Some(a.push_join_bytes(ns, name)), end));
    }
    if b.first() != Some(&b'{') {
        return None;
    }
    let mut i = 1;
    let mut name = None;
    let mut ns = None;
    for sep in [b',', b'}'] {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let ke = crate::json::quote_or_backslash(b, i + 1)?;
        if b[ke] != b'"' || b.get(ke + 1..ke + 3) != Some(b":\"") {
            return None;
        }
        let ve = crate::json::quote_or_backslash(b, ke + 3)?;
        if b[ve] != b'"' || b.get(ve + 1) != Some(&sep) {
            return None;
        }
        let v = crate::json::utf8(&b[ke + 3..ve])?;
        match &b[i + 1..ke] {
            b"name" | b"Name" => name = Some(v),
            b"namespace" | b"Namespace" => ns = Some(v),
            _ => {}
        }
        i = ve + 2;
    }
    Some((join_id(ns, name, a), i))
}

/// The two id objects zap writes (the reflected `{"Namespace":"S","Name":"N"}`
/// of endpoint dumps, the scorers' `{"name":"N","namespace":"S"}`), matched
/// literally: the namespace, the name and the offset after the closing
/// brace. Only for values that need no trimming (first and last bytes ASCII
/// letters or digits) and no unescaping; their bytes go to the arena as
/// written (a string read from there is converted lossily, which keeps `/`
/// as it is, so joining before or after the conversion is the same).
/// `None` for anything else: [`id_pair`] reads it the general way.
#[inline]
fn id_literal(b: &[u8]) -> Option<(&[u8], &[u8], usize)> {
    const NS_FIRST: &[u8] = b"{\"Namespace\":\"";
    const NAME_FIRST: &[u8] = b"{\"name\":\"";
    let (ns_first, second_key): (bool, &[u8]) = if b.starts_with(NS_FIRST) {
        (true, b"\",\"Name\":\"")
    } else if b.starts_with(NAME_FIRST) {
        (false, b"\",\"namespace\":\"")
    } else {
        return None;
    };
    let v1 = if ns_first {
        NS_FIRST.len()
    } else {
        NAME_FIRST.len()
    };
    let q1 = crate::json::quote_or_backslash(b, v1)?;
    if !b[q1..].starts_with(second_key) {
        return None;
    }
    let v2 = q1 + second_key.len();
    let q2 = crate::json::quote_or_backslash(b, v2)?;
    if b.get(q2..q2 + 2) != Some(b"\"}") {
        return None;
    }
    let (x, y) = (&b[v1..q1], &b[v2..q2]);
    let plain = |v: &[u8]| match (v.first(), v.last()) {
        (Some(f), Some(l)) => f.is_ascii_alphanumeric() && l.is_ascii_alphanumeric(),
        _ => false,
    };
    if !plain(x) || !plain(y) {
        return None;
    }
    Some(if ns_first {
        (x, y, q2 + 2)
    } else {
        (y, x, q2 + 2)
    })
}

fn endpoint_deep(raw: &[u8], depth: u32, a: &mut Arena) -> Option<Span> {
    // An id read by `id_pair` from an object with more after it stays in
    // the arena unused (the arena is the block's, emptied with it).
    if let Some((id, end)) = id_pair(raw, a)
        && end == raw.len()
    {
        return id;
    }
    endpoint_walk(raw, depth, a)
}

/// [`endpoint_deep`] by the scanner: any object shape.
fn endpoint_walk(raw: &[u8], depth: u32, a: &mut Arena) -> Option<Span> {
    let mut found: [Option<&[u8]>; ID_KEYS.len()] = [None; ID_KEYS.len()];
    let mut name = None;
    let mut ns = None;
    let ok = obj_members(raw, |k, e, v| {
        let owned;
        let k: &[u8] = if e {
            owned = unescape(k, true).into_owned();
            owned.as_bytes()
        } else {
            k
        };
        match (k, v) {
            (b"name" | b"Name", Val::Str(..)) => name = v.as_str(),
            (b"namespace" | b"Namespace", Val::Str(..)) => ns = v.as_str(),
            (k, Val::Obj(o)) => {
                if let Some(i) = ID_KEYS.iter().position(|x| x.as_bytes() == k) {
                    found[i] = Some(o);
                }
            }
            _ => {}
        }
    });
    if !ok {
        return None;
    }
    if depth < 4 {
        for o in found.into_iter().flatten() {
            if let Some(e) = endpoint_deep(o, depth + 1, a) {
                return Some(e);
            }
        }
    }
    join_id(ns.as_deref(), name.as_deref(), a)
}

/// The endpoint ids of an array of endpoints (any element shape), or of a
/// single endpoint value, as a list in the arena.
pub(crate) fn endpoint_list(v: Val<'_>, a: &mut Arena) -> Option<Spans> {
    let start = a.list_start();
    match v {
        Val::Arr(raw) => {
            let ok = arr_elems(raw, |e| {
                if let Some(id) = endpoint(e, a) {
                    a.push_item(id);
                }
            });
            if !ok {
                return None;
            }
        }
        Val::Null => {}
        Val::Str(..) => {
            // `"ip:port,ip:port"` or a single id.
            let s = v.as_str()?;
            for part in s.split(',') {
                if let Some(id) = endpoint_str(part, a) {
                    a.push_item(id);
                }
            }
        }
        Val::Obj(_) => {
            let id = endpoint(v, a)?;
            a.push_item(id);
        }
        _ => return None,
    }
    Some(a.list_from(start))
}

/// The offset of the next `"ID":{` at or after `from`. A capital `I` is
/// rare in a dump (the `ID` key, `RankIndex`), so the search is for that
/// byte (`memchr`, cheaper to start than a substring search), each hit
/// checked in place.
fn find_id_key(raw: &[u8], from: usize) -> Option<usize> {
    // The `I` of a match at or after `from` is at `from + 1` or later.
    let mut at = from.checked_add(1)?;
    loop {
        let i = at + memchr::memchr(b'I', raw.get(at..)?)?;
        if raw.get(i - 1..i + 5) == Some(b"\"ID\":{") {
            return Some(i - 1);
        }
        at = i + 1;
    }
}

/// The endpoint ids of a reflected endpoint dump, found by a literal search
/// for `"ID":{` objects with a `Name` (the dump's per-endpoint id), in order,
/// as a list in the arena. `None` when there is none (another shape: the
/// caller walks the value).
pub(crate) fn dump_ids(raw: &[u8], a: &mut Arena) -> Option<Spans> {
    let first = a.list_start();
    let mut at = 0;
    while let Some(p) = find_id_key(raw, at) {
        let start = p + 5;
        if let Some((id, end)) = id_pair(&raw[start..], a) {
            if let Some(id) = id {
                a.push_item(id);
            }
            at = start + end;
            continue;
        }
        // One pass over the `ID` object: its members, then where it ends.
        let mut sc = crate::json::Scanner::new(&raw[start..]);
        let mut name = None;
        let mut ns = None;
        let read = sc.object(false, |k, _, v| match k {
            b"Name" | b"name" => name = Some(v),
            b"Namespace" | b"namespace" => ns = Some(v),
            _ => {}
        });
        if read.is_ok() {
            let name = name.and_then(|v| v.as_str());
            let ns = ns.and_then(|v| v.as_str());
            if let Some(id) = join_id(ns.as_deref(), name.as_deref(), a) {
                a.push_item(id);
            }
            at = start + sc.pos();
        } else {
            at = start;
        }
    }
    let ids = a.list_from(first);
    if Arena::is_empty_list(ids) {
        None
    } else {
        Some(ids)
    }
}

/// `result.TargetEndpoints` of a picker result object, as a list in the
/// arena.
pub(crate) fn picker_targets(v: Val<'_>, a: &mut Arena) -> Option<Spans> {
    let Val::Obj(raw) = v else { return None };
    let mut out = None;
    obj_members(raw, |k, e, v| {
        if (!e && k == b"TargetEndpoints") || (e && unescape(k, e) == "TargetEndpoints") {
            out = endpoint_list(v, a);
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // The id readers, with their strings read back from an arena.
    fn endpoint(v: Val<'_>) -> Option<String> {
        let mut a = Arena::default();
        super::endpoint(v, &mut a).map(|s| a.string(s))
    }

    fn endpoint_list(v: Val<'_>) -> Option<Vec<String>> {
        let mut a = Arena::default();
        super::endpoint_list(v, &mut a).map(|l| a.strings(l))
    }

    fn id_pair(b: &[u8]) -> Option<(Option<String>, usize)> {
        let mut a = Arena::default();
        super::id_pair(b, &mut a).map(|(id, end)| (id.map(|s| a.string(s)), end))
    }

    fn endpoint_walk(raw: &[u8], depth: u32) -> Option<String> {
        let mut a = Arena::default();
        super::endpoint_walk(raw, depth, &mut a).map(|s| a.string(s))
    }

    fn endpoint_deep(raw: &[u8], depth: u32) -> Option<String> {
        let mut a = Arena::default();
        super::endpoint_deep(raw, depth, &mut a).map(|s| a.string(s))
    }
    use crate::json::Scanner;

    #[test]
    fn id_key_search_matches_a_substring_search() {
        let texts: [&[u8]; 6] = [
            br#"[{"ID":{"Name":"a"},"RankIndex":0},{"ID":{"Name":"b"}}]"#,
            br#"I"ID":{"#,
            br#"{"RankIndex":1,"ID":1,"xID":{"#,
            br#""ID":"#,
            b"",
            br#"IIII"ID"ID":{"#,
        ];
        for t in texts {
            let mut want = Vec::new();
            let mut from = 0;
            while let Some(p) = memchr::memmem::find(&t[from..], br#""ID":{"#) {
                want.push(from + p);
                from += p + 1;
            }
            let mut got = Vec::new();
            let mut from = 0;
            while let Some(p) = find_id_key(t, from) {
                got.push(p);
                from = p + 1;
            }
            assert_eq!(got, want, "{}", String::from_utf8_lossy(t));
        }
    }

    /// The literal shapes give what the scanner's walk gives, bytes that
    /// are not UTF-8 included; anything near them is left to the general
    /// reader.
    #[test]
    fn literal_ids_match_the_walk() {
        let literal: [&[u8]; 5] = [
            br#"{"Namespace":"llm-d","Name":"p-0-rank-0"}"#,
            br#"{"name":"p-0-rank-0","namespace":"llm-d"}"#,
            b"{\"Namespace\":\"ns\",\"Name\":\"a\xffb\"}",
            br#"{"Namespace":"n","Name":"p"},"Name":"pod"}"#,
            br#"{"name":"1","namespace":"2"}"#,
        ];
        for o in literal {
            let (ns, name, end) = id_literal(o).expect("the literal shape");
            assert!(!ns.is_empty() && !name.is_empty());
            let (id, end2) = id_pair(o).unwrap();
            assert_eq!(end, end2);
            assert_eq!(
                id,
                endpoint_walk(&o[..end], 0),
                "{}",
                String::from_utf8_lossy(o)
            );
        }
        let general: [&[u8]; 7] = [
            br#"{"Namespace":" ns","Name":"p"}"#,
            br#"{"Namespace":"ns","Name":"p "}"#,
            br#"{"Namespace":"","Name":"p"}"#,
            br#"{"Namespace":"n\"s","Name":"p"}"#,
            br#"{"Name":"p","Namespace":"ns"}"#,
            br#"{"namespace":"ns","name":"p"}"#,
            br#"{"Namespace":"ns","Name":"p","X":1}"#,
        ];
        for o in general {
            assert!(id_literal(o).is_none(), "{}", String::from_utf8_lossy(o));
        }
        assert_eq!(id_pair(general[4]).unwrap().0.as_deref(), Some("ns/p"));
        assert_eq!(id_pair(general[0]).unwrap().0.as_deref(), Some("ns/p"));
    }

    #[test]
    fn trim_is_str_trim() {
        for s in [
            "a",
            " a",
            "a ",
            "\u{a0}a",
            "a\u{2003}",
            "",
            " ",
            "ns/n-0",
            "\tx\n",
            "é",
        ] {
            assert_eq!(trim(s), s.trim(), "{s:?}");
        }
    }

    /// The usual id objects read without the scanner give what the scanner
    /// gives; the others are left to it.
    #[test]
    fn id_pair_matches_the_walk() {
        let taken: [&[u8]; 6] = [
            br#"{"name":"n-0","namespace":"ns"}"#,
            br#"{"Namespace":"ns","Name":"n-0"}"#,
            br#"{"name":"n-0","other":"x"}"#,
            br#"{"namespace":"ns","name":" "}"#,
            br#"{"name":"a","name":"b"}"#,
            br#"{"Namespace":"ns","Name":"n-0"},"Name":"pod"}"#,
        ];
        for o in taken {
            let (id, end) = id_pair(o).expect("read without the scanner");
            assert_eq!(
                id,
                endpoint_walk(&o[..end], 0),
                "{}",
                String::from_utf8_lossy(o)
            );
        }
        assert_eq!(id_pair(taken[1]).unwrap().0.as_deref(), Some("ns/n-0"));
        let left: [&[u8]; 8] = [
            br#"{"name":"n\u0030","namespace":"ns"}"#,
            br#"{"name": "n","namespace":"ns"}"#,
            br#"{"name":"n","namespace":"ns","x":1}"#,
            br#"{"name":"n"}"#,
            br#"{"name":1,"namespace":"ns"}"#,
            br#"{"ID":{"name":"n","namespace":"ns"},"Name":"p"}"#,
            b"{\"name\":\"n\xff\",\"namespace\":\"ns\"}",
            br#"{"name":"n","namespace":"ns""#,
        ];
        for o in left {
            assert!(id_pair(o).is_none(), "{}", String::from_utf8_lossy(o));
        }
        // What the walk makes of those, endpoint_deep still does.
        assert_eq!(endpoint_deep(left[0], 0).as_deref(), Some("ns/n0"));
        assert_eq!(endpoint_deep(left[5], 0).as_deref(), Some("ns/n"));
    }

    fn val(s: &str) -> Val<'_> {
        Scanner::new(s.as_bytes()).value().unwrap()
    }

    #[test]
    fn endpoint_shapes() {
        assert_eq!(
            endpoint(val(r#"{"name":"p-0","namespace":"llm"}"#)).unwrap(),
            "llm/p-0"
        );
        assert_eq!(
            endpoint(val(r#"{"Namespace":"llm","Name":"p-0"}"#)).unwrap(),
            "llm/p-0"
        );
        assert_eq!(endpoint(val(r#"{"name":"p-0"}"#)).unwrap(), "p-0");
        assert_eq!(
            endpoint(val(r#""llm/p-0-rank-1""#)).unwrap(),
            "llm/p-0-rank-1"
        );
        assert_eq!(
            endpoint(val(r#""10.0.0.1:8000""#)).unwrap(),
            "10.0.0.1:8000"
        );
        let dump = r#"{"Metadata":{"ID":{"Namespace":"llm","Name":"p-1"},"Address":"10.0.0.1"},"Metrics":{"x":1}}"#;
        let flat =
            r#"{"ID":{"Namespace":"llm","Name":"p-1-rank-1"},"Name":"p-1","Labels":{"Name":"x"}}"#;
        assert_eq!(endpoint(val(flat)).unwrap(), "llm/p-1-rank-1");
        assert_eq!(endpoint(val(dump)).unwrap(), "llm/p-1");
        let list = format!("[{dump},{}]", r#"{"ID":{"Namespace":"llm","Name":"p-2"}}"#);
        assert_eq!(
            endpoint_list(val(&list)).unwrap(),
            vec!["llm/p-1", "llm/p-2"]
        );
        assert_eq!(endpoint(val("3")), None);
    }
}
