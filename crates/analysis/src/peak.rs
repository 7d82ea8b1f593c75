//! The deployment's peak prefill throughput: from vLLM stats lines,
//! calibration output and TTFT samples ([`throughput`]), from Prometheus
//! `query_range` responses ([`prometheus`]), and where the two sources
//! disagree ([`agreement`]); the router's calibration record
//! ([`calibration_record`]).

pub mod agreement;
pub mod calibration_record;
pub mod prometheus;
pub mod throughput;
