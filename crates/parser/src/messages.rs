//! The EPP messages the parser reads: one table, [`messages!`] below, from
//! which the classifier's lookup ([`kind_of`]), the rule of which lines
//! carry the model ([`Kind::reads_model`]) and the list of every message
//! ([`MESSAGES`], which the tests hold to docs/log-formats.md) are derived.
//!
//! Recognising a new message (docs/log-formats.md, "How to recognise a new
//! message"): a [`Kind`] and a row here, then the compiler names the rest
//! (the event it builds in `classify::build`, the keys it reads in
//! `fields/keys.rs`, and, for a new [`Event`](crate::Event), where the
//! assembler applies it and whether it belongs to a request).

use crate::decision::FilterMsg;

/// The message kinds the parser reads: one per table row (a kind without
/// a row is never made, which the compiler reports as dead code), several
/// rows may share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Filter(FilterMsg),
    EndpointTtft,
    PeakResolved,
    CalibrationSkipped,
    Received,
    Profile,
    BeforeFilters,
    RunningFilter,
    FilterCompleted,
    EliminatedAll,
    FiltersCompleted,
    Score,
    TokenLoad,
    HitPercentage,
    CachedServers,
    ProduceCompleted,
    PickerCompleted,
    Handled,
    ResponseBody,
}

/// The table of messages. Each row: the kind, `=`, the message text (or
/// several, `|`-separated, for one kind), then `model` when the line's
/// model keys (`targetModelName`, `resolvedTargetModel`, `model`) are read
/// (the lines that start or name a decision; every request line repeats
/// them), else `-`. The rows of the first block are the filter's own
/// lines, written after its prefix; the others are matched whole.
///
/// [`kind_of`] is a `match` on the text after the prefix, then on the
/// whole text: the compiler's `match` on byte strings (lengths first, then
/// a comparison), which measured as fast as any table tried.
macro_rules! messages {
    (
        prefixed $prefix:literal {
            $( $pk:ident $( ( $($pa:tt)* ) )? = $ptext:literal, $pmodel:tt; )*
        }
        plain {
            $( $k:ident $( ( $($a:tt)* ) )? = $($text:literal)|+, $model:tt; )*
        }
    ) => {
        /// The prefix of the filter's own messages.
        pub(crate) const FILTER_PREFIX: &[u8] = $prefix;

        /// Looks a message up in the table of messages the parser reads.
        #[inline]
        pub(crate) fn kind_of(msg: &[u8]) -> Option<Kind> {
            if let Some(rest) = msg.strip_prefix(FILTER_PREFIX) {
                return Some(match rest {
                    $( $ptext => Kind::$pk $( ( $($pa)* ) )?, )*
                    _ => return None,
                });
            }
            Some(match msg {
                $( $($text)|+ => Kind::$k $( ( $($a)* ) )?, )*
                _ => return None,
            })
        }

        impl Kind {
            /// Whether the line's model keys are read (the table's `model`
            /// column).
            #[inline]
            pub(crate) fn reads_model(self) -> bool {
                #[allow(unreachable_patterns)]
                match self {
                    $( Kind::$pk $( ( $($pa)* ) )? => messages!(@model $pmodel), )*
                    $( Kind::$k $( ( $($a)* ) )? => messages!(@model $model), )*
                    // Kinds no row makes (`FilterMsg::None`).
                    _ => false,
                }
            }
        }

        /// Every row of the table: its prefix (empty for a whole
        /// message), its texts after the prefix, and its kind.
        #[cfg_attr(not(test), allow(dead_code))]
        pub(crate) const MESSAGES: &[(&[u8], &[&[u8]], Kind)] = &[
            $( ($prefix, &[$ptext], Kind::$pk $( ( $($pa)* ) )?), )*
            $( (b"", &[$($text),+], Kind::$k $( ( $($a)* ) )?), )*
        ];
    };
    (@model model) => { true };
    (@model -) => { false };
}

messages! {
    prefixed b"PrefixCacheAffinityFilter: " {
        Filter(FilterMsg::NarrowedToSticky) = b"narrowed to sticky", model;
        Filter(FilterMsg::TtftGateBroken) = b"TTFT load gate broken", model;
        Filter(FilterMsg::NoSticky) = b"no sticky endpoints", model;
        Filter(FilterMsg::ExplorationSkip) = b"exploration skip, keeping all", model;
        Filter(FilterMsg::EpsilonSkip) = b"epsilon skip, keeping all", model;
        Filter(FilterMsg::MissingSignal) = b"TTFT load gate skipped, missing signal", model;
        Filter(FilterMsg::TokensGateBroken) = b"in-flight tokens load gate broken", model;
        Filter(FilterMsg::RequestGateBroken) = b"in-flight request gate broken", model;
        Filter(FilterMsg::SessionCostGate) = b"session cost gate", model;
        EndpointTtft = b"calculated endpoint TTFT", model;
        PeakResolved = b"peak prefill throughput resolved", -;
        CalibrationSkipped = b"calibration skipped, keeping peakPrefillThroughput default", -;
    }
    plain {
        Score = b"Calculated score", -;
        TokenLoad = b"TokenLoadScorer scoring", -;
        Received = b"EPP received request", -;
        Handled = b"Request handled", -;
        Profile = b"Running scheduler profile", model;
        BeforeFilters = b"Before running filter plugins", -;
        RunningFilter = b"Running filter plugin", model;
        FilterCompleted = b"Completed running filter plugin successfully", model;
        EliminatedAll = b"Filter eliminated all endpoints", model;
        FiltersCompleted = b"Completed running filter plugins"
            | b"Completed running filter plugins successfully", -;
        HitPercentage = b"Computed hit percentage for prefix cache", -;
        CachedServers = b"Found cached servers", -;
        ProduceCompleted = b"Produce completed", -;
        PickerCompleted = b"Completed running picker plugin successfully", -;
        ResponseBody = b"HandleResponseBody is triggered", -;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(prefix: &[u8], rest: &[u8]) -> String {
        String::from_utf8([prefix, rest].concat()).unwrap()
    }

    /// Every row is found, as its own kind, and nothing near it is.
    #[test]
    fn every_message_is_looked_up_as_its_kind() {
        for &(prefix, texts, kind) in MESSAGES {
            for m in texts.iter().map(|rest| text(prefix, rest)) {
                assert_eq!(kind_of(m.as_bytes()), Some(kind), "{m}");
                for near in [
                    format!("{m} "),
                    m[..m.len() - 1].to_string(),
                    m.to_lowercase(),
                ] {
                    if near != m {
                        assert_eq!(kind_of(near.as_bytes()), None, "{near}");
                    }
                }
            }
        }
        assert_eq!(
            kind_of(b"PrefixCacheAffinityFilter: a future message"),
            None
        );
        assert_eq!(kind_of(b"narrowed to sticky"), None);
        assert_eq!(kind_of(b""), None);
    }

    /// The lines that start or name a decision read the model.
    #[test]
    fn model_column() {
        assert!(Kind::Filter(FilterMsg::TtftGateBroken).reads_model());
        assert!(Kind::RunningFilter.reads_model());
        assert!(!Kind::Score.reads_model());
        assert!(!Kind::Handled.reads_model());
        assert!(!Kind::Filter(FilterMsg::None).reads_model());
    }

    /// docs/log-formats.md lists every message read, spelled as logged,
    /// and so does the crate's overview.
    #[test]
    fn every_message_is_documented() {
        let docs = include_str!("../../../docs/log-formats.md");
        let overview = include_str!("lib.rs");
        for &(prefix, texts, _) in MESSAGES {
            for rest in texts {
                let m = format!("`{}`", text(prefix, rest));
                assert!(docs.contains(&m), "docs/log-formats.md does not list {m}");
                assert!(overview.contains(&m), "src/lib.rs does not list {m}");
            }
        }
    }
}
