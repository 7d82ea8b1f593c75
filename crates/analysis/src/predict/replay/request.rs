//! One request of the logged traffic, as the replay needs it.

/// One request of the logged traffic, as the replay needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Arrival at the EPP, seconds (any origin; the replay only subtracts).
    pub arrival_s: f64,
    /// Prompt tokens (the filter's match fraction is over them).
    pub prompt_tokens: f64,
    /// Uncached tokens on an endpoint that does not hold the session (it
    /// holds the prefix every prompt shares).
    pub cold_tokens: f64,
    /// Uncached tokens on an endpoint that holds the session's last prompt.
    pub warm_tokens: f64,
    /// The session the request belongs to: its prompt extends the prompts of
    /// the session's earlier requests. `None`: shares only the common prefix.
    pub session: Option<u64>,
    /// The earlier request whose answer this one follows, by index into the
    /// request list, when it is a closed loop (see `think_s`).
    pub parent: Option<usize>,
    /// Seconds between the parent's response end and this arrival, when the
    /// request waited for its parent's answer (closed loop).
    pub think_s: Option<f64>,
    /// Seconds from the first token to the end of the response.
    pub decode_s: f64,
    /// The filter's exploration draw for this request, in `[0, 1]`.
    pub draw: f64,
    /// When the logged response ended, if the log shows it (seconds).
    pub logged_end_s: Option<f64>,
    /// Endpoints that held the request's prefix in the log (its sticky
    /// endpoints), for a workload inferred from a log (`session` is then
    /// `None`): the replay holds the prefix there, except that the holder
    /// where `prefix_parent` was served in the log is replaced by the
    /// endpoint the replay sent it to.
    pub holders: Vec<usize>,
    /// The earlier request (index) whose prompt this one extends, when known.
    pub prefix_parent: Option<usize>,
    /// The endpoint the request was sent to in the log.
    pub logged_endpoint: Option<usize>,
    /// The uncached tokens the log shows on endpoints that did not hold the
    /// request's prefix (a shared prefix cached on some endpoints only):
    /// used in place of `cold_tokens` there.
    pub logged_cold: Vec<(usize, f64)>,
    /// Endpoints that had served nothing in the log when the request
    /// arrived: their logged uncached count is that of a cache holding
    /// nothing, not even the prefix every prompt shares.
    pub unserved: Vec<usize>,
    /// The request's uncached tokens on an endpoint that holds the prefix
    /// every prompt shares and not the request's own (`cold_tokens` less
    /// that prefix, when the log shows its size): used in place of the
    /// logged count on an endpoint of `unserved` once the replay has
    /// served something there.
    pub served_cold: Option<f64>,
    /// Whether the log's filter released the request's pin (`Some(false)`:
    /// it held it, or found nothing to hold), when the log shows the
    /// outcome.
    pub logged_release: Option<bool>,
}

impl Request {
    /// A request of `prompt_tokens` arriving at `arrival_s`, nothing of it
    /// cached anywhere, of no session, open loop, that never explores.
    pub fn new(arrival_s: f64, prompt_tokens: f64) -> Request {
        Request {
            arrival_s,
            prompt_tokens,
            cold_tokens: prompt_tokens,
            warm_tokens: prompt_tokens,
            session: None,
            parent: None,
            think_s: None,
            decode_s: 0.0,
            draw: 1.0,
            logged_end_s: None,
            holders: Vec::new(),
            prefix_parent: None,
            logged_endpoint: None,
            logged_cold: Vec::new(),
            unserved: Vec::new(),
            served_cold: None,
            logged_release: None,
        }
    }
}
