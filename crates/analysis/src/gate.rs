//! The gate input of every decision ([`sample`]) and what is computed from
//! it: the reorder buffer that puts decisions back in log-time order
//! ([`reorder`]), the reconstruction with its per-endpoint queue model
//! ([`reconstruct`], [`queue`]), the replays under other configs
//! ([`whatif`]), and the distributions a report holds ([`stats`], on the
//! signed histogram of [`hist`]; traced decisions in [`traced`]).

pub mod hdr_v2;
pub mod hist;
pub mod queue;
pub mod reconstruct;
pub mod reorder;
pub mod sample;
pub mod stats;
pub mod traced;
pub mod whatif;
