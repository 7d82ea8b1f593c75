//! One candidate endpoint as the filter sees it.

use serde::{Deserialize, Serialize};

/// One endpoint offered to the filter, with the attributes the filter reads.
/// Every attribute may be absent, as an endpoint attribute can be in the EPP.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Endpoint id, `namespace/name` (or `name`).
    pub id: String,
    /// `PrefixCacheMatchInfo.MatchBlocks()`: blocks of the prompt cached here.
    pub match_blocks: Option<i64>,
    /// `PrefixCacheMatchInfo.TotalBlocks()`: blocks of the prompt considered.
    pub total_blocks: Option<i64>,
    /// `PrefixCacheMatchInfo.BlockSizeTokens()`: tokens per block.
    pub block_size_tokens: Option<i64>,
    /// `InFlightLoad.Tokens`: uncached prompt tokens in flight, excluding the
    /// current request.
    pub in_flight_tokens: Option<i64>,
    /// `InFlightLoad.Requests`: requests in flight.
    pub in_flight_requests: Option<i64>,
    /// `LatencyPredictionInfo.TTFT()` in ms, on the predictor path.
    pub predicted_ttft_ms: Option<f64>,
}

impl Candidate {
    /// A candidate with only an id.
    pub fn new(id: impl Into<String>) -> Candidate {
        Candidate {
            id: id.into(),
            ..Candidate::default()
        }
    }

    /// Sets the prefix match attribute.
    pub fn with_match(mut self, match_blocks: i64, total_blocks: i64, block_size: i64) -> Self {
        self.match_blocks = Some(match_blocks);
        self.total_blocks = Some(total_blocks);
        self.block_size_tokens = Some(block_size);
        self
    }

    /// Sets the in-flight tokens.
    pub fn with_in_flight_tokens(mut self, tokens: i64) -> Self {
        self.in_flight_tokens = Some(tokens);
        self
    }

    /// Sets the in-flight requests.
    pub fn with_in_flight_requests(mut self, requests: i64) -> Self {
        self.in_flight_requests = Some(requests);
        self
    }

    /// Sets the predicted TTFT.
    pub fn with_predicted_ttft_ms(mut self, ms: f64) -> Self {
        self.predicted_ttft_ms = Some(ms);
        self
    }

    /// The prefix cache score `MatchBlocks / TotalBlocks`; 0 when the match
    /// attribute is absent, `TotalBlocks <= 0`, or the ratio is NaN.
    pub fn prefix_score(&self) -> f64 {
        match (self.match_blocks, self.total_blocks) {
            (Some(m), Some(t)) if t > 0 => {
                let s = m as f64 / t as f64;
                if s.is_nan() { 0.0 } else { s }
            }
            _ => 0.0,
        }
    }

    /// Tokens of the request cached here, `MatchBlocks * BlockSizeTokens`;
    /// 0 when either is absent (the break-even test is then skipped).
    pub fn matched_tokens(&self) -> i64 {
        match (self.match_blocks, self.block_size_tokens) {
            (Some(m), Some(b)) => m.saturating_mul(b),
            _ => 0,
        }
    }

    /// Prompt tokens this endpoint has not cached,
    /// `(TotalBlocks - MatchBlocks) * BlockSizeTokens`; `None` without match info.
    pub fn uncached_tokens(&self) -> Option<i64> {
        match (self.match_blocks, self.total_blocks, self.block_size_tokens) {
            (Some(m), Some(t), Some(b)) => Some(t.saturating_sub(m).saturating_mul(b)),
            _ => None,
        }
    }
}
