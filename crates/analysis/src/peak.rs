//! The deployment's peak prefill throughput: from vLLM stats lines,
//! calibration output and TTFT samples ([`throughput`]), from Prometheus
//! `query_range` responses ([`prometheus`]), and where the two sources
//! disagree ([`agreement`]); the router's calibration record
//! ([`calibration_record`]).

pub mod agreement;
pub mod calibration_record;
pub mod prometheus;
pub mod throughput;

/// The peak from calibration output (`text`): the router's calibration
/// record (`peak_prefill_tokens_per_second`, status `OK`,
/// `calibration_record::estimate_from_record`), else the lines and TTFT
/// samples `throughput::from_calibration_lines` reads. `None` when the
/// text holds none.
pub fn from_calibration_text(text: &str) -> Option<throughput::PeakEstimate> {
    calibration_record::estimate_from_record(text)
        .or_else(|| throughput::from_calibration_lines(text))
}
