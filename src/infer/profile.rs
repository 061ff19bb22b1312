//! Where an engine's time goes: the per-node timings of several profiled
//! runs ([`super::Session::profile`]) summed up by operator and by the ONNX
//! node they came from. No IO.

use super::NodeTime;
use serde::Serialize;
use std::collections::BTreeMap;

/// A share of a run: the median over the runs of the time per run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Share {
    pub name: String,
    /// The engine's operator (by operator: the name itself; by ONNX node:
    /// the operator of its costliest plan node).
    pub op: String,
    /// How many plan nodes it covers.
    pub nodes: usize,
    pub ms: f64,
    /// Of the median profiled run's total.
    pub percent: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    pub runs: usize,
    /// The median over the runs of the sum of every node's time.
    pub total_ms: f64,
    /// By the engine's operator, most time first.
    pub by_op: Vec<Share>,
    /// By the ONNX node the plan node came from (tract names the nodes it
    /// makes out of one `<onnx name>.<part>`), most time first; this is what
    /// ONNX Runtime's profiler can be compared with.
    pub by_onnx_node: Vec<Share>,
}

/// The ONNX node a plan node came from.
pub fn onnx_node(plan_node: &str) -> &str {
    plan_node.split_once('.').map_or(plan_node, |(head, _)| head)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// What one key's nodes add up to while they are summed.
struct Tally {
    /// The op of the key's costliest node in the first run, and its ms.
    op: (String, f64),
    /// Nodes in one run.
    nodes: usize,
    /// ms in each run.
    ms: Vec<f64>,
}

/// Sums `runs` (each one profiled run, the same plan every time) by `key`.
fn shares(runs: &[Vec<NodeTime>], total: f64, key: impl Fn(&NodeTime) -> String) -> Vec<Share> {
    let mut acc: BTreeMap<String, Tally> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        for t in run {
            let e = acc.entry(key(t)).or_insert_with(|| Tally {
                op: (t.op.to_string(), -1.0),
                nodes: 0,
                ms: vec![0.0; runs.len()],
            });
            let ms = t.time.as_secs_f64() * 1e3;
            e.ms[i] += ms;
            if i == 0 {
                e.nodes += 1;
                if ms > e.op.1 {
                    e.op = (t.op.to_string(), ms);
                }
            }
        }
    }
    let mut out: Vec<Share> = acc
        .into_iter()
        .map(|(name, Tally { op: (op, _), nodes, ms })| {
            let ms = median(ms);
            Share { name, op, nodes, ms, percent: if total > 0.0 { 100.0 * ms / total } else { 0.0 } }
        })
        .collect();
    out.sort_by(|a, b| b.ms.total_cmp(&a.ms).then_with(|| a.name.cmp(&b.name)));
    out
}

pub fn summarize(runs: &[Vec<NodeTime>]) -> Profile {
    let total = median(runs.iter().map(|r| r.iter().map(|t| t.time.as_secs_f64() * 1e3).sum()).collect());
    Profile {
        runs: runs.len(),
        total_ms: total,
        by_op: shares(runs, total, |t| t.op.to_string()),
        by_onnx_node: shares(runs, total, |t| onnx_node(&t.node).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn t(node: &str, op: &str, ms: u64) -> NodeTime {
        NodeTime { node: node.into(), op: op.into(), time: Duration::from_millis(ms) }
    }

    #[test]
    fn runs_are_summed_by_operator_and_by_onnx_node_as_medians() {
        let runs = vec![
            vec![t("conv1.im2col", "Im2Col", 2), t("conv1.matmul", "OptMatMul", 6), t("relu1", "Max", 1)],
            vec![t("conv1.im2col", "Im2Col", 4), t("conv1.matmul", "OptMatMul", 8), t("relu1", "Max", 1)],
            vec![t("conv1.im2col", "Im2Col", 3), t("conv1.matmul", "OptMatMul", 100), t("relu1", "Max", 2)],
        ];
        let p = summarize(&runs);
        assert_eq!(p.runs, 3);
        assert_eq!(p.total_ms, 13.0, "the median run's total: 9, 13, 105");
        assert_eq!(p.by_op[0].name, "OptMatMul");
        assert_eq!(p.by_op[0].ms, 8.0);
        let conv = &p.by_onnx_node[0];
        // conv1's two plan nodes take 8, 12 and 103 ms in the three runs.
        assert_eq!((conv.name.as_str(), conv.nodes, conv.ms), ("conv1", 2, 12.0));
        assert_eq!(conv.op, "OptMatMul", "a node's op is that of its costliest plan node");
    }

    #[test]
    fn nothing_profiled_is_an_empty_profile() {
        let p = summarize(&[]);
        assert_eq!((p.total_ms, p.by_op.len()), (0.0, 0));
    }
}
