//! The two analyses and their reports: the gate audit of `gate-dist`
//! ([`gate_dist`]), the calibration of `recommend` ([`recommend`]), and the
//! decision records both write ([`records`]).

pub mod gate_dist;
pub mod recommend;
pub mod records;
