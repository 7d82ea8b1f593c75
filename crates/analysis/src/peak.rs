//! The deployment's peak prefill throughput: from vLLM stats lines,
//! calibration output and TTFT samples ([`throughput`]), from Prometheus
//! `query_range` responses ([`prometheus`]), and where the two sources
//! disagree ([`agreement`]).

pub mod agreement;
pub mod prometheus;
pub mod throughput;
