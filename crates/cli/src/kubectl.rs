//! `--kubectl [KUBECTL ARGS]`: the logs read straight from the cluster with
//! `kubectl logs`, run with the flags the analysis needs.
//!
//! The arguments after `--kubectl` are kubectl's own: a namespace
//! (`-n`), a context, and one label selector (`-l`) or pod name per group
//! of pods to read (`recommend` takes the EPP pods' selector and the vLLM
//! pods'). For each group, `kubectl get pods` first lists the pods and
//! their containers, then `kubectl logs` runs with `--prefix
//! --timestamps --tail=-1` (with a selector, kubectl would otherwise keep 10
//! lines a container), `--all-containers` (unless `-c` names one),
//! `--max-log-requests` set to the number of containers read, and
//! `--since-time` from the binary's own `--since` unless the arguments
//! give `--since` or `--since-time`. Its output is read as it comes, as
//! an input named `kubectl logs ARGS`; the lines of each pod and container
//! are counted on the way.
//!
//! A `kubectl logs` that fails (exits non-zero) ends its input there: the
//! lines read before are analysed and the report written, then the run
//! fails (exit 2) with kubectl's own message ([`finish`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use anyhow::{Context, bail};
use gatecal_parser::{InputFiles, ParseOptions};

/// One group of pods to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A label selector (`-l`).
    Selector(String),
    /// One pod, by name.
    Pod(String),
}

impl Target {
    /// How messages name it: `-l SELECTOR` or `pod/NAME`.
    pub fn label(&self) -> String {
        match self {
            Target::Selector(s) => format!("-l {s}"),
            Target::Pod(p) => format!("pod/{p}"),
        }
    }
}

/// The kubectl commands `--kubectl ARGS` stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Flags for both `kubectl get pods` and `kubectl logs` (namespace,
    /// context, kubeconfig, ...).
    pub global: Vec<String>,
    /// Flags for `kubectl logs` only (`-c`, `--since`, `--previous`, ...).
    pub logs: Vec<String>,
    /// The groups of pods, in the order given.
    pub targets: Vec<Target>,
    /// `-c` named one container: no `--all-containers`.
    pub container: bool,
    /// The arguments give `--since` or `--since-time`.
    pub since: bool,
}

/// Flags gatecal sets itself: given, they would change what is read.
const SET_HERE: [&str; 8] = [
    "--tail",
    "--prefix",
    "--timestamps",
    "--max-log-requests",
    "--all-containers",
    "-f",
    "--follow",
    "--selector-tail",
];

/// `kubectl logs` flags that take a value (passed to `logs` only).
const LOGS_VALUE: [&str; 6] = [
    "-c",
    "--container",
    "--since",
    "--since-time",
    "--limit-bytes",
    "--pod-running-timeout",
];

/// `kubectl logs` flags without a value (passed to `logs` only).
const LOGS_BOOL: [&str; 4] = [
    "-p",
    "--previous",
    "--ignore-errors",
    "--insecure-skip-tls-verify-backend",
];

/// kubectl's global flags that take a value.
const GLOBAL_VALUE: [&str; 19] = [
    "-n",
    "--namespace",
    "--context",
    "--kubeconfig",
    "--cluster",
    "--user",
    "-s",
    "--server",
    "--token",
    "--as",
    "--as-group",
    "--as-uid",
    "--request-timeout",
    "--certificate-authority",
    "--client-certificate",
    "--client-key",
    "--tls-server-name",
    "--cache-dir",
    "-v",
];

impl Plan {
    /// Sorts the arguments given after `--kubectl`: selectors and pod
    /// names are the groups to read; the other flags go to both commands,
    /// or to `kubectl logs` only when they are its own.
    pub fn parse(args: &[String]) -> anyhow::Result<Plan> {
        let mut plan = Plan {
            global: Vec::new(),
            logs: Vec::new(),
            targets: Vec::new(),
            container: false,
            since: false,
        };
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            i += 1;
            // `--flag=VALUE`; `-lapp=epp`, `-l=app=epp`, `-nprod`: a short
            // flag with its value attached.
            let (flag, inline) = if a.starts_with("--") {
                match a.split_once('=') {
                    Some((f, v)) => (f, Some(v.to_string())),
                    None => (a, None),
                }
            } else if a.starts_with('-') && a.len() > 2 && a.is_char_boundary(2) {
                let v = &a[2..];
                (&a[..2], Some(v.strip_prefix('=').unwrap_or(v).to_string()))
            } else {
                (a, None)
            };
            let mut value = |what: &str| -> anyhow::Result<String> {
                if let Some(v) = &inline {
                    return Ok(v.clone());
                }
                let v = args
                    .get(i)
                    .with_context(|| format!("--kubectl: {what} needs a value"))?;
                i += 1;
                Ok(v.clone())
            };
            if flag == "-l" || flag == "--selector" {
                let v = value(flag)?;
                if v.is_empty() {
                    bail!("--kubectl: {flag} needs a label selector");
                }
                plan.targets.push(Target::Selector(v));
            } else if SET_HERE.contains(&flag) {
                bail!(
                    "--kubectl: {flag} is set by gatecal (it runs kubectl logs with --prefix \
                     --timestamps --tail=-1 --all-containers --max-log-requests); leave it out"
                );
            } else if LOGS_VALUE.contains(&flag) {
                let v = value(flag)?;
                plan.container |= flag == "-c" || flag == "--container";
                plan.since |= flag == "--since" || flag == "--since-time";
                plan.logs.extend(flag_value(flag, v));
            } else if LOGS_BOOL.contains(&flag) {
                plan.logs.push(a.to_string());
            } else if GLOBAL_VALUE.contains(&flag) {
                let v = value(flag)?;
                plan.global.extend(flag_value(flag, v));
            } else if a.starts_with('-') {
                // Another flag of kubectl's: a switch, or `--flag=value`.
                plan.global.push(a.to_string());
            } else {
                let (kind, name) = a.split_once('/').unwrap_or(("pod", a));
                if !matches!(kind, "pod" | "pods" | "po") {
                    bail!(
                        "--kubectl: {a}: kubectl logs reads one pod of a {kind}; give its pods' \
                         label selector instead (-l KEY=VALUE; `kubectl get {kind} NAME -o \
                         jsonpath='{{.spec.selector.matchLabels}}'` prints it)"
                    );
                }
                if name.is_empty() {
                    bail!("--kubectl: {a}: no pod name");
                }
                plan.targets.push(Target::Pod(name.to_string()));
            }
        }
        if plan.targets.is_empty() {
            bail!(
                "--kubectl: give the pods to read: a label selector (-l \
                 llm-d-router-gateway=<release>-epp for the EPP pods of the llm-d-router-gateway \
                 chart) or pod names"
            );
        }
        Ok(plan)
    }

    /// The arguments of `kubectl get` for a target (`-o json`).
    pub fn get_args(&self, t: &Target) -> Vec<String> {
        let mut v = vec!["get".to_string()];
        match t {
            Target::Selector(s) => {
                v.push("pods".into());
                v.push(format!("--selector={s}"));
            }
            Target::Pod(p) => {
                v.push("pod".into());
                v.push(p.clone());
            }
        }
        v.extend(self.global.iter().cloned());
        v.push("--output=json".into());
        v
    }

    /// The arguments of `kubectl logs` for a target whose pods run
    /// `streams` containers in all; `since` is the start of the time range
    /// (epoch seconds), unless the arguments give one.
    pub fn logs_args(&self, t: &Target, streams: usize, since: Option<f64>) -> Vec<String> {
        let mut v = vec!["logs".to_string()];
        match t {
            Target::Selector(s) => v.push(format!("--selector={s}")),
            Target::Pod(p) => v.push(format!("pod/{p}")),
        }
        v.extend(self.global.iter().cloned());
        v.extend(self.logs.iter().cloned());
        v.extend(["--prefix", "--timestamps", "--tail=-1"].map(String::from));
        if !self.container {
            v.push("--all-containers".into());
        }
        if matches!(t, Target::Selector(_)) {
            v.push(format!("--max-log-requests={}", streams.max(1)));
        }
        if !self.since
            && let Some(ts) = since
        {
            let u = gatecal_render::num::utc(ts);
            v.push(format!("--since-time={}Z", u.replacen(' ', "T", 1)));
        }
        v
    }
}

/// A flag and its value as kubectl's arguments: `--long=VALUE`, or `-s`
/// and `VALUE` (two arguments).
fn flag_value(flag: &str, v: String) -> Vec<String> {
    if flag.starts_with("--") {
        vec![format!("{flag}={v}")]
    } else {
        vec![flag.to_string(), v]
    }
}

/// A pod `kubectl get` listed: its name and the number of its containers
/// (init containers too: `--all-containers` reads them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    /// The pod's name.
    pub name: String,
    /// Its containers.
    pub containers: usize,
}

/// The pods of a `kubectl get pods -o json` (a `List`) or `kubectl get pod
/// NAME -o json` (one `Pod`) answer.
pub fn pods_of(json: &[u8]) -> Result<Vec<Pod>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("not a JSON answer: {e}"))?;
    let one = |p: &serde_json::Value| -> Result<Pod, String> {
        let name = p["metadata"]["name"]
            .as_str()
            .ok_or("a pod without metadata.name")?;
        let n = |k: &str| p["spec"][k].as_array().map_or(0, Vec::len);
        Ok(Pod {
            name: name.to_string(),
            containers: n("containers") + n("initContainers"),
        })
    };
    match (v["kind"].as_str(), v["items"].as_array()) {
        (_, Some(items)) => items.iter().map(one).collect(),
        (Some("Pod"), None) => Ok(vec![one(&v)?]),
        _ => Err("neither a list of pods nor a pod".into()),
    }
}

/// What one `kubectl logs` read, as it goes.
#[derive(Debug, Default)]
struct Read_ {
    /// Lines per `(pod, container)` of the `[pod/NAME/CONTAINER] ` prefix.
    lines: BTreeMap<(String, String), u64>,
    /// Lines without that prefix.
    unprefixed: u64,
    /// How it failed, if it did.
    failure: Option<String>,
}

/// One `kubectl logs` of a run.
#[derive(Debug)]
struct Run {
    target: Target,
    pods: Vec<Pod>,
    read: Arc<Mutex<Read_>>,
}

/// The `kubectl logs` runs of this process (one `--kubectl` a process),
/// and whether `-q` was given.
static RUNS: Mutex<(Vec<Run>, bool)> = Mutex::new((Vec::new(), false));

fn runs() -> MutexGuard<'static, (Vec<Run>, bool)> {
    RUNS.lock().unwrap_or_else(|p| p.into_inner())
}

fn lock(r: &Mutex<Read_>) -> MutexGuard<'_, Read_> {
    r.lock().unwrap_or_else(|p| p.into_inner())
}

/// The command line as shown in messages.
fn shown(bin: &OsString, args: &[String]) -> String {
    let mut s = bin.to_string_lossy().into_owned();
    for a in args {
        s.push(' ');
        s.push_str(a);
    }
    s
}

/// Most bytes of kubectl's stderr kept for a message.
const STDERR_KEPT: usize = 4096;

/// kubectl's stderr, its last lines, made one line.
fn stderr_text(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    let s = s.trim();
    let start = s.len().saturating_sub(STDERR_KEPT);
    let mut cut = start;
    while !s.is_char_boundary(cut) {
        cut += 1;
    }
    s[cut..].lines().collect::<Vec<_>>().join(" / ")
}

/// Runs `kubectl get` for a target: its pods.
fn list_pods(bin: &OsString, plan: &Plan, t: &Target) -> anyhow::Result<Vec<Pod>> {
    let args = plan.get_args(t);
    let cmd = shown(bin, &args);
    let out = Command::new(bin)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            anyhow::anyhow!(
                "--kubectl: cannot run {}: {e} (install kubectl, or give its path with --kubectl-bin)",
                bin.to_string_lossy()
            )
        })?;
    if !out.status.success() {
        bail!(
            "--kubectl: `{cmd}` failed ({}): {}",
            out.status,
            stderr_text(&out.stderr)
        );
    }
    let pods = pods_of(&out.stdout).map_err(|e| anyhow::anyhow!("--kubectl: `{cmd}`: {e}"))?;
    if pods.is_empty() {
        bail!(
            "--kubectl: no pod matches {} (`{cmd}` listed none): check the selector and the \
             namespace (-n)",
            t.label()
        );
    }
    Ok(pods)
}

/// `kubectl logs` as read: its stdout, with its lines counted per pod;
/// at the end of its output, its exit status (a failure is kept for
/// [`finish`], and the input simply ends).
struct Stream {
    child: Child,
    out: ChildStdout,
    stderr: Option<JoinHandle<Vec<u8>>>,
    read: Arc<Mutex<Read_>>,
    command: String,
    /// The start of the current line (its prefix), at most [`HEAD`] bytes.
    head: Vec<u8>,
    /// Whether the current line has bytes.
    open: bool,
    done: bool,
}

/// Bytes of a line's start kept to read its `[pod/NAME/CONTAINER] ` prefix.
const HEAD: usize = 512;

impl Stream {
    fn count(&mut self, bytes: &[u8]) {
        let mut read = lock(&self.read);
        let mut rest = bytes;
        while !rest.is_empty() {
            let (part, end) = match memchr(b'\n', rest) {
                Some(i) => (&rest[..i], Some(i)),
                None => (rest, None),
            };
            let room = HEAD.saturating_sub(self.head.len());
            self.head.extend_from_slice(&part[..part.len().min(room)]);
            self.open = true;
            match end {
                Some(i) => {
                    close_line(&mut read, &self.head);
                    self.head.clear();
                    self.open = false;
                    rest = &rest[i + 1..];
                }
                None => rest = &[],
            }
        }
    }

    fn end(&mut self, error: Option<io::Error>) {
        self.done = true;
        if self.open {
            close_line(&mut lock(&self.read), &self.head);
            self.open = false;
        }
        let status = self.child.wait();
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let failure = match (error, status) {
            (Some(e), _) => Some(format!("reading its output: {e})")),
            (None, Err(e)) => Some(format!("waiting for it: {e})")),
            (None, Ok(s)) if !s.success() => Some(format!("{s}): {}", stderr_text(&stderr))),
            _ => None,
        };
        if let Some(f) = failure {
            lock(&self.read).failure = Some(format!("`{}` failed ({f}", self.command));
        }
    }
}

fn memchr(b: u8, s: &[u8]) -> Option<usize> {
    s.iter().position(|&c| c == b)
}

/// Counts one line by its prefix.
fn close_line(read: &mut Read_, head: &[u8]) {
    match prefix_of(head) {
        Some((pod, container)) => *read.lines.entry((pod, container)).or_default() += 1,
        None => read.unprefixed += 1,
    }
}

/// The pod and container of a `[pod/NAME/CONTAINER] ` prefix.
fn prefix_of(line: &[u8]) -> Option<(String, String)> {
    let rest = line.strip_prefix(b"[pod/")?;
    let end = memchr(b']', rest)?;
    let inner = std::str::from_utf8(&rest[..end]).ok()?;
    let (pod, container) = inner.split_once('/')?;
    Some((pod.to_string(), container.to_string()))
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        loop {
            match self.out.read(buf) {
                Ok(0) => {
                    self.end(None);
                    return Ok(0);
                }
                Ok(n) => {
                    self.count(&buf[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.end(Some(e));
                    return Ok(0);
                }
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Lists each target's pods and adds its `kubectl logs` to `files`, as a
/// stream read when the inputs are (its start is read now). `since`
/// (epoch seconds) is the binary's `--since`, for `--since-time`.
pub fn add_streams(
    files: &mut InputFiles,
    bin: &OsString,
    args: &[String],
    since: Option<f64>,
    opts: &ParseOptions,
    quiet: bool,
) -> anyhow::Result<()> {
    let plan = Plan::parse(args)?;
    let mut listed = Vec::new();
    for t in &plan.targets {
        listed.push((t.clone(), list_pods(bin, &plan, t)?));
    }
    runs().1 = quiet;
    for (t, pods) in listed {
        let streams = if plan.container {
            pods.len()
        } else {
            pods.iter().map(|p| p.containers.max(1)).sum()
        };
        let args = plan.logs_args(&t, streams, since);
        let command = shown(bin, &args);
        let mut child = Command::new(bin)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("--kubectl: cannot run `{command}`"))?;
        let out = child.stdout.take().context("kubectl's stdout")?;
        let mut err = child.stderr.take().context("kubectl's stderr")?;
        // Drained as it comes, so that a chatty kubectl never blocks.
        let stderr = std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * STDERR_KEPT {
                    kept.drain(..kept.len() - STDERR_KEPT);
                }
            }
            kept
        });
        let read = Arc::new(Mutex::new(Read_::default()));
        let stream = Stream {
            child,
            out,
            stderr: Some(stderr),
            read: read.clone(),
            command,
            head: Vec::new(),
            open: false,
            done: false,
        };
        let display = format!("kubectl logs {}", t.label());
        files.push_stream(display, None, Box::new(stream), opts);
        runs().0.push(Run {
            target: t,
            pods,
            read,
        });
    }
    Ok(())
}

/// What the `kubectl logs` runs read, one line a pod and container, for
/// stderr; empty without `--kubectl`.
pub fn summary() -> Vec<String> {
    let g = runs();
    let mut out = Vec::new();
    for run in &g.0 {
        let read = lock(&run.read);
        let total: u64 = read.lines.values().sum::<u64>() + read.unprefixed;
        out.push(format!(
            "kubectl logs {}: {} pod(s), {} line(s)",
            run.target.label(),
            run.pods.len(),
            gatecal_render::num::group(total as i64)
        ));
        for p in &run.pods {
            let mut any = false;
            for ((pod, container), n) in read.lines.range((p.name.clone(), String::new())..) {
                if *pod != p.name {
                    break;
                }
                any = true;
                out.push(format!(
                    "  {pod}/{container}: {} line(s)",
                    gatecal_render::num::group(*n as i64)
                ));
            }
            if !any {
                out.push(format!("  {}: 0 lines", p.name));
            }
        }
        // Pods that started after `kubectl get` listed them.
        for ((pod, container), n) in &read.lines {
            if !run.pods.iter().any(|p| p.name == *pod) {
                out.push(format!(
                    "  {pod}/{container}: {} line(s) (not listed by kubectl get)",
                    gatecal_render::num::group(*n as i64)
                ));
            }
        }
        if read.unprefixed > 0 {
            out.push(format!(
                "  {} line(s) without a [pod/NAME/CONTAINER] prefix",
                gatecal_render::num::group(read.unprefixed as i64)
            ));
        }
    }
    out
}

/// The end of a run with `--kubectl`: lists on stderr (unless `-q`) the
/// pods read and the lines of each, and fails when a `kubectl logs`
/// failed. The report over the lines read before was written (`result`
/// is the run's own outcome); a run that found no decision because kubectl
/// failed reports the failure, which is the cause.
pub fn finish(bin: &str, result: anyhow::Result<()>) -> anyhow::Result<()> {
    let lines = summary();
    let (failures, quiet) = {
        let g = runs();
        let f: Vec<String> =
            g.0.iter()
                .filter_map(|r| lock(&r.read).failure.clone())
                .collect();
        (f, g.1)
    };
    if !quiet && !lines.is_empty() {
        crate::term::eprint(bin, crate::term::Level::Note, &lines[0]);
        for l in &lines[1..] {
            if l.starts_with("kubectl logs") {
                crate::term::eprint(bin, crate::term::Level::Note, l);
            } else {
                eprintln!("{}", gatecal_render::escape::terminal(l));
            }
        }
    }
    if failures.is_empty() {
        return result;
    }
    let mut msg = format!(
        "--kubectl: {}; the report covers the lines read before",
        failures.join("; ")
    );
    if let Err(e) = result {
        msg.push_str(&format!(" (and: {e:#})"));
    }
    Err(anyhow::anyhow!(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> anyhow::Result<Plan> {
        Plan::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn selectors_and_pods_are_targets_other_flags_shared() {
        let p = plan(&[
            "-n",
            "prod",
            "-l",
            "app=epp",
            "--context=c1",
            "-lapp=vllm",
            "pod/one",
            "two",
            "-c",
            "epp",
            "--since=2h",
        ])
        .unwrap();
        assert_eq!(
            p.targets,
            [
                Target::Selector("app=epp".into()),
                Target::Selector("app=vllm".into()),
                Target::Pod("one".into()),
                Target::Pod("two".into())
            ]
        );
        assert_eq!(p.global, ["-n", "prod", "--context=c1"]);
        assert_eq!(p.logs, ["-c", "epp", "--since=2h"]);
        assert!(p.container && p.since);
        let logs = p.logs_args(&p.targets[0], 3, Some(0.0));
        assert_eq!(
            logs,
            [
                "logs",
                "--selector=app=epp",
                "-n",
                "prod",
                "--context=c1",
                "-c",
                "epp",
                "--since=2h",
                "--prefix",
                "--timestamps",
                "--tail=-1",
                "--max-log-requests=3"
            ]
        );
        assert_eq!(
            p.get_args(&p.targets[2]),
            [
                "get",
                "pod",
                "one",
                "-n",
                "prod",
                "--context=c1",
                "--output=json"
            ]
        );
    }

    #[test]
    fn since_time_from_the_binary_and_all_containers_by_default() {
        let p = plan(&["-l", "app=epp"]).unwrap();
        let logs = p.logs_args(&p.targets[0], 4, Some(1_787_320_800.5));
        assert!(logs.contains(&"--all-containers".to_string()), "{logs:?}");
        assert!(logs.contains(&"--max-log-requests=4".to_string()));
        assert!(
            logs.contains(&"--since-time=2026-08-21T14:00:00Z".to_string()),
            "{logs:?}"
        );
        assert!(
            !p.logs_args(&p.targets[0], 4, None)
                .iter()
                .any(|a| a.starts_with("--since"))
        );
    }

    #[test]
    fn flags_set_here_no_target_and_other_kinds_are_refused() {
        for (args, want) in [
            (vec!["-l", "a=b", "--tail=10"], "--tail is set by gatecal"),
            (vec!["-l", "a=b", "-f"], "-f is set by gatecal"),
            (vec!["-n", "prod"], "give the pods to read"),
            (vec!["deploy/epp"], "give its pods' label selector"),
            (vec!["-l"], "-l needs a value"),
        ] {
            let e = plan(&args).unwrap_err().to_string();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn pods_of_a_list_and_of_one_pod() {
        let list = br#"{"kind":"List","items":[
            {"metadata":{"name":"a"},"spec":{"containers":[{"name":"epp"},{"name":"side"}]}},
            {"metadata":{"name":"b"},"spec":{"containers":[{"name":"epp"}],"initContainers":[{"name":"i"}]}}]}"#;
        assert_eq!(
            pods_of(list).unwrap(),
            [
                Pod {
                    name: "a".into(),
                    containers: 2
                },
                Pod {
                    name: "b".into(),
                    containers: 2
                }
            ]
        );
        let one = br#"{"kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{}]}}"#;
        assert_eq!(pods_of(one).unwrap()[0].name, "x");
        assert!(pods_of(b"{}").unwrap_err().contains("neither"));
        assert!(pods_of(b"nope").unwrap_err().contains("not a JSON"));
    }

    #[test]
    fn lines_are_counted_by_prefix_across_reads() {
        let mut r = Read_::default();
        let mut head = Vec::new();
        for chunk in [
            &b"[pod/a/epp] 1\n[pod/"[..],
            b"b/epp] 2\nplain\n[pod/a/epp] 3",
        ] {
            for &c in chunk {
                if c == b'\n' {
                    close_line(&mut r, &head);
                    head.clear();
                } else {
                    head.push(c);
                }
            }
        }
        close_line(&mut r, &head);
        assert_eq!(r.lines[&("a".into(), "epp".into())], 2);
        assert_eq!(r.lines[&("b".into(), "epp".into())], 1);
        assert_eq!(r.unprefixed, 1);
    }
}
