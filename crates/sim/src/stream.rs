//! The driver: runs the deployments' models in arrival order, renders each
//! request, merges the lines of concurrent requests by emission time, and
//! writes them with the variant's framing and noise.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};

use crate::Variant;
use crate::epp::{Line, render};
use crate::model::DepState;
use crate::rng::Rng;
use crate::scenario::Scenario;
use crate::truth::TruthRecord;
use crate::zap::{Encoding, ZapLine, klog_time, rfc3339_nano_fixed};

/// What a drive produced besides the bytes.
pub(crate) struct Driven {
    /// Final model states (with jobs when collected), first epoch only.
    pub states: Vec<DepState>,
    /// Bytes written to the EPP log.
    pub bytes: u64,
    /// Start of the run, ns.
    pub start_ns: i64,
    /// End of the first epoch, ns.
    pub end_ns: i64,
}

struct Sink<'a> {
    w: &'a mut dyn Write,
    variant: Variant,
    enc: Encoding,
    /// Each deployment's EPP pods, by replica.
    pods: Vec<Vec<String>>,
    heap: BinaryHeap<Reverse<Line>>,
    bytes: u64,
    lines: u64,
    rng: Rng,
    panic_after: u64,
    panicked: bool,
    last_ns: i64,
}

impl Sink<'_> {
    fn emit(&mut self, dep: usize, at_ns: i64, text: &[u8]) -> io::Result<()> {
        self.emit_from(dep, 0, at_ns, text)
    }

    fn emit_from(&mut self, dep: usize, replica: usize, at_ns: i64, text: &[u8]) -> io::Result<()> {
        let mut buf = Vec::with_capacity(text.len() + 80);
        if self.variant.prefix {
            let pods = &self.pods[dep];
            let pod = pods
                .get(replica)
                .or(pods.first())
                .map_or("", String::as_str);
            buf.extend_from_slice(format!("[pod/{pod}/epp] ").as_bytes());
        }
        if self.variant.timestamps {
            buf.extend_from_slice(rfc3339_nano_fixed(at_ns).as_bytes());
            buf.push(b' ');
        }
        buf.extend_from_slice(text);
        buf.push(b'\n');
        self.w.write_all(&buf)?;
        self.bytes += buf.len() as u64;
        self.lines += 1;
        Ok(())
    }

    fn noise_before(&mut self, dep: usize, at_ns: i64) -> io::Result<()> {
        if !self.variant.noise {
            return Ok(());
        }
        let r = self.rng.f64();
        if r < 1.0 / 300.0 {
            let line = if self.rng.chance(0.5) {
                format!(
                    "I{}       1 leaderelection.go:257] attempting to acquire leader lease {}/epp-leader...",
                    klog_time(at_ns),
                    "llm-d"
                )
            } else {
                format!(
                    "E{}       1 reflector.go:166] \"Unhandled Error\" err=\"k8s.io/client-go@v0.33.1/tools/cache/reflector.go:285: Failed to watch *v1.Pod: the server has asked for the client to provide credentials\" logger=\"UnhandledError\"",
                    klog_time(at_ns)
                )
            };
            self.emit(dep, at_ns, line.as_bytes())?;
        } else if r < 1.0 / 300.0 + 1.0 / 900.0 {
            self.emit(dep, at_ns, b"")?;
        } else if r < 1.0 / 300.0 + 1.0 / 900.0 + 1.0 / 1500.0 {
            self.emit(
                dep,
                at_ns,
                b"\xff\xfe\xfdgarbled write \xc3\x28 from a broken pipe \xe2\x82",
            )?;
        }
        if !self.panicked && self.lines >= self.panic_after {
            self.panicked = true;
            self.write_panic(dep, at_ns)?;
        }
        Ok(())
    }

    fn write_panic(&mut self, dep: usize, at_ns: i64) -> io::Result<()> {
        let g = 1000 + self.rng.below(9000);
        let lines: Vec<String> = vec![
            "panic: runtime error: invalid memory address or nil pointer dereference".to_string(),
            "[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x1c2f4a5]".to_string(),
            String::new(),
            format!("goroutine {g} [running]:"),
            "github.com/llm-d/llm-d-router/pkg/epp/scheduling.(*SchedulerProfile).runScorerPlugins(0xc000a1b2c0, {0x2c4e1f8, 0xc001234560}, 0xc000f0e0d0, {0xc0019a8000, 0x4, 0x4})".to_string(),
            "\t/workspace/pkg/epp/scheduling/scheduler_profile.go:247 +0x1c5".to_string(),
            "github.com/llm-d/llm-d-router/pkg/epp/scheduling.(*SchedulerProfile).Run(0xc000a1b2c0, {0x2c4e1f8, 0xc001234560}, 0xc000f0e0d0, {0xc0019a8000, 0x4, 0x4})".to_string(),
            "\t/workspace/pkg/epp/scheduling/scheduler_profile.go:136 +0x8e".to_string(),
            "github.com/llm-d/llm-d-router/pkg/epp/scheduling.(*Scheduler).Schedule(0xc0003c6f00, {0x2c4e1f8, 0xc001234500}, 0xc000f0e0d0, {0xc0019a8000, 0x4, 0x4})".to_string(),
            "\t/workspace/pkg/epp/scheduling/scheduler.go:96 +0x3f4".to_string(),
            "created by google.golang.org/grpc.(*Server).serveStreams.func2 in goroutine 211".to_string(),
            "\t/go/pkg/mod/google.golang.org/grpc@v1.74.2/server.go:1050 +0x5b".to_string(),
        ];
        for l in lines {
            self.emit(dep, at_ns, l.as_bytes())?;
        }
        Ok(())
    }

    fn write_line(&mut self, line: Line) -> io::Result<()> {
        let kubelet = line.sort_ns.max(self.last_ns) + 7_000;
        self.last_ns = kubelet;
        self.noise_before(line.dep, kubelet)?;
        self.emit_from(line.dep, line.replica, kubelet, line.text.as_bytes())
    }

    fn flush_before(&mut self, t: i64) -> io::Result<()> {
        while let Some(Reverse(top)) = self.heap.peek() {
            if top.sort_ns >= t {
                break;
            }
            if let Some(Reverse(line)) = self.heap.pop() {
                self.write_line(line)?;
            }
        }
        Ok(())
    }

    fn finish(&mut self, truncate_id: &str) -> io::Result<()> {
        self.flush_before(i64::MAX)?;
        if self.variant.noise {
            if !self.panicked {
                self.panicked = true;
                self.write_panic(0, self.last_ns)?;
            }
            // A last line cut short (rotation / --limit-bytes): a request
            // that never got further than its first line.
            let at = self.last_ns + 1_000_000;
            let line = ZapLine::new(
                self.enc,
                2,
                at,
                "handlers/server.go:451",
                "EPP received request",
            )
            .ctx(truncate_id, None)
            .finish();
            let mut buf = Vec::new();
            if self.variant.prefix {
                let pod = self.pods.first().and_then(|p| p.first());
                buf.extend_from_slice(
                    format!("[pod/{}/epp] ", pod.map_or("", String::as_str)).as_bytes(),
                );
            }
            if self.variant.timestamps {
                buf.extend_from_slice(rfc3339_nano_fixed(at).as_bytes());
                buf.push(b' ');
            }
            buf.extend_from_slice(&line.as_bytes()[..line.len() / 2]);
            self.w.write_all(&buf)?;
            self.bytes += buf.len() as u64;
        }
        self.w.flush()
    }
}

/// Runs the scenario, writing the EPP log to `w` and each truth record to
/// `on_truth`. With `target_bytes`, runs further epochs (new seeds, later
/// start) until at least that many bytes are written, and stops there.
pub(crate) fn drive(
    s: &Scenario,
    seed: u64,
    variant: &Variant,
    target_bytes: Option<u64>,
    collect_jobs: bool,
    w: &mut dyn Write,
    on_truth: &mut dyn FnMut(&TruthRecord) -> io::Result<()>,
) -> io::Result<Driven> {
    let enc = if variant.old_encoding {
        Encoding::Old
    } else {
        Encoding::Head
    };
    let start_ns = s.start_epoch_s.saturating_mul(1_000_000_000);
    let span_ns = (s.duration_s.max(0.0) * 1e9) as i64;
    let mut noise_rng = Rng::derive(seed, 99);
    let panic_after = 600 + noise_rng.below(900);
    let mut sink = Sink {
        w,
        variant: variant.clone(),
        enc,
        pods: s.deployments.iter().map(|d| d.epp_pods()).collect(),
        heap: BinaryHeap::new(),
        bytes: 0,
        lines: 0,
        rng: noise_rng,
        panic_after,
        panicked: false,
        last_ns: start_ns,
    };
    let mut first_states = Vec::new();
    let mut seq = 0u64;
    let mut lines = Vec::new();
    let mut truth = Vec::new();
    let mut epoch = 0u64;
    'epochs: loop {
        let e_seed = if epoch == 0 {
            seed
        } else {
            seed.wrapping_add(epoch.wrapping_mul(0x9E37_79B9))
        };
        // The routing's seed moves with the epoch as the run's does.
        let r_seed = match s.routing_seed {
            Some(r) if epoch > 0 => r.wrapping_add(epoch.wrapping_mul(0x9E37_79B9)),
            Some(r) => r,
            None => e_seed,
        };
        let e_start = start_ns + epoch as i64 * span_ns;
        let e_end = e_start + span_ns;
        let mut states: Vec<DepState> = s
            .deployments
            .iter()
            .enumerate()
            .map(|(i, d)| {
                DepState::new(
                    d,
                    i,
                    e_seed,
                    r_seed,
                    e_start,
                    e_end,
                    collect_jobs && epoch == 0,
                )
            })
            .collect();
        let mut render_rng = Rng::derive(e_seed, 77);
        let mut requests = 0u64;
        let epoch_start_bytes = sink.bytes + sink.heap.len() as u64;
        loop {
            let next = states
                .iter()
                .enumerate()
                .filter(|(_, st)| st.has_next())
                .min_by_key(|(i, st)| (st.next_arrival_ns, *i))
                .map(|(i, _)| i);
            let Some(i) = next else { break };
            let dep = &s.deployments[i];
            let Some(req) = states[i].step(dep) else {
                continue;
            };
            requests += 1;
            sink.flush_before(req.arrival_ns)?;
            if let Some((a, b)) = s.log_window {
                let f = (req.arrival_ns - e_start) as f64 / span_ns.max(1) as f64;
                if f < a || f >= b {
                    continue;
                }
            }
            lines.clear();
            truth.clear();
            render(
                dep,
                &states[i],
                &req,
                enc,
                variant.full_dumps,
                variant.producers_v5,
                &mut render_rng,
                &mut seq,
                &mut lines,
                &mut truth,
            );
            for t in &truth {
                on_truth(t)?;
            }
            for l in lines.drain(..) {
                sink.heap.push(Reverse(l));
            }
            if target_bytes.is_some_and(|tb| sink.bytes >= tb) {
                if epoch == 0 {
                    first_states = states;
                }
                break 'epochs;
            }
        }
        if epoch == 0 {
            first_states = states;
        }
        epoch += 1;
        match target_bytes {
            Some(tb)
                if sink.bytes < tb
                    && requests > 0
                    && sink.bytes + sink.heap.len() as u64 > epoch_start_bytes =>
            {
                continue;
            }
            _ => break,
        }
    }
    let truncate_id = Rng::derive(seed, 123).uuid();
    sink.finish(&truncate_id)?;
    Ok(Driven {
        states: first_states,
        bytes: sink.bytes,
        start_ns,
        end_ns: start_ns + span_ns,
    })
}
