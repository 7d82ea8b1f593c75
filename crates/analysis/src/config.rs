//! The filter's config: read from and written back to the EPP's own
//! config files ([`epp`]), and the config in force of each deployment's
//! filter instances, from flags, files, the log and the defaults
//! ([`in_force`]), each parameter with its source ([`source`]).

pub mod epp;
pub mod in_force;
pub mod source;
