//! The reference docs against the binaries: `docs/usage.md`'s flag tables
//! against `--help`, and `docs/json-schema.md`'s schemas against the key
//! paths of real JSON reports.
//!
//! The schemas are read in the page's own notation: a `text` block per
//! schema, `"key": value` members, several keys sharing one value
//! (`"p50", "p90": num`), alternatives (`"a"|"b"`), bare parameter names,
//! `NAME:` for a map's keys, `<…>` inside a key for any text, upper-case
//! names defined in the page (`STATS = { … }`) used as a value or, as a
//! member, flattened into the object that holds them, `{ ...as gate-dist... }`
//! for the same place in the gate-dist schema and `{ ...as "key"... }` for a
//! sibling's shape. Text that starts two spaces or more after the comment
//! column (37) is a comment, and so is text in parentheses; a key whose
//! comment says `only when`, `only with` or `absent when` is optional.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The path of a file or folder under `fixtures/`.
pub fn fixture(p: &str) -> String {
    root()
        .join("fixtures")
        .join(p)
        .to_string_lossy()
        .into_owned()
}

/// A file of `docs/`.
pub fn doc(name: &str) -> String {
    std::fs::read_to_string(root().join("docs").join(name)).unwrap()
}

// ---------------------------------------------------------------- flags

/// Flags (`--long`, `-s`) in a piece of text: a `-` at the start of a word.
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let word_start = i == 0 || matches!(b[i - 1], b' ' | b'`' | b',' | b'(' | b'[' | b'/');
        if b[i] == b'-' && word_start {
            let long = b.get(i + 1) == Some(&b'-');
            let s = if long { i + 2 } else { i + 1 };
            let mut e = s;
            while e < b.len() && (b[e].is_ascii_alphanumeric() || (long && b[e] == b'-')) {
                e += 1;
            }
            let ok = if long {
                e > s && b[s].is_ascii_lowercase()
            } else {
                e == s + 1 && b[s].is_ascii_alphabetic()
            };
            if ok {
                out.insert(text[i..e].to_string());
            }
            i = e.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// The flags `--help` lists in its options.
pub fn help_flags(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in help.lines() {
        let t = line.trim_start();
        if !t.starts_with('-') || line.len() - t.len() < 2 || line.len() - t.len() > 6 {
            continue;
        }
        // `-j, --threads <N>`: the flags before the value name.
        let head = t.split(" <").next().unwrap();
        for f in head.split(", ") {
            if f.starts_with('-') && !f.contains(' ') {
                out.insert(f.to_string());
            }
        }
    }
    out
}

/// The text of `## HEADING` (up to the next `## `).
pub fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let start = doc
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("no `## {heading}` section"))
        + 1;
    let rest = &doc[start + 3..];
    let end = rest.find("\n## ").map_or(doc.len(), |e| start + 3 + e);
    &doc[start..end]
}

/// The text before the first `## ` heading.
pub fn intro(doc: &str) -> &str {
    &doc[..doc.find("\n## ").unwrap()]
}

/// The flags in the first column of the section's flag tables (the
/// tables whose first header is `flag`).
pub fn table_flags(section: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_flag_table = false;
    for line in section.lines() {
        let Some(row) = line.strip_prefix('|') else {
            in_flag_table = false;
            continue;
        };
        // The first cell: up to the first `|` not escaped as `\|`.
        let mut first = String::new();
        let mut chars = row.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&'|') => {
                    first.push('|');
                    chars.next();
                }
                '|' => break,
                c => first.push(c),
            }
        }
        let first = first.trim();
        if first == "flag" {
            in_flag_table = true;
        } else if in_flag_table && !first.starts_with("---") {
            out.extend(flags_in(first));
        }
    }
    out
}

/// `--help` against the binary's section of docs/usage.md: every flag
/// listed is in the section's flag tables (`--help` and `--version` in
/// the page's introduction), and every flag of those tables is listed.
pub fn check_flags(bin: &str, help: &str) {
    let usage = doc("usage.md");
    let listed = help_flags(help);
    assert!(
        listed.contains("--help") && listed.len() > 10,
        "{bin} --help lists too few flags: {listed:?}"
    );
    let documented = table_flags(section(&usage, bin));
    let intro = flags_in(intro(&usage));
    let missing: Vec<_> = listed
        .iter()
        .filter(|f| {
            if ["-h", "--help", "-V", "--version"].contains(&f.as_str()) {
                !intro.contains(*f)
            } else {
                !documented.contains(*f)
            }
        })
        .collect();
    let stale: Vec<_> = documented.difference(&listed).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/usage.md, `## {bin}`: flags of `{bin} --help` not in its flag tables: {missing:?}; \
         flags in its flag tables that `{bin} --help` does not list: {stale:?}"
    );
}

// ----------------------------------------------------------- JSON paths

/// Every key path of a JSON value: members joined with `.`, array
/// elements collapsed to `[]` (`deployments[].peak_prefill_throughput.interval`).
pub fn key_paths(v: &serde_json::Value) -> BTreeSet<String> {
    fn walk(v: &serde_json::Value, path: &str, out: &mut BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    out.insert(p.clone());
                    walk(x, &p, out);
                }
            }
            serde_json::Value::Array(a) => {
                for x in a {
                    walk(x, &format!("{path}[]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(v, "", &mut out);
    out
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Str(String),
    Ident(String),
    Punct(char),
    /// `...TEXT...` (or with `…`).
    Ellipsis(String),
}

/// A token and its line (in the page).
type Spanned = (Tok, usize);

#[derive(Clone, Debug)]
enum Node {
    Leaf,
    Object(Vec<Member>),
    Array(Box<Node>),
    /// A name defined in the page (`DEPLOYMENT`), or an undefined one
    /// standing for a scalar (`NAME`).
    Ref(String),
    /// Alternatives (`null | { … }`).
    Alt(Vec<Node>),
    /// `{ ...as gate-dist... }`: the same place in the gate-dist schema.
    AsGateDist,
    /// `{ ...as "key"... }`: the shape of a sibling member.
    AsSibling(String),
}

#[derive(Clone, Debug)]
enum Member {
    Key {
        key: String,
        value: Node,
        optional: bool,
    },
    Flatten(String),
}

struct Parser {
    toks: Vec<Spanned>,
    pos: usize,
    optional_lines: BTreeSet<usize>,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(0, |t| t.1)
    }
    fn next(&mut self) -> Tok {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t.map(|t| t.0)
            .unwrap_or_else(|| panic!("docs/json-schema.md: the schema ends too early"))
    }
    fn fail(&self, what: &str) -> ! {
        panic!(
            "docs/json-schema.md line {}: {what} (at {:?})",
            self.line(),
            self.peek()
        )
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: char) {
        if !self.eat(c) {
            self.fail(&format!("expected `{c}`"))
        }
    }

    fn value(&mut self) -> Node {
        let mut alts = vec![self.single()];
        while self.eat('|') {
            alts.push(self.single());
        }
        if alts.len() == 1 {
            alts.pop().unwrap()
        } else {
            Node::Alt(alts)
        }
    }

    fn single(&mut self) -> Node {
        match self.next() {
            Tok::Punct('{') => self.object(),
            Tok::Punct('[') => {
                // `[ DEPLOYMENT ]`, `[ { … } ]`; else scalars (`[str]`,
                // `[low, high]`, `[request id]`).
                let elem = match self.peek() {
                    Some(Tok::Punct('{')) => Some(self.value()),
                    Some(Tok::Ident(n)) if is_type_name(n) => Some(self.value()),
                    _ => None,
                };
                let mut depth = 0;
                loop {
                    match self.next() {
                        Tok::Punct('[') => depth += 1,
                        Tok::Punct(']') if depth == 0 => break,
                        Tok::Punct(']') => depth -= 1,
                        _ => {}
                    }
                }
                Node::Array(Box::new(elem.unwrap_or(Node::Leaf)))
            }
            Tok::Str(_) => Node::Leaf,
            Tok::Ident(n) if is_type_name(&n) => Node::Ref(n),
            Tok::Ident(_) => Node::Leaf,
            t => {
                self.pos -= 1;
                self.fail(&format!("unexpected {t:?}"))
            }
        }
    }

    /// After `{`, up to and with `}`.
    fn object(&mut self) -> Node {
        if let Some(Tok::Ellipsis(text)) = self.peek().cloned() {
            self.pos += 1;
            self.expect('}');
            if let Some(k) = text.split('"').nth(1) {
                return Node::AsSibling(k.to_string());
            }
            if text.contains("gate-dist") {
                return Node::AsGateDist;
            }
            self.fail(&format!(
                "`...{text}...` names neither a sibling nor gate-dist"
            ))
        }
        let mut members = Vec::new();
        let mut pending: Vec<(String, usize)> = Vec::new();
        loop {
            if self.eat('}') {
                break;
            }
            let line = self.line();
            match self.next() {
                Tok::Ident(n) if is_type_name(&n) && self.peek() != Some(&Tok::Punct(':')) => {
                    members.push(Member::Flatten(n))
                }
                Tok::Ident(n) if is_type_name(&n) => pending.push(("*".into(), line)),
                Tok::Ident(n) => pending.push((n, line)),
                Tok::Str(s) => {
                    pending.push((key_pattern(&s), line));
                    while self.eat('|') {
                        match self.next() {
                            Tok::Str(s) => pending.push((key_pattern(&s), line)),
                            t => self.fail(&format!("expected a key after `|`, got {t:?}")),
                        }
                    }
                }
                t => {
                    self.pos -= 1;
                    self.fail(&format!("expected a member, got {t:?}"))
                }
            }
            let value = if self.eat(':') {
                Some(self.value())
            } else {
                None
            };
            let end = self.eat(',') || self.peek() == Some(&Tok::Punct('}'));
            if !end {
                self.fail("expected `,` or `}` after a member");
            }
            // Keys before a value share it (`"p50", "p90": num`); keys
            // without one are leaves.
            if let Some(value) = value {
                for (key, line) in pending.drain(..) {
                    members.push(Member::Key {
                        key,
                        value: value.clone(),
                        optional: self.optional_lines.contains(&line),
                    });
                }
            }
            if self.peek() == Some(&Tok::Punct('}')) {
                for (key, line) in pending.drain(..) {
                    members.push(Member::Key {
                        key,
                        value: Node::Leaf,
                        optional: self.optional_lines.contains(&line),
                    });
                }
            }
        }
        Node::Object(members)
    }
}

/// `DEPLOYMENT`, `STATS`, `NAME`: a name of the notation, not a key.
fn is_type_name(s: &str) -> bool {
    s.len() > 1
        && s.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        && s.chars().any(|c| c.is_ascii_uppercase())
}

/// A quoted key as a pattern: `<…>` stands for any text (`*`).
fn key_pattern(s: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in s.chars() {
        match c {
            '<' => {
                if depth == 0 {
                    out.push('*');
                }
                depth += 1;
            }
            '>' => depth -= 1,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The column where comments start in the schema blocks.
const COMMENT_COLUMN: usize = 36;

/// A line that starts at or past the comment column and still holds code:
/// it opens with a key (`"key":`, `"key",`) or closes an object or array.
fn continues_code(t: &str) -> bool {
    if t.starts_with('}') || t.starts_with(']') {
        return true;
    }
    let Some(rest) = t.strip_prefix('"') else {
        return false;
    };
    rest.split_once('"').is_some_and(|(key, after)| {
        !key.is_empty()
            && key.chars().all(|c| c.is_alphanumeric() || c == '_')
            && matches!(after.trim_start().chars().next(), Some(':' | ',' | '|'))
    })
}

/// Tokens of one schema block (its lines, with their line numbers), with
/// comments removed; and the lines whose comment marks their keys optional.
fn tokenize(lines: &[(usize, &str)]) -> (Vec<Spanned>, BTreeSet<usize>) {
    let mut toks = Vec::new();
    let mut comments: BTreeMap<usize, String> = BTreeMap::new();
    let mut last_code_line = 0;
    for &(n, line) in lines {
        let chars: Vec<char> = line.chars().collect();
        // The comment: from two spaces or more, at or past the comment
        // column, unless the code before ends with `:` or `|`.
        let mut cut = chars.len();
        let mut prev = None;
        let mut in_str = false;
        let indent = chars.iter().take_while(|c| **c == ' ').count();
        if indent >= COMMENT_COLUMN && !continues_code(line.trim()) {
            cut = indent;
        }
        for (i, &c) in chars.iter().enumerate().take(cut) {
            if !in_str
                && c != ' '
                && i >= COMMENT_COLUMN
                && prev.is_some()
                && chars[i - 1] == ' '
                && chars[i - 2] == ' '
                && !matches!(prev, Some(':') | Some('|'))
            {
                cut = i;
                break;
            }
            if c == '"' {
                in_str = !in_str;
            }
            if c != ' ' {
                prev = Some(c);
            }
        }
        let code: String = chars[..cut].iter().collect();
        let comment: String = chars[cut..].iter().collect();
        if code.trim().is_empty() {
            // A comment line continues the comment of the code above.
            comments
                .entry(last_code_line)
                .or_default()
                .push_str(&format!(" {comment}"));
            continue;
        }
        last_code_line = n;
        comments.insert(n, comment);
        let mut it = code.chars().peekable();
        let mut paren = 0;
        while let Some(c) = it.next() {
            if paren > 0 {
                match c {
                    '(' => paren += 1,
                    ')' => paren -= 1,
                    _ => {}
                }
                continue;
            }
            match c {
                ' ' => {}
                '(' => paren = 1,
                '"' => {
                    let mut s = String::new();
                    for c in it.by_ref() {
                        if c == '"' {
                            break;
                        }
                        s.push(c);
                    }
                    toks.push((Tok::Str(s), n));
                }
                '{' | '}' | '[' | ']' | ':' | ',' | '|' | '=' => toks.push((Tok::Punct(c), n)),
                '.' | '…' => {
                    // `...TEXT...` or `…TEXT…`.
                    while it.peek() == Some(&'.') {
                        it.next();
                    }
                    let mut s = String::new();
                    while let Some(&c) = it.peek() {
                        if c == '.' || c == '…' {
                            break;
                        }
                        s.push(c);
                        it.next();
                    }
                    while matches!(it.peek(), Some('.') | Some('…')) {
                        it.next();
                    }
                    toks.push((Tok::Ellipsis(s.trim().to_string()), n));
                }
                c if c.is_alphanumeric() || c == '_' => {
                    let mut s = String::from(c);
                    while let Some(&c) = it.peek() {
                        if c.is_alphanumeric() || c == '_' || c == '-' {
                            s.push(c);
                            it.next();
                        } else {
                            break;
                        }
                    }
                    toks.push((Tok::Ident(s), n));
                }
                c => panic!("docs/json-schema.md line {n}: unexpected `{c}` in {code:?}"),
            }
        }
    }
    let optional = comments
        .into_iter()
        .filter(|(_, c)| {
            let c = c.to_lowercase();
            c.contains("only when") || c.contains("only with") || c.contains("absent when")
        })
        .map(|(n, _)| n)
        .collect();
    (toks, optional)
}

/// One schema of the page: its root object and its named shapes.
#[derive(Debug)]
pub struct Schema {
    root: Node,
    names: BTreeMap<String, Node>,
}

/// The `text` blocks of docs/json-schema.md, by the schema name of the
/// heading above each (`gatecal.gate-dist/v3`).
pub fn schemas() -> BTreeMap<String, Schema> {
    let page = doc("json-schema.md");
    let mut out = BTreeMap::new();
    let mut heading = String::new();
    let mut block: Option<Vec<(usize, &str)>> = None;
    for (i, line) in page.lines().enumerate() {
        if let Some(h) = line.strip_prefix("## ") {
            heading = h.trim().trim_matches('`').to_string();
        } else if line.trim() == "```text" {
            block = Some(Vec::new());
        } else if line.trim() == "```" {
            if let Some(lines) = block.take() {
                out.insert(heading.clone(), parse_block(&lines));
            }
        } else if let Some(b) = block.as_mut() {
            b.push((i + 1, line));
        }
    }
    out
}

fn parse_block(lines: &[(usize, &str)]) -> Schema {
    let (toks, optional_lines) = tokenize(lines);
    let mut p = Parser {
        toks,
        pos: 0,
        optional_lines,
    };
    p.expect('{');
    let root = p.object();
    let mut names = BTreeMap::new();
    while p.peek().is_some() {
        let name = match p.next() {
            Tok::Ident(n) if is_type_name(&n) => n,
            t => {
                p.pos -= 1;
                p.fail(&format!("expected `NAME = …`, got {t:?}"))
            }
        };
        p.expect('=');
        names.insert(name, p.value());
    }
    Schema { root, names }
}

/// A documented key path (a pattern: `*` is any key) and whether the page
/// marks it optional.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DocPath {
    pub path: String,
    pub optional: bool,
}

/// The key paths a schema documents. `other` is the gate-dist schema, for
/// `{ ...as gate-dist... }`; named shapes are looked up in the schema, then
/// in `other`.
pub fn doc_paths(s: &Schema, other: Option<&Schema>) -> BTreeSet<DocPath> {
    let mut out = BTreeSet::new();
    let cx = Cx { s, other };
    cx.walk(&s.root, "", false, &[], &mut out, 0);
    out
}

struct Cx<'a> {
    s: &'a Schema,
    other: Option<&'a Schema>,
}

impl Cx<'_> {
    fn named(&self, n: &str) -> Option<&Node> {
        self.s
            .names
            .get(n)
            .or_else(|| self.other.and_then(|o| o.names.get(n)))
    }

    fn walk(
        &self,
        node: &Node,
        path: &str,
        optional: bool,
        siblings: &[Member],
        out: &mut BTreeSet<DocPath>,
        depth: usize,
    ) {
        assert!(depth < 64, "docs/json-schema.md: a shape contains itself");
        match node {
            Node::Leaf => {}
            Node::Ref(n) => {
                if let Some(x) = self.named(n) {
                    self.walk(x, path, optional, siblings, out, depth + 1)
                }
            }
            Node::Array(e) => self.walk(e, &format!("{path}[]"), optional, &[], out, depth + 1),
            Node::Alt(xs) => {
                for x in xs {
                    self.walk(x, path, optional, siblings, out, depth + 1)
                }
            }
            Node::AsGateDist => {
                let o = self
                    .other
                    .expect("`...as gate-dist...` in the gate-dist schema");
                let x = find(o, &o.root, path)
                    .unwrap_or_else(|| panic!("`...as gate-dist...`: gate-dist has no {path}"));
                let cx = Cx { s: o, other: None };
                cx.walk(&x, path, optional, &[], out, depth + 1)
            }
            Node::AsSibling(k) => {
                let x = siblings
                    .iter()
                    .find_map(|m| match m {
                        Member::Key { key, value, .. } if key == k => Some(value.clone()),
                        _ => None,
                    })
                    .unwrap_or_else(|| panic!("`...as \"{k}\"...` at {path}: no such sibling"));
                self.walk(&x, path, optional, siblings, out, depth + 1)
            }
            Node::Object(members) => {
                let all = self.members(members, depth);
                for m in &all {
                    if let Member::Key {
                        key,
                        value,
                        optional: o,
                        ..
                    } = m
                    {
                        let p = if path.is_empty() {
                            key.clone()
                        } else {
                            format!("{path}.{key}")
                        };
                        out.insert(DocPath {
                            path: p.clone(),
                            optional: optional || *o,
                        });
                        self.walk(value, &p, optional || *o, &all, out, depth + 1);
                    }
                }
            }
        }
    }

    /// An object's members with the flattened shapes spliced in.
    fn members(&self, members: &[Member], depth: usize) -> Vec<Member> {
        assert!(depth < 64, "docs/json-schema.md: a shape contains itself");
        let mut out = Vec::new();
        for m in members {
            match m {
                Member::Flatten(n) => match self.named(n) {
                    Some(Node::Object(ms)) => out.extend(self.members(ms, depth + 1)),
                    _ => panic!("docs/json-schema.md: `{n}` flattened but not an object"),
                },
                m => out.push(m.clone()),
            }
        }
        out
    }
}

/// The node at a key path of a schema (for `...as gate-dist...`).
fn find(s: &Schema, node: &Node, path: &str) -> Option<Node> {
    let cx = Cx { s, other: None };
    let mut node = node.clone();
    for seg in path.split('.') {
        let (key, arrays) = (seg.trim_end_matches("[]"), seg.matches("[]").count());
        let members = match resolve(s, &node) {
            Node::Object(ms) => cx.members(&ms, 0),
            _ => return None,
        };
        node = members.into_iter().find_map(|m| match m {
            Member::Key { key: k, value, .. } if k == key => Some(value),
            _ => None,
        })?;
        for _ in 0..arrays {
            node = match resolve(s, &node) {
                Node::Array(e) => *e,
                _ => return None,
            };
        }
    }
    Some(node)
}

fn resolve(s: &Schema, node: &Node) -> Node {
    match node {
        Node::Ref(n) => s.names.get(n).map_or(Node::Leaf, |x| resolve(s, x)),
        n => n.clone(),
    }
}

/// `pattern` (with `*` for one key, any text) matches `path`.
pub fn matches(pattern: &str, path: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len())
                .take_while(|&i| i == 0 || !matches!(s[i - 1], b'.' | b'['))
                .any(|i| go(rest, &s[i..])),
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    go(pattern.as_bytes(), path.as_bytes())
}

/// The JSON reports against their schema in docs/json-schema.md: every key
/// path of `reports` is documented, and every documented path not marked
/// optional is in at least one report.
pub fn check_schema(schema: &str, reports: &[serde_json::Value]) {
    let all = schemas();
    let s = all
        .get(schema)
        .unwrap_or_else(|| panic!("docs/json-schema.md: no `## {schema}` schema"));
    let other = all
        .iter()
        .find(|(k, _)| k.starts_with("gatecal.gate-dist/") && k.as_str() != schema)
        .map(|(_, v)| v);
    let documented = doc_paths(s, other);
    assert!(
        documented.len() > 40,
        "docs/json-schema.md `{schema}`: too few paths read: {documented:?}"
    );
    let seen: BTreeSet<String> = reports.iter().flat_map(key_paths).collect();
    for r in reports {
        assert_eq!(r["schema"], schema);
    }
    let undocumented: Vec<&String> = seen
        .iter()
        .filter(|p| !documented.iter().any(|d| matches(&d.path, p)))
        .collect();
    let unseen: Vec<&str> = documented
        .iter()
        .filter(|d| !d.optional && !seen.iter().any(|p| matches(&d.path, p)))
        .map(|d| d.path.as_str())
        .collect();
    assert!(
        undocumented.is_empty() && unseen.is_empty(),
        "docs/json-schema.md `{schema}`:\n  key paths of the reports it does not document: \
         {undocumented:#?}\n  paths it documents that no report holds (mark them \
         `only when …` if they are conditional): {unseen:#?}"
    );
}
