//! The prefix producers' block sizes, read from their plugin entries
//! ([`producer_block_sizes`]).

use serde_json::Value;

use super::{
    EppConfigError, Node, PLUGIN_TYPE, Texts, each_document, explain_template, walk_plugins,
};
use crate::input::{
    BlockSize, BlockSizeSource, DEFAULT_APPROXIMATE_BLOCK_SIZE, ProducerBlockSizes,
};

/// The approximate prefix producer's plugin type.
pub const APPROXIMATE_PRODUCER_TYPE: &str = "approx-prefix-cache-producer";

/// The precise prefix producer's plugin type, and the scorer that wraps one
/// (older configs).
pub const PRECISE_PRODUCER_TYPES: [&str; 2] = [
    "precise-prefix-cache-producer",
    "precise-prefix-cache-scorer",
];

/// The approximate producer's floor on its block size, tokens.
const APPROXIMATE_MIN_BLOCK_SIZE: i64 = 64;

/// The default of both producers' `blockSizeTokens`.
const UPSTREAM_BLOCK_SIZE_TOKENS: i64 = 16;

/// One plugin entry of any type.
struct PluginEntry {
    kind: String,
    name: String,
    params: Value,
    path: String,
}

/// Every plugin entry under `node` (configs held in strings included).
fn plugin_entries(
    node: &Node,
    path: &str,
    texts: &mut Texts,
    out: &mut Vec<PluginEntry>,
) -> Result<(), EppConfigError> {
    walk_plugins(node, path, 0, texts, 0, &mut |p, i, prefix, _| {
        let Some(kind) = p.get("type").and_then(Node::as_str) else {
            return Ok(());
        };
        out.push(PluginEntry {
            kind: kind.to_string(),
            name: p
                .get("name")
                .and_then(Node::as_str)
                .unwrap_or(kind)
                .to_string(),
            params: p.get("parameters").map_or(Value::Null, Node::to_value),
            path: format!("{prefix}plugins[{i}]"),
        });
        Ok(())
    })
}

/// A whole-number parameter as the EPP's JSON decoder reads it into a Go
/// `int`: absent or `null` is `None`; anything else not a whole number is
/// refused.
fn int_param(
    p: &PluginEntry,
    obj: &Value,
    key: &str,
    at: &str,
) -> Result<Option<i64>, EppConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64()),
        Some(v) => Err(EppConfigError::Producer {
            plugin: p.name.clone(),
            message: format!("{}.parameters{at}.{key}: {v} is not a whole number", p.path),
        }),
    }
}

/// The approximate producer's block size from its entry: with `autoTune`
/// off, `blockSizeTokens` (the deprecated `blockSize` when that is left at
/// its default), raised to the producer's 64-token floor; with `autoTune`
/// on (the default) the engines' block size, which no config holds.
fn approximate_block_size(p: &PluginEntry) -> Result<BlockSize, EppConfigError> {
    let auto = match p.params.get("autoTune") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(EppConfigError::Producer {
                plugin: p.name.clone(),
                message: format!("{}.parameters.autoTune: {v} is not a boolean", p.path),
            });
        }
    };
    let tokens =
        int_param(p, &p.params, "blockSizeTokens", "")?.unwrap_or(UPSTREAM_BLOCK_SIZE_TOKENS);
    let legacy = int_param(p, &p.params, "blockSize", "")?.unwrap_or(0);
    let tokens = if legacy > 0 && tokens == UPSTREAM_BLOCK_SIZE_TOKENS {
        legacy
    } else {
        tokens
    };
    let at = format!("{} ({APPROXIMATE_PRODUCER_TYPE} {})", p.path, p.name);
    if auto {
        let mut d = BlockSize {
            tokens: DEFAULT_APPROXIMATE_BLOCK_SIZE,
            source: BlockSizeSource::Assumed,
            detail: format!(
                "{at}: autoTune on, so the engines' block size (vLLM's default 16 assumed), raised to the producer's 64-token floor"
            ),
        };
        if tokens != UPSTREAM_BLOCK_SIZE_TOKENS {
            d.detail.push_str(&format!(
                "; its blockSizeTokens {tokens} applies only while the engines report none"
            ));
        }
        return Ok(d);
    }
    if tokens <= 0 {
        return Err(EppConfigError::Producer {
            plugin: p.name.clone(),
            message: format!(
                "{}.parameters.blockSizeTokens: must be > 0 when autoTune is false, got {tokens}",
                p.path
            ),
        });
    }
    let floor = tokens < APPROXIMATE_MIN_BLOCK_SIZE;
    Ok(BlockSize {
        tokens: tokens.max(APPROXIMATE_MIN_BLOCK_SIZE),
        source: BlockSizeSource::Config,
        detail: format!(
            "{at}: blockSizeTokens {tokens}, autoTune false{}",
            if floor {
                ", raised to the producer's 64-token floor"
            } else {
                ""
            }
        ),
    })
}

/// The precise producer's block size from its entry:
/// `tokenProcessorConfig.blockSizeTokens`, else the deprecated
/// `tokenProcessorConfig.blockSize`, else 16.
fn precise_block_size(p: &PluginEntry) -> Result<BlockSize, EppConfigError> {
    let at = format!("{} ({} {})", p.path, p.kind, p.name);
    let tpc = p.params.get("tokenProcessorConfig").unwrap_or(&Value::Null);
    let (tokens, how) = match tpc {
        Value::Null => (
            UPSTREAM_BLOCK_SIZE_TOKENS,
            "no tokenProcessorConfig: its default".to_string(),
        ),
        Value::Object(_) => {
            let new = int_param(p, tpc, "blockSizeTokens", ".tokenProcessorConfig")?.unwrap_or(0);
            let old = int_param(p, tpc, "blockSize", ".tokenProcessorConfig")?.unwrap_or(0);
            match (new, old) {
                (0, 0) => (
                    UPSTREAM_BLOCK_SIZE_TOKENS,
                    "tokenProcessorConfig without a block size: its default".to_string(),
                ),
                (0, b) => (b, format!("tokenProcessorConfig.blockSize {b}")),
                (b, _) => (b, format!("tokenProcessorConfig.blockSizeTokens {b}")),
            }
        }
        v => {
            return Err(EppConfigError::Producer {
                plugin: p.name.clone(),
                message: format!(
                    "{}.parameters.tokenProcessorConfig: {v} is not a mapping",
                    p.path
                ),
            });
        }
    };
    if tokens <= 0 {
        return Err(EppConfigError::Producer {
            plugin: p.name.clone(),
            message: format!(
                "{}.parameters.tokenProcessorConfig: blockSizeTokens must be greater than 0, got {tokens}",
                p.path
            ),
        });
    }
    Ok(BlockSize {
        tokens,
        source: BlockSizeSource::Config,
        detail: format!("{at}: {how}"),
    })
}

/// The prefix producers' block sizes in a config file (the shapes
/// `find_filters` reads): each producer's entry, the one a filter names
/// with `prefixMatchInfoProducerName` first when there are several of a
/// kind, else the first; [`ProducerBlockSizes::default`] for a producer
/// the file does not hold (the framework then runs one on defaults).
///
/// The approximate producer's size comes from the file only with
/// `autoTune: false`; with `autoTune` on (its default) the producer takes
/// the engines' KV block size, which is assumed to be vLLM's default.
///
/// ```
/// use gatecal_analysis::producer_block_sizes;
/// use gatecal_analysis::BlockSizeSource;
/// let yaml = "plugins:\n- type: approx-prefix-cache-producer\n  parameters: {autoTune: false, blockSizeTokens: 128}\n- type: precise-prefix-cache-producer\n  parameters:\n    tokenProcessorConfig: {blockSize: 64}\n";
/// let b = producer_block_sizes(yaml).unwrap();
/// assert_eq!(b.approximate_producer.tokens, 128);
/// assert_eq!(b.approximate_producer.source, BlockSizeSource::Config);
/// assert_eq!(b.precise_producer.tokens, 64);
/// ```
pub fn producer_block_sizes(text: &str) -> Result<ProducerBlockSizes, EppConfigError> {
    let mut all = Vec::new();
    each_document(text, &mut |d, path, texts| {
        plugin_entries(d, path, texts, &mut all)
    })
    .map_err(|e| explain_template(text, e))?;
    let named: Vec<&str> = all
        .iter()
        .filter(|p| p.kind == PLUGIN_TYPE)
        .filter_map(|p| p.params.get("prefixMatchInfoProducerName")?.as_str())
        .collect();
    let mut out = ProducerBlockSizes::default();
    let pick = |is: &dyn Fn(&str) -> bool,
                size: &dyn Fn(&PluginEntry) -> Result<BlockSize, EppConfigError>|
     -> Result<Option<BlockSize>, EppConfigError> {
        let of_kind: Vec<&PluginEntry> = all.iter().filter(|p| is(&p.kind)).collect();
        let sizes = of_kind
            .iter()
            .map(|p| size(p))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(i) = of_kind
            .iter()
            .position(|p| named.contains(&p.name.as_str()))
            .or((!of_kind.is_empty()).then_some(0))
        else {
            return Ok(None);
        };
        let mut chosen = sizes[i].clone();
        let others: Vec<String> = of_kind
            .iter()
            .zip(&sizes)
            .enumerate()
            .filter(|(j, (_, s))| *j != i && s.tokens != chosen.tokens)
            .map(|(_, (p, s))| format!("{} {}", p.name, s.tokens))
            .collect();
        if !others.is_empty() {
            chosen.detail.push_str(&format!(
                "; other instances of other block sizes, not used: {}",
                others.join(", ")
            ));
        }
        Ok(Some(chosen))
    };
    if let Some(b) = pick(&|k| k == APPROXIMATE_PRODUCER_TYPE, &approximate_block_size)? {
        out.approximate_producer = b;
    }
    if let Some(b) = pick(
        &|k| PRECISE_PRODUCER_TYPES.contains(&k),
        &precise_block_size,
    )? {
        out.precise_producer = b;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::epp::tests::RAW;

    const RAW_FILTER_ONLY: &str =
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {maxTTFTPenaltyMs: 5000}\n";

    #[test]
    fn producer_block_sizes_from_every_shape() {
        use crate::input::BlockSizeSource;
        // No producer: the upstream defaults, assumed.
        let b = producer_block_sizes(RAW_FILTER_ONLY).unwrap();
        assert_eq!(b, ProducerBlockSizes::default());
        assert_eq!(b.approximate_producer.source, BlockSizeSource::Assumed);
        // autoTune on (the default): the engines' size, assumed, whatever
        // blockSizeTokens says.
        let b = producer_block_sizes(RAW).unwrap();
        assert_eq!(b.approximate_producer.tokens, 64);
        assert_eq!(b.approximate_producer.source, BlockSizeSource::Assumed);
        assert!(
            b.approximate_producer.detail.contains("plugins[0]"),
            "{}",
            b.approximate_producer.detail
        );
        // In a ConfigMap: the instance the filter names wins; the precise
        // producer's deprecated key is read; below 64 is floored.
        let cm = "\
apiVersion: v1
kind: ConfigMap
data:
  config.yaml: |
    plugins:
    - name: cpu
      type: approx-prefix-cache-producer
      parameters: {autoTune: false, blockSizeTokens: 256}
    - name: gpu
      type: approx-prefix-cache-producer
      parameters: {autoTune: false, blockSizeTokens: 128}
    - type: precise-prefix-cache-scorer
      parameters:
        tokenProcessorConfig: {blockSize: 32}
    - type: prefix-cache-affinity-filter
      parameters: {prefixMatchInfoProducerName: gpu}
";
        let b = producer_block_sizes(cm).unwrap();
        assert_eq!(b.approximate_producer.tokens, 128);
        assert_eq!(b.approximate_producer.source, BlockSizeSource::Config);
        assert!(
            b.approximate_producer.detail.contains("not used: cpu 256"),
            "{}",
            b.approximate_producer.detail
        );
        assert_eq!(b.precise_producer.tokens, 32);
        assert_eq!(b.precise_producer.source, BlockSizeSource::Config);
        let floor = "plugins:\n- type: approx-prefix-cache-producer\n  parameters: {autoTune: false, blockSizeTokens: 16}\n";
        assert_eq!(
            producer_block_sizes(floor)
                .unwrap()
                .approximate_producer
                .tokens,
            64
        );
        // What the EPP refuses is refused, naming the entry.
        for bad in [
            "plugins:\n- type: approx-prefix-cache-producer\n  parameters: {autoTune: false, blockSizeTokens: 12.5}\n",
            "plugins:\n- type: approx-prefix-cache-producer\n  parameters: {autoTune: \"no\"}\n",
            "plugins:\n- type: precise-prefix-cache-producer\n  parameters: {tokenProcessorConfig: {blockSizeTokens: -4}}\n",
        ] {
            let e = producer_block_sizes(bad).unwrap_err().to_string();
            assert!(e.contains("plugins[0].parameters"), "{e}");
        }
    }
}
