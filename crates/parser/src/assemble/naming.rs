//! Deployment naming: the precedence of names, the pod owner of an EPP or
//! endpoint pod, and the endpoint pools (connected sets of endpoints).

use super::{FxMap, split_slash};
use crate::input::pod_owner;

/// How the deployment of a decision is named, most specific first.
///
/// A deployment is one EPP and its pool. It is named, in order:
///
/// 1. `NAME` of a `NAME=PATH` input ([`DeploymentNaming::explicit`]);
/// 2. the EPP pod from the kubectl `--prefix` ([`pod_deployment`]:
///    `glm-5-2-epp-6f7c9d8b5-xk2lp` gives `glm-5-2`);
/// 3. its endpoint pool ([`PoolNames`]), named after the pods it routes to
///    (`llm/glm-5-2-decode-6d9f7c8b9-abcde-rank-0` gives `glm-5-2`), which is
///    also the name the EPP pod and the vLLM logs of those pods give;
/// 4. the namespace of the candidates (endpoints that are not pod names);
/// 5. the model;
/// 6. [`DeploymentNaming::fallback`] (`default`).
///
/// A folder or file name never names a deployment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeploymentNaming {
    /// `NAME=PATH`: always wins.
    pub explicit: Option<String>,
    /// The last resort.
    pub fallback: String,
}

impl DeploymentNaming {
    /// A naming with only a fallback name.
    pub fn fallback(name: impl Into<String>) -> DeploymentNaming {
        DeploymentNaming {
            fallback: name.into(),
            ..DeploymentNaming::default()
        }
    }

    /// A naming with an explicit name.
    pub fn explicit(name: impl Into<String>) -> DeploymentNaming {
        let name = name.into();
        DeploymentNaming {
            fallback: name.clone(),
            explicit: Some(name),
        }
    }

    /// The deployment for a line from `pod` (kubectl prefix), with the
    /// endpoint `pool`'s name, the candidates' `namespace` and the `model`
    /// as later choices (see [`DeploymentNaming`] for the order).
    pub fn resolve(
        &self,
        pod: Option<&str>,
        pool: Option<&str>,
        namespace: Option<&str>,
        model: Option<&str>,
    ) -> String {
        self.resolve_str(pod, pool, namespace, model).to_string()
    }

    /// [`DeploymentNaming::resolve`], borrowed.
    pub fn resolve_str<'a>(
        &'a self,
        pod: Option<&'a str>,
        pool: Option<&'a str>,
        namespace: Option<&'a str>,
        model: Option<&'a str>,
    ) -> &'a str {
        if let Some(e) = &self.explicit {
            return e;
        }
        if let Some(p) = pod {
            return pod_deployment(p);
        }
        pool.or(namespace).or(model).unwrap_or(&self.fallback)
    }

    /// The deployment of a trace span from its resource attributes (as the
    /// Collector's `k8sattributes` processor adds them), by the rules of
    /// [`DeploymentNaming::resolve`]: explicit `NAME=`; `k8s.deployment.name`
    /// (without a trailing `-epp`), else `k8s.pod.name` ([`pod_deployment`]);
    /// `service.name`; then the pool keys (`k8s.namespace.name`, else the
    /// model) and the fallback.
    pub fn resolve_traced(
        &self,
        deployment: Option<&str>,
        pod: Option<&str>,
        service: Option<&str>,
        pool: Option<&str>,
    ) -> String {
        if self.explicit.is_none()
            && let Some(d) = deployment
        {
            return d
                .strip_suffix("-epp")
                .filter(|o| !o.is_empty())
                .unwrap_or(d)
                .to_string();
        }
        if self.explicit.is_none()
            && pod.is_none()
            && let Some(s) = service
        {
            return s.to_string();
        }
        self.resolve(pod, None, pool, None)
    }
}

/// The deployment a pod belongs to: its owner ([`pod_owner`]) without the
/// role suffix the llm-d charts add to a release's name (`-epp` for the
/// EPP, `-decode` and `-prefill` for the model servers). So the EPP pod
/// `glm-5-2-epp-6f7c9d8b5-xk2lp` and the vLLM pods
/// `glm-5-2-decode-6d9f7c8b9-abcde` and `glm-5-2-prefill-5c8e6b7a8-fghij`
/// all give `glm-5-2`.
pub fn pod_deployment(pod: &str) -> &str {
    let owner = pod_owner(pod);
    ["-epp", "-decode", "-prefill"]
        .iter()
        .find_map(|s| owner.strip_suffix(s).filter(|o| !o.is_empty()))
        .unwrap_or(owner)
}

/// The pod behind an endpoint id, when the id names one:
/// `namespace/pod[-rank-N]` or `pod[-rank-N]` gives `pod`; an `ip:port`
/// (or any id with `:`) or a bare IP names none.
pub fn endpoint_pod(endpoint: &str) -> Option<&str> {
    let name = endpoint.rsplit('/').next().unwrap_or(endpoint);
    if name.is_empty()
        || name.contains(':')
        || name.bytes().all(|c| c.is_ascii_digit() || c == b'.')
    {
        return None;
    }
    Some(strip_rank(name))
}

/// A pod name without its rank: `pod-rank-N` (N one digit or more, the
/// last `-rank-` of the name) gives `pod`; any other name is returned
/// whole. Read from the end, with no substring searcher to build: it runs
/// for every decision's endpoints.
pub fn strip_rank(name: &str) -> &str {
    let head = name.trim_end_matches(|c: char| c.is_ascii_digit());
    match head.strip_suffix("-rank-") {
        Some(pod) if head.len() < name.len() => pod,
        _ => name,
    }
}

/// Names endpoint pools: a pool is a connected set of endpoints (two
/// endpoints are connected when they are candidates of the same request).
///
/// A request whose candidates were seen before belongs to their pool; when
/// they belong to several, those are one pool from then on, named after the
/// earliest. Otherwise the pool is named after the deployment of most of its
/// endpoint pods (see [`pod_deployment`]; the smallest name on a tie): the
/// same name in the same namespace is the same pool (a restarted pod joins
/// its Deployment's), the same name in another namespace is `NAME.NAMESPACE`.
/// So pools that share a namespace but no endpoint and no owner keep their
/// own names, and a pool keeps the name it got first (decisions emitted
/// before two pools were found connected keep the name they had).
/// Memory: one entry per endpoint, at most [`PoolNames::MAX_ENDPOINTS`];
/// past that, new endpoints are named but not remembered.
#[derive(Debug, Default)]
pub struct PoolNames {
    pool_of: FxMap<String, u32>,
    /// Each pool's name and namespace.
    pools: Vec<(String, Option<String>)>,
    /// The pools of each name, in order of creation (names are looked up
    /// without a scan of every pool: there may be tens of thousands).
    by_name: FxMap<String, Vec<u32>>,
    /// Union-find parent of each pool (a root is its own parent).
    parent: Vec<u32>,
    roots: Vec<u32>,
}

impl PoolNames {
    /// Endpoints remembered at most.
    pub const MAX_ENDPOINTS: usize = 1 << 16;

    fn find(&mut self, mut i: u32) -> u32 {
        while self.parent[i as usize] != i {
            let p = self.parent[i as usize];
            self.parent[i as usize] = self.parent[p as usize];
            i = p;
        }
        i
    }

    fn add(&mut self, name: String, ns: Option<String>) -> u32 {
        let i = self.pools.len() as u32;
        self.by_name.entry(name.clone()).or_default().push(i);
        self.pools.push((name, ns));
        self.parent.push(i);
        i
    }

    /// The pool of a request whose candidates are `endpoints`; `None` when
    /// none was seen before and none is a pod name.
    pub fn name(&mut self, endpoints: &[&str]) -> Option<&str> {
        self.name_of(endpoints.iter().copied())
    }

    /// [`PoolNames::name`] of the endpoints an iterator gives (read more
    /// than once: no list of them is made).
    pub(crate) fn name_of<'e, I>(&mut self, endpoints: I) -> Option<&str>
    where
        I: Iterator<Item = &'e str> + Clone,
    {
        let mut roots = std::mem::take(&mut self.roots);
        roots.clear();
        for e in endpoints.clone() {
            if let Some(&i) = self.pool_of.get(e) {
                let r = self.find(i);
                if !roots.contains(&r) {
                    roots.push(r);
                }
            }
        }
        let root = match roots.iter().min() {
            Some(&first) => {
                for &r in &roots {
                    self.parent[r as usize] = first;
                }
                first
            }
            None => {
                let mut owners: Vec<&str> = endpoints
                    .clone()
                    .filter_map(endpoint_pod)
                    .map(pod_deployment)
                    .collect();
                if owners.is_empty() {
                    self.roots = roots;
                    return None;
                }
                owners.sort_unstable();
                let mut best = (owners[0], 0usize);
                let mut run = (owners[0], 0usize);
                for o in &owners {
                    if *o == run.0 {
                        run.1 += 1;
                    } else {
                        run = (o, 1);
                    }
                    if run.1 > best.1 {
                        best = run;
                    }
                }
                let owner = best.0;
                let ns = endpoints
                    .clone()
                    .find_map(|e| split_slash(e).map(|(n, _)| n.to_string()));
                // The first pool named after the owner.
                let first = self
                    .by_name
                    .get(owner)
                    .and_then(|v| v.first())
                    .map(|&i| &self.pools[i as usize]);
                let name = match first {
                    Some(x) if x.1 != ns => match &ns {
                        Some(n) => format!("{owner}.{n}"),
                        None => owner.to_string(),
                    },
                    _ => owner.to_string(),
                };
                // The first pool of that name and namespace.
                let same = self
                    .by_name
                    .get(&name)
                    .and_then(|v| v.iter().copied().find(|&i| self.pools[i as usize].1 == ns));
                match same {
                    Some(i) => self.find(i),
                    None => self.add(name, ns),
                }
            }
        };
        self.roots = roots;
        for e in endpoints {
            if self.pool_of.len() >= Self::MAX_ENDPOINTS {
                break;
            }
            if !self.pool_of.contains_key(e) {
                self.pool_of.insert(e.to_string(), root);
            }
        }
        Some(&self.pools[root as usize].0)
    }
}
