//! Log framings other than `kubectl logs`: each file's (or stream's) framing
//! is detected from its first lines, and its lines are rewritten into the
//! `kubectl logs --prefix --timestamps` framing the rest of the parser reads
//! (`[pod/POD/CONTAINER] TIMESTAMP LINE`), so the pod and container of every
//! line come from the framing as they would from a kubectl capture.
//!
//! | framing | a line | pod and container from |
//! |---|---|---|
//! | stern | `POD CONTAINER LINE`, `POD CONTAINER TIMESTAMP LINE` (`--timestamps`) | the line |
//! | stern JSON (`-o json`, `-o extjson`) | `{"message": …, "podName": …, "containerName": …}` | the record |
//! | logcli (default output) | `TIMESTAMP {LABELS} LINE` | the labels |
//! | logcli `--output=jsonl` | `{"labels": {…}, "line": …, "timestamp": …}` | the labels |
//! | CRI (kubelet's files under `/var/log/pods`) | `TIMESTAMP STREAM F LINE`, long lines split into `P` parts | the path `<ns>_<pod>_<uid>/<container>/N.log` |
//! | Docker json-file | `{"log": "LINE\n", "stream": …, "time": …}` | the path, when under `/var/log/pods` |
//! | Fluent Bit, Vector, OpenTelemetry collector | `{"log"` / `"message"` / `"body": LINE, "kubernetes": {"pod_name", "container_name"}` or `"resource": {"k8s.pod.name", "k8s.container.name"}`, a time field} | the record |
//! | Loki `query_range` answer | one JSON document: `data.result[].stream` labels and `values` `[ns, LINE]` | the labels |
//!
//! A file whose later lines are in another of these framings is an error
//! naming both. A line of the file's own framing that cannot be read (a
//! cut JSON record, say) is passed on as it is, and counted malformed
//! where the parser reads it. CRI `P` parts are joined with the `F` line
//! that ends them (a partial line left at the end of the input is passed
//! on as it stands); the input ledger counts the joined lines.

use std::io::{self, BufRead, Read};

use serde_json::Value;

/// A framing this module rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `POD CONTAINER [TIMESTAMP] LINE`.
    Stern,
    /// `TIMESTAMP {LABELS} LINE`.
    Logcli,
    /// `TIMESTAMP STREAM F|P LINE`.
    Cri,
    /// One JSON record per line carrying the log line in a field.
    JsonRecord,
    /// A Loki `query_range` answer (one JSON document).
    LokiQueryRange,
    /// Zipkin's JSON spans: refused, with what to give instead.
    Zipkin,
}

impl Framing {
    /// The framing's name, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Framing::Stern => "stern",
            Framing::Logcli => "logcli",
            Framing::Cri => "CRI (kubelet log file)",
            Framing::JsonRecord => "JSON log records (Docker, Fluent Bit, Vector, logcli jsonl)",
            Framing::LokiQueryRange => "Loki query_range JSON",
            Framing::Zipkin => "Zipkin JSON spans",
        }
    }
}

/// Largest Loki `query_range` document read (it is read whole).
pub const MAX_LOKI_DOCUMENT_BYTES: usize = 256 << 20;

/// Lines of a head looked at for the framing.
const DETECT_LINES: usize = 16;

/// The framing of a file from its first bytes, when it is one of
/// [`Framing`]'s (`None` for plain lines and `kubectl logs` captures).
pub(crate) fn detect(head: &[u8]) -> Option<Framing> {
    let start = head.iter().position(|c| !c.is_ascii_whitespace())?;
    let body = &head[start..];
    if body.starts_with(b"{") && is_loki_head(body) || is_metric_array_head(body) {
        return Some(Framing::LokiQueryRange);
    }
    if is_zipkin_head(body) {
        return Some(Framing::Zipkin);
    }
    body.split(|&c| c == b'\n')
        .map(trim_cr)
        .filter(|l| !l.is_empty())
        .take(DETECT_LINES)
        .find_map(line_framing)
}

/// The framing of one line, if it is one of the line framings.
fn line_framing(line: &[u8]) -> Option<Framing> {
    if line.starts_with(b"[pod/") {
        return None;
    }
    if line.first() == Some(&b'{') {
        return json_record(line).map(|_| Framing::JsonRecord);
    }
    if let Some((_, rest)) = split_time(line) {
        if rest.first() == Some(&b'{') && labels(rest).is_some() {
            return Some(Framing::Logcli);
        }
        if cri_fields(rest).is_some() {
            return Some(Framing::Cri);
        }
        return None;
    }
    stern_fields(line).map(|_| Framing::Stern)
}

fn trim_cr(l: &[u8]) -> &[u8] {
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// `YYYY-MM-DDTHH:MM:SS…` up to the first space, and what follows it.
fn split_time(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let sp = memchr::memchr(b' ', &line[..line.len().min(64)])?;
    let t = &line[..sp];
    crate::time::parse_rfc3339(t)?;
    Some((t, &line[sp + 1..]))
}

/// A Kubernetes object name: lowercase alphanumerics, `-` and `.`.
fn is_k8s_name(b: &[u8]) -> bool {
    !b.is_empty()
        && b.len() <= 253
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'.')
        && b[0].is_ascii_alphanumeric()
}

/// stern's `POD CONTAINER REST`, where REST is a JSON line or starts with
/// a timestamp.
fn stern_fields(line: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let a = memchr::memchr(b' ', line)?;
    let pod = &line[..a];
    let rest = &line[a + 1..];
    let b = memchr::memchr(b' ', rest)?;
    let container = &rest[..b];
    let rest = &rest[b + 1..];
    if !(is_k8s_name(pod) && is_k8s_name(container)) {
        return None;
    }
    let looks = rest.first() == Some(&b'{') || split_time(rest).is_some();
    looks.then_some((pod, container, rest))
}

/// CRI's `STREAM F|P LINE` after the timestamp: (partial, line).
fn cri_fields(rest: &[u8]) -> Option<(bool, &[u8])> {
    let rest = rest
        .strip_prefix(b"stdout ")
        .or_else(|| rest.strip_prefix(b"stderr "))?;
    let (tag, line) = match rest.iter().position(|&c| c == b' ') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &rest[rest.len()..]),
    };
    // The tag is `F` or `P`, possibly with more `:`-separated tags.
    match tag.split(|&c| c == b':').next() {
        Some(b"F") => Some((false, line)),
        Some(b"P") => Some((true, line)),
        _ => None,
    }
}

/// A stream's labels, in order.
type Labels = Vec<(String, String)>;

/// logcli's `{k="v", …}` label set and what follows it.
fn labels(rest: &[u8]) -> Option<(Labels, &[u8])> {
    let mut out = Vec::new();
    let mut i = 1;
    let b = rest;
    loop {
        while b.get(i) == Some(&b' ') || b.get(i) == Some(&b',') {
            i += 1;
        }
        if b.get(i) == Some(&b'}') {
            i += 1;
            break;
        }
        let eq = i + b.get(i..)?.iter().position(|&c| c == b'=')?;
        let key = std::str::from_utf8(&b[i..eq]).ok()?.trim().to_string();
        if key.is_empty() || !key.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
            return None;
        }
        if b.get(eq + 1) != Some(&b'"') {
            return None;
        }
        let mut j = eq + 2;
        let mut val = Vec::new();
        loop {
            match *b.get(j)? {
                b'\\' => {
                    val.push(*b.get(j + 1)?);
                    j += 2;
                }
                b'"' => break,
                c => {
                    val.push(c);
                    j += 1;
                }
            }
        }
        out.push((key, String::from_utf8(val).ok()?));
        i = j + 1;
    }
    let line = b.get(i..)?;
    let line = line.strip_prefix(b" ").unwrap_or(line);
    Some((out, line))
}

/// Pod and container from a label map (Loki, logcli).
fn pod_from_labels<'a>(
    get: impl Fn(&str) -> Option<&'a str>,
) -> (Option<&'a str>, Option<&'a str>) {
    let pod = ["pod", "pod_name", "k8s_pod_name", "kubernetes_pod_name"]
        .iter()
        .find_map(|k| get(k));
    let container = [
        "container",
        "container_name",
        "k8s_container_name",
        "kubernetes_container_name",
    ]
    .iter()
    .find_map(|k| get(k));
    (pod, container)
}

/// One JSON record's log line, pod, container and time (as written).
struct Record {
    line: String,
    pod: Option<String>,
    container: Option<String>,
    time: Option<String>,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut v = v;
    for k in path {
        v = v.get(*k)?;
    }
    v.as_str()
}

/// A JSON log record of one of the collectors (see the module docs), or
/// `None` when the line is not one (an EPP zap line has `msg`).
fn json_record(line: &[u8]) -> Option<Record> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let obj = v.as_object()?;
    if obj.contains_key("msg") {
        return None;
    }
    let text = ["log", "message", "line", "body"]
        .iter()
        .find_map(|k| match obj.get(*k)? {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => o.get("stringValue")?.as_str().map(str::to_string),
            _ => None,
        })?;
    let text = text.strip_suffix('\n').unwrap_or(&text).to_string();
    let text = text.strip_suffix('\r').unwrap_or(&text).to_string();
    let pod = str_at(&v, &["kubernetes", "pod_name"])
        .or_else(|| str_at(&v, &["podName"]))
        .or_else(|| str_at(&v, &["resource", "k8s.pod.name"]))
        .or_else(|| str_at(&v, &["attributes", "k8s.pod.name"]))
        .or_else(|| str_at(&v, &["k8s.pod.name"]))
        .or_else(|| pod_from_labels(|k| str_at(&v, &["labels", k])).0);
    let container = str_at(&v, &["kubernetes", "container_name"])
        .or_else(|| str_at(&v, &["containerName"]))
        .or_else(|| str_at(&v, &["resource", "k8s.container.name"]))
        .or_else(|| str_at(&v, &["attributes", "k8s.container.name"]))
        .or_else(|| str_at(&v, &["k8s.container.name"]))
        .or_else(|| pod_from_labels(|k| str_at(&v, &["labels", k])).1);
    let time = ["time", "timestamp", "@timestamp", "date", "ts"]
        .iter()
        .find_map(|k| match obj.get(*k)? {
            Value::String(s) if crate::time::parse_rfc3339(s.as_bytes()).is_some() => {
                Some(s.clone())
            }
            Value::String(s) => s.parse::<i128>().ok().and_then(ns_to_rfc3339),
            Value::Number(n) => n.as_f64().and_then(seconds_to_rfc3339),
            _ => None,
        })
        .or_else(|| {
            str_at(&v, &["timeUnixNano"])
                .and_then(|s| s.parse::<i128>().ok())
                .and_then(ns_to_rfc3339)
        });
    Some(Record {
        line: text,
        pod: pod.map(str::to_string),
        container: container.map(str::to_string),
        time,
    })
}

/// Epoch seconds (a float, as Fluent Bit writes) as RFC3339 with
/// nanoseconds.
fn seconds_to_rfc3339(s: f64) -> Option<String> {
    if !s.is_finite() || !(0.0..4.1e9).contains(&s) {
        return None;
    }
    ns_to_rfc3339((s * 1e9).round() as i128)
}

/// Epoch nanoseconds as `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`, within the
/// parser's time range.
fn ns_to_rfc3339(ns: i128) -> Option<String> {
    if !(0..4_102_444_800_000_000_000).contains(&ns) {
        return None;
    }
    let secs = (ns / 1_000_000_000) as i64;
    let frac = (ns % 1_000_000_000) as i64;
    let (y, m, d) = crate::time::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:09}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    ))
}

/// Appends one line in the `kubectl logs --prefix --timestamps` framing.
fn push_line(
    out: &mut Vec<u8>,
    pod: Option<&str>,
    container: Option<&str>,
    time: Option<&[u8]>,
    line: &[u8],
) {
    if let Some(p) = pod.filter(|p| !p.is_empty() && !p.contains([' ', ']', '/'])) {
        out.extend_from_slice(b"[pod/");
        out.extend_from_slice(p.as_bytes());
        out.push(b'/');
        out.extend_from_slice(container.unwrap_or("").as_bytes());
        out.extend_from_slice(b"] ");
    }
    if let Some(t) = time {
        out.extend_from_slice(t);
        out.push(b' ');
    }
    // A line's own newlines would split it: the parser reads one line.
    for &c in line {
        out.push(if c == b'\n' { b' ' } else { c });
    }
    out.push(b'\n');
}

/// Pod and container of a kubelet log file from its path
/// (`…/<namespace>_<pod>_<uid>/<container>/<n>.log`).
pub(crate) fn pod_from_path(path: &std::path::Path) -> Option<(String, String)> {
    let mut parts = path.components().rev().map(|c| c.as_os_str().to_str());
    let _file = parts.next()??;
    let container = parts.next()??;
    let dir = parts.next()??;
    let mut f = dir.split('_');
    let (_ns, pod, _uid) = (f.next()?, f.next()?, f.next()?);
    (f.next().is_none() && is_k8s_name(pod.as_bytes()) && is_k8s_name(container.as_bytes()))
        .then(|| (pod.to_string(), container.to_string()))
}

/// Lines buffered per refill of a [`Reframed`] reader.
const BATCH_BYTES: usize = 256 << 10;

/// A reader that rewrites a framed stream into kubectl's framing.
pub(crate) struct Reframed<R> {
    inner: io::BufReader<R>,
    framing: Framing,
    /// Pod and container when the framing does not carry them (CRI, Docker).
    from_path: Option<(String, String)>,
    out: Vec<u8>,
    pos: usize,
    /// CRI: the `P` parts of the line being joined, and its timestamp.
    partial: Vec<u8>,
    partial_time: Vec<u8>,
    line: Vec<u8>,
    line_no: u64,
    cap: usize,
    done: bool,
}

impl<R: Read> Reframed<R> {
    /// `cap`: the longest line kept (longer ones are passed on as they
    /// are, for the parser to count as too long).
    pub(crate) fn new(
        inner: R,
        framing: Framing,
        from_path: Option<(String, String)>,
        cap: usize,
    ) -> Self {
        Reframed {
            inner: io::BufReader::with_capacity(64 << 10, inner),
            framing,
            from_path,
            out: Vec::new(),
            pos: 0,
            partial: Vec::new(),
            partial_time: Vec::new(),
            line: Vec::new(),
            line_no: 0,
            cap,
            done: false,
        }
    }

    fn path_pod(&self) -> (Option<&str>, Option<&str>) {
        match &self.from_path {
            Some((p, c)) => (Some(p.as_str()), Some(c.as_str())),
            None => (None, None),
        }
    }

    /// Writes the CRI parts joined so far as one line.
    fn flush_partial(&mut self) {
        let joined = std::mem::take(&mut self.partial);
        let time = std::mem::take(&mut self.partial_time);
        let (pod, container) = match &self.from_path {
            Some((p, c)) => (Some(p.as_str()), Some(c.as_str())),
            None => (None, None),
        };
        push_line(&mut self.out, pod, container, Some(&time), &joined);
    }

    fn mixed(&self, other: Framing) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "line {} is in the {} framing, but the input began in the {} framing: \
                 capture each source to its own file",
                self.line_no,
                other.name(),
                self.framing.name()
            ),
        )
    }

    /// Reads the whole Loki document and writes its entries, oldest first.
    fn loki(&mut self) -> io::Result<()> {
        let mut doc = Vec::new();
        (&mut self.inner)
            .take(MAX_LOKI_DOCUMENT_BYTES as u64 + 1)
            .read_to_end(&mut doc)?;
        if doc.len() > MAX_LOKI_DOCUMENT_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a Loki query_range answer over {} MiB: page the query by time \
                     (logcli --batch, or several --from/--to ranges)",
                    MAX_LOKI_DOCUMENT_BYTES >> 20
                ),
            ));
        }
        let v: Value = serde_json::from_slice(&doc).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a Loki query_range answer: invalid JSON ({e})"),
            )
        })?;
        drop(doc);
        let result = v
            .get("data")
            .filter(|d| d.get("resultType").and_then(Value::as_str) == Some("streams"))
            .and_then(|d| d.get("result"))
            .and_then(Value::as_array)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, not_streams(&v)))?;
        let mut entries: Vec<(i128, usize, &str)> = Vec::new();
        let mut streams: Vec<(Option<&str>, Option<&str>)> = Vec::new();
        for s in result {
            let labels = s.get("stream");
            let (pod, container) =
                pod_from_labels(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str));
            streams.push((pod, container));
            for e in s
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let ts = e
                    .get(0)
                    .and_then(Value::as_str)
                    .and_then(|t| t.parse::<i128>().ok());
                let line = e.get(1).and_then(Value::as_str);
                match (ts, line) {
                    (Some(ts), Some(line)) => entries.push((ts, streams.len() - 1, line)),
                    _ => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "a Loki stream entry that is not [\"<unix ns>\", \"<line>\"]",
                        ));
                    }
                }
            }
        }
        entries.sort_by_key(|&(ts, s, _)| (ts, s));
        for (ts, s, line) in entries {
            let (pod, container) = streams[s];
            let t = ns_to_rfc3339(ts);
            push_line(
                &mut self.out,
                pod,
                container,
                t.as_deref().map(str::as_bytes),
                line.as_bytes(),
            );
        }
        Ok(())
    }

    /// Rewrites one line of a line framing into `out`.
    fn one(&mut self) -> io::Result<()> {
        let line = std::mem::take(&mut self.line);
        let raw = trim_cr(line.strip_suffix(b"\n").unwrap_or(&line));
        self.line_no += 1;
        if raw.len() > self.cap || raw.iter().all(u8::is_ascii_whitespace) {
            self.out.extend_from_slice(raw);
            self.out.push(b'\n');
            self.line = line;
            return Ok(());
        }
        let handled = match self.framing {
            Framing::Stern => stern_fields(raw).map(|(pod, container, rest)| {
                let (pod, container) = (
                    String::from_utf8_lossy(pod),
                    String::from_utf8_lossy(container),
                );
                push_line(&mut self.out, Some(&pod), Some(&container), None, rest);
            }),
            Framing::Logcli => split_time(raw)
                .and_then(|(t, rest)| Some((t, labels(rest)?)))
                .map(|(t, (labels, rest))| {
                    let get =
                        |k: &str| labels.iter().find(|(l, _)| l == k).map(|(_, v)| v.as_str());
                    let (pod, container) = pod_from_labels(get);
                    push_line(&mut self.out, pod, container, Some(t), rest);
                }),
            Framing::Cri => split_time(raw)
                .and_then(|(t, rest)| Some((t, cri_fields(rest)?)))
                .map(|(t, (partial, text))| {
                    if self.partial.is_empty() {
                        self.partial_time.clear();
                        self.partial_time.extend_from_slice(t);
                    }
                    self.partial.extend_from_slice(text);
                    if !partial || self.partial.len() > self.cap {
                        self.flush_partial();
                    }
                }),
            Framing::JsonRecord => json_record(raw).map(|r| {
                let (path_pod, path_container) = self.path_pod();
                let pod = r.pod.as_deref().or(path_pod).map(str::to_string);
                let container = r
                    .container
                    .as_deref()
                    .or(path_container)
                    .map(str::to_string);
                push_line(
                    &mut self.out,
                    pod.as_deref(),
                    container.as_deref(),
                    r.time.as_deref().map(str::as_bytes),
                    r.line.as_bytes(),
                );
            }),
            Framing::LokiQueryRange | Framing::Zipkin => Some(()),
        };
        if handled.is_none() {
            if let Some(other) = line_framing(raw).filter(|&f| f != self.framing) {
                return Err(self.mixed(other));
            }
            // Not readable in the file's framing: passed on as it is.
            self.out.extend_from_slice(raw);
            self.out.push(b'\n');
        }
        self.line = line;
        self.line.clear();
        Ok(())
    }

    fn refill(&mut self) -> io::Result<()> {
        self.out.clear();
        self.pos = 0;
        if self.done {
            return Ok(());
        }
        if self.framing == Framing::LokiQueryRange {
            self.done = true;
            return self.loki();
        }
        if self.framing == Framing::Zipkin {
            self.done = true;
            return Err(io::Error::new(io::ErrorKind::InvalidData, ZIPKIN));
        }
        while self.out.len() < BATCH_BYTES {
            self.line.clear();
            let n = (&mut self.inner)
                .take(self.cap as u64 + 2)
                .read_until(b'\n', &mut self.line)?;
            if n == 0 {
                self.done = true;
                if !self.partial.is_empty() {
                    self.flush_partial();
                }
                break;
            }
            if self.line.last() != Some(&b'\n') && n as u64 > self.cap as u64 {
                // Longer than the cap: pass the rest of it through unread.
                let mut rest = Vec::new();
                self.inner.read_until(b'\n', &mut rest)?;
                self.out.extend_from_slice(&self.line);
                self.out.extend_from_slice(&rest);
                if self.out.last() != Some(&b'\n') {
                    self.out.push(b'\n');
                }
                self.line_no += 1;
                continue;
            }
            self.one()?;
        }
        Ok(())
    }
}

impl<R: Read> Read for Reframed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.out.len() {
            self.refill()?;
        }
        let n = buf.len().min(self.out.len() - self.pos);
        buf[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Whether a file's first bytes start a Loki `query_range` answer.
fn is_loki_head(body: &[u8]) -> bool {
    let head = &body[..body.len().min(4096)];
    let has = |k: &[u8]| memchr::memmem::find(head, k).is_some();
    has(b"\"data\"") && (has(b"\"resultType\"") || has(b"\"result\"")) && !has(b"\"msg\"")
}

/// Whether a file's first bytes start a bare array of query results
/// (`[{"metric":{…},"value":[…]}, …]`, what `promtool query instant -o
/// json` prints, or `"values"` for a range query): metrics, refused with
/// [`not_streams`]'s message rather than read as log lines.
fn is_metric_array_head(body: &[u8]) -> bool {
    let Some(rest) = body.strip_prefix(b"[") else {
        return false;
    };
    let start = rest.iter().position(|c| !c.is_ascii_whitespace());
    let Some(first) = start.map(|i| &rest[i..]) else {
        return false;
    };
    let head = &first[..first.len().min(4096)];
    let has = |k: &[u8]| memchr::memmem::find(head, k).is_some();
    first.starts_with(b"{") && has(b"\"metric\"") && (has(b"\"value\"") || has(b"\"values\""))
}

/// Whether a file's first bytes start Zipkin's JSON: an array of spans
/// (`[{"traceId": …, "id": …, "name": …, "localEndpoint": …}, …]`, v2;
/// `annotations`/`binaryAnnotations` in v1), or the array of such arrays
/// that Zipkin's `/api/v2/traces` answers.
fn is_zipkin_head(body: &[u8]) -> bool {
    let skip = |b: &[u8]| {
        b.iter()
            .position(|c| !c.is_ascii_whitespace())
            .unwrap_or(b.len())
    };
    let Some(mut rest) = body.strip_prefix(b"[") else {
        return false;
    };
    rest = &rest[skip(rest)..];
    if let Some(inner) = rest.strip_prefix(b"[") {
        rest = &inner[skip(inner)..];
    }
    if !rest.starts_with(b"{") {
        return false;
    }
    let head = &rest[..rest.len().min(4096)];
    let has = |k: &[u8]| memchr::memmem::find(head, k).is_some();
    has(b"\"traceId\"")
        && has(b"\"id\"")
        && (has(b"\"localEndpoint\"")
            || has(b"\"remoteEndpoint\"")
            || has(b"\"annotations\"")
            || has(b"\"binaryAnnotations\"")
            || has(b"\"timestamp\""))
}

/// The message for Zipkin's JSON.
const ZIPKIN: &str = "Zipkin JSON spans: gatecal reads OpenTelemetry traces (OTLP/JSON as the \
     Collector's file exporter writes it, Tempo's and Jaeger's query answers), not Zipkin's \
     format: export the EPP's spans through an OpenTelemetry Collector with the file exporter, \
     or fetch them from Jaeger's /api/traces";

/// The message for a JSON document of query results that holds no log
/// streams: it names the answer it saw (a metric query's `vector`,
/// `matrix`, `scalar` or `string`, from Prometheus or a Loki metric query)
/// and what to give instead.
fn not_streams(v: &Value) -> String {
    let first = |r: Option<&Value>| -> Option<&'static str> {
        let e = r?.as_array()?.first()?;
        if e.get("values").is_some() {
            Some("matrix")
        } else if e.get("value").is_some() {
            Some("vector")
        } else {
            None
        }
    };
    let kind = match v {
        Value::Array(_) => first(Some(v)),
        _ => v
            .get("data")
            .and_then(|d| d.get("resultType"))
            .and_then(Value::as_str)
            .and_then(|t| {
                ["vector", "matrix", "scalar", "string"]
                    .into_iter()
                    .find(|k| *k == t)
            }),
    };
    match kind {
        Some("vector") => "a Prometheus instant-query answer (resultType \"vector\": one sample \
             per series), not a log: it holds no decision and no rate. For the peak, \
             recommend reads a range query: save /api/v1/query_range?query=…&start=…&end=…&step=15s \
             (resultType \"matrix\") and pass that file to recommend; for decisions, pass the \
             EPP's log"
            .to_string(),
        Some("matrix") => "a Prometheus query_range answer (resultType \"matrix\"), not a log: \
             recommend reads it for the peak (pass it to recommend); gate-dist reads the EPP's log"
            .to_string(),
        Some(k) => format!(
            "a Prometheus query answer (resultType \"{k}\"), not a log: pass the EPP's log, \
             or a query_range answer (resultType \"matrix\") to recommend"
        ),
        None => "not a Loki query_range answer of log streams: no data.result with \
             resultType \"streams\""
            .to_string(),
    }
}

/// `head` rewritten into kubectl's framing when it is in another one (for
/// sniffing a file found in a folder); `None` when it is not.
pub(crate) fn reframed_head(head: &[u8], path: Option<&std::path::Path>) -> Option<Vec<u8>> {
    let framing = detect(head)?;
    let from_path = path.and_then(pod_from_path);
    let mut r = Reframed::new(head, framing, from_path, 1 << 20);
    let mut out = Vec::new();
    // A head cut mid-document (Loki) or mid-line is read as far as it goes.
    let _ = r.read_to_end(&mut out);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZAP: &str = r#"{"level":"info","ts":"2026-08-21T14:36:14.123Z","msg":"EPP received request","x-request-id":"r1"}"#;

    fn rewrite(input: &str, path: Option<(&str, &str)>) -> io::Result<String> {
        let f = detect(input.as_bytes()).expect("a framing");
        let from = path.map(|(p, c)| (p.to_string(), c.to_string()));
        let mut r = Reframed::new(input.as_bytes(), f, from, 1 << 20);
        let mut out = String::new();
        r.read_to_string(&mut out)?;
        Ok(out)
    }

    #[test]
    fn plain_and_kubectl_lines_are_left_alone() {
        assert_eq!(detect(ZAP.as_bytes()), None);
        assert_eq!(detect(format!("[pod/epp-1/epp] {ZAP}").as_bytes()), None);
        assert_eq!(
            detect(format!("2026-08-21T14:36:14.1Z {ZAP}").as_bytes()),
            None
        );
        assert_eq!(
            detect(b"INFO 08-21 14:36:14 [loggers.py:123] Engine 000: Avg prompt throughput"),
            None
        );
        assert_eq!(detect(b"2026-02-10T08:15:02Z\tDEBUG\tx\ty"), None);
    }

    #[test]
    fn stern_lines_take_the_pod_and_container_from_the_line() {
        let s =
            format!("epp-7c9d8-xk2lp epp {ZAP}\nepp-7c9d8-xk2lp epp 2026-08-21T14:36:15Z {ZAP}\n");
        assert_eq!(detect(s.as_bytes()), Some(Framing::Stern));
        assert_eq!(
            rewrite(&s, None).unwrap(),
            format!(
                "[pod/epp-7c9d8-xk2lp/epp] {ZAP}\n[pod/epp-7c9d8-xk2lp/epp] 2026-08-21T14:36:15Z {ZAP}\n"
            )
        );
    }

    #[test]
    fn logcli_lines_take_the_pod_from_their_labels() {
        let s = format!(
            "2026-08-21T14:36:14.123456789Z {{container=\"epp\", namespace=\"llm\", pod=\"epp-1\"}} {ZAP}\n"
        );
        assert_eq!(detect(s.as_bytes()), Some(Framing::Logcli));
        assert_eq!(
            rewrite(&s, None).unwrap(),
            format!("[pod/epp-1/epp] 2026-08-21T14:36:14.123456789Z {ZAP}\n")
        );
        let jsonl = format!(
            "{{\"labels\":{{\"pod\":\"epp-1\",\"container\":\"epp\"}},\"line\":{},\"timestamp\":\"2026-08-21T14:36:14Z\"}}\n",
            serde_json::to_string(ZAP).unwrap()
        );
        assert_eq!(detect(jsonl.as_bytes()), Some(Framing::JsonRecord));
        assert_eq!(
            rewrite(&jsonl, None).unwrap(),
            format!("[pod/epp-1/epp] 2026-08-21T14:36:14Z {ZAP}\n")
        );
    }

    #[test]
    fn cri_partial_lines_are_joined() {
        let (a, b) = ZAP.split_at(40);
        let s = format!(
            "2026-08-21T14:36:14.1Z stdout P {a}\n2026-08-21T14:36:14.2Z stdout F {b}\n2026-08-21T14:36:15Z stderr F {ZAP}\n"
        );
        assert_eq!(detect(s.as_bytes()), Some(Framing::Cri));
        assert_eq!(
            rewrite(&s, Some(("epp-1", "epp"))).unwrap(),
            format!(
                "[pod/epp-1/epp] 2026-08-21T14:36:14.1Z {ZAP}\n[pod/epp-1/epp] 2026-08-21T14:36:15Z {ZAP}\n"
            )
        );
        // A part left at the end is passed on as it stands.
        let cut = format!("2026-08-21T14:36:14.1Z stdout P {a}\n");
        assert_eq!(
            rewrite(&cut, None).unwrap(),
            format!("2026-08-21T14:36:14.1Z {a}\n")
        );
        let p = std::path::Path::new("/var/log/pods/llm_epp-7c9d8-xk2lp_0b1c/epp/0.log");
        assert_eq!(
            pod_from_path(p),
            Some(("epp-7c9d8-xk2lp".to_string(), "epp".to_string()))
        );
        assert_eq!(pod_from_path(std::path::Path::new("/tmp/epp.log")), None);
    }

    #[test]
    fn collector_records_carry_the_line_and_the_pod() {
        let line = serde_json::to_string(ZAP).unwrap();
        let docker = format!(
            "{{\"log\":{},\"stream\":\"stdout\",\"time\":\"2026-08-21T14:36:14.5Z\"}}\n",
            serde_json::to_string(&format!("{ZAP}\n")).unwrap()
        );
        assert_eq!(
            rewrite(&docker, Some(("epp-1", "epp"))).unwrap(),
            format!("[pod/epp-1/epp] 2026-08-21T14:36:14.5Z {ZAP}\n")
        );
        let fluent = format!(
            "{{\"date\":1787322974.5,\"log\":{line},\"kubernetes\":{{\"pod_name\":\"epp-2\",\"container_name\":\"epp\"}}}}\n"
        );
        assert_eq!(
            rewrite(&fluent, None).unwrap(),
            format!("[pod/epp-2/epp] 2026-08-21T14:36:14.500000000Z {ZAP}\n")
        );
        let vector = format!(
            "{{\"message\":{line},\"kubernetes\":{{\"pod_name\":\"epp-3\",\"container_name\":\"epp\"}},\"timestamp\":\"2026-08-21T14:36:14Z\"}}\n"
        );
        assert_eq!(
            rewrite(&vector, None).unwrap(),
            format!("[pod/epp-3/epp] 2026-08-21T14:36:14Z {ZAP}\n")
        );
        let otel = format!(
            "{{\"body\":{line},\"resource\":{{\"k8s.pod.name\":\"epp-4\",\"k8s.container.name\":\"epp\"}},\"timeUnixNano\":\"1787322974000000001\"}}\n"
        );
        assert_eq!(
            rewrite(&otel, None).unwrap(),
            format!("[pod/epp-4/epp] 2026-08-21T14:36:14.000000001Z {ZAP}\n")
        );
    }

    #[test]
    fn loki_answers_are_read_oldest_first() {
        let doc = serde_json::json!({
            "status": "success",
            "data": {"resultType": "streams", "result": [
                {"stream": {"pod": "epp-b", "container": "epp"}, "values": [["1787322975000000000", ZAP]]},
                {"stream": {"pod": "epp-a", "container": "epp"}, "values": [["1787322974000000000", ZAP]]}
            ]}
        })
        .to_string();
        assert_eq!(detect(doc.as_bytes()), Some(Framing::LokiQueryRange));
        assert_eq!(
            rewrite(&doc, None).unwrap(),
            format!(
                "[pod/epp-a/epp] 2026-08-21T14:36:14.000000000Z {ZAP}\n[pod/epp-b/epp] 2026-08-21T14:36:15.000000000Z {ZAP}\n"
            )
        );
        let other = r#"{"status":"success","data":{"resultType":"table","result":[]}}"#;
        let e = rewrite(other, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("not a Loki query_range answer of log streams"),
            "{e}"
        );
    }

    #[test]
    fn metric_query_answers_are_refused_by_their_kind() {
        // The HTTP API's instant query, and promtool's bare result array.
        let vector = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"vllm:num_requests_waiting","pod":"vllm-0"},"value":[1755786974.123,"3"]}]}}"#;
        let bare =
            "[\n  {\"metric\": {\"pod\": \"vllm-0\"}, \"value\": [1755786974.1, \"3\"]}\n]\n";
        for doc in [vector, bare] {
            assert_eq!(detect(doc.as_bytes()), Some(Framing::LokiQueryRange));
            let e = rewrite(doc, None).unwrap_err().to_string();
            assert!(e.starts_with("a Prometheus instant-query answer"), "{e}");
            assert!(e.contains("/api/v1/query_range"), "{e}");
        }
        let matrix = r#"[{"metric":{"pod":"v"},"values":[[1755786974,"1"]]}]"#;
        let e = rewrite(matrix, None).unwrap_err().to_string();
        assert!(e.contains("recommend reads it for the peak"), "{e}");
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#;
        let e = rewrite(scalar, None).unwrap_err().to_string();
        assert!(e.contains("resultType \"scalar\""), "{e}");
        // A JSON array of something else stays plain lines.
        assert_eq!(detect(b"[1, 2, 3]\n"), None);
    }

    #[test]
    fn zipkin_spans_are_refused_naming_the_format() {
        let v2 = "[\n  {\n    \"traceId\": \"239b360b3fd330bd\",\n    \"id\": \"fee29c40500d8ebe\",\n    \"name\": \"filter_endpoints\",\n    \"timestamp\": 1787321395867201,\n    \"localEndpoint\": {\"serviceName\": \"llm-d-router-epp\"}\n  }\n]\n";
        let api = r#"[[{"traceId":"a","id":"b","name":"x","timestamp":1,"duration":2}]]"#;
        let v1 = r#"[{"traceId":"a","id":"b","name":"x","annotations":[],"binaryAnnotations":[]}]"#;
        for doc in [v2, api, v1] {
            assert_eq!(detect(doc.as_bytes()), Some(Framing::Zipkin), "{doc}");
            let e = rewrite(doc, None).unwrap_err().to_string();
            assert!(e.starts_with("Zipkin JSON spans"), "{e}");
            assert!(e.contains("OpenTelemetry Collector"), "{e}");
        }
        assert_eq!(detect(br#"[{"traceId":"a"}]"#), None);
    }

    #[test]
    fn a_file_mixing_two_framings_is_an_error_naming_both() {
        let s = format!("epp-1 epp {ZAP}\n2026-08-21T14:36:14Z {{pod=\"epp-1\"}} {ZAP}\n");
        let e = rewrite(&s, None).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("line 2") && m.contains("logcli") && m.contains("stern"),
            "{m}"
        );
    }

    #[test]
    fn unreadable_lines_pass_through() {
        let s = format!("epp-1 epp {ZAP}\n{{\"log\": cut\n");
        assert_eq!(
            rewrite(&s, None).unwrap(),
            format!("[pod/epp-1/epp] {ZAP}\n{{\"log\": cut\n")
        );
    }
}
