//! The trace reader without its fast path: the general reader alone, which
//! the fast path is held to. For the parser's benchmark and tests; not part
//! of the API.
#![doc(hidden)]

use crate::assemble::DeploymentNaming;
use crate::{DEFAULT_DEPLOYMENT, ParseError, ParseOptions, Parsed};

/// [`crate::parse_slice`] of an uncompressed trace input, every document
/// read by the general reader.
pub fn parse_slice(name: &str, bytes: &[u8], opts: &ParseOptions) -> Result<Parsed, ParseError> {
    let mut items = Vec::new();
    let naming = DeploymentNaming::fallback(DEFAULT_DEPLOYMENT);
    let (ledger, _, _) =
        crate::trace::run_with(bytes, name, naming, opts, &mut |i| items.push(i), false)?;
    Ok(Parsed { items, ledger })
}
