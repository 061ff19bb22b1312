//! Finds the quantise-dequantise pairs of an INT8 QDQ graph's activations
//! and rewrites each into one `FusiondFakeQuant` node (see `fake_quant`),
//! in the protobuf, before tract imports it; then drops those that round
//! values already on their grid ([`drop_repeats`]).

use std::collections::HashMap;
use tract_onnx::pb::{GraphProto, NodeProto, TensorProto};

/// The ONNX op type of a fused pair (not a standard op: only [`fuse_pairs`]
/// writes it, only into a graph tract is about to import).
pub const OP_TYPE: &str = "FusiondFakeQuant";

/// Rewrites every fusable `QuantizeLinear` → `DequantizeLinear` pair of
/// `graph` into one [`OP_TYPE`] node and returns how many it rewrote.
///
/// A pair is fused when the quantiser's scale and zero point are single
/// values held in initializers, every consumer of its output is a
/// dequantiser reading the same scale and zero point, and its output is not
/// a graph output. The fused node takes the quantiser's inputs and writes
/// the first dequantiser's output; the other dequantisers' readers read that
/// instead.
pub fn fuse_pairs(graph: &mut GraphProto) -> usize {
    let single: HashMap<&str, bool> =
        graph.initializer.iter().map(|t| (t.name.as_str(), super::element_count(&t.dims) == Some(1))).collect();
    let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (ix, node) in graph.node.iter().enumerate() {
        for input in &node.input {
            readers.entry(input.as_str()).or_default().push(ix);
        }
    }
    let outputs: Vec<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
    let mut plans = vec![];
    for (ix, q) in graph.node.iter().enumerate() {
        if q.op_type != "QuantizeLinear" || q.output.len() != 1 || q.input.len() < 2 {
            continue;
        }
        if !q.input[1..].iter().all(|p| single.get(p.as_str()) == Some(&true)) {
            continue;
        }
        let out = q.output[0].as_str();
        let Some(dqs) = readers.get(out) else { continue };
        let mut dqs = dqs.clone();
        dqs.dedup();
        let dequantises = |d: &usize| {
            let dq = &graph.node[*d];
            dq.op_type == "DequantizeLinear"
                && dq.input.first().map(String::as_str) == Some(out)
                && dq.input.get(1..) == q.input.get(1..)
                && dq.output.len() == 1
        };
        let fusable = !outputs.contains(&out)
            && dqs.iter().all(dequantises)
            && dqs[1..].iter().all(|&d| !outputs.contains(&graph.node[d].output[0].as_str()));
        if fusable {
            plans.push((ix, dqs));
        }
    }
    apply(graph, &plans);
    plans.len()
}

/// ONNX ops whose output holds values of their first input, moved or
/// chosen but never computed (Resize and Upsample only in their nearest
/// mode, [`keeps_values`]).
const KEEPING: &[&str] = &["MaxPool", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Slice"];

/// Whether `node`'s first output holds only values of its first input
/// (a resize that crops may extrapolate a value of its own).
fn keeps_values(node: &NodeProto) -> bool {
    let attribute = |name: &str| node.attribute.iter().find(|a| a.name == name).map(|a| a.s.as_slice());
    let nearest = || {
        attribute("mode").is_none_or(|m| m == b"nearest")
            && attribute("coordinate_transformation_mode") != Some(b"tf_crop_and_resize")
    };
    node.domain.is_empty()
        && !node.input.is_empty()
        && (KEEPING.contains(&node.op_type.as_str())
            || matches!(node.op_type.as_str(), "Resize" | "Upsample") && nearest())
}

/// Drops every fused pair ([`OP_TYPE`]) whose input is already on its grid:
/// the output of a fused pair of the same scale and zero point, through
/// ops that only move or choose values ([`keeps_values`]: YuNet's max
/// poolings, nearest upsamplings, transposes and reshapes each have their
/// pair again after them). Rounding a value of the grid to it again gives
/// the value back, to the bit, as long as `1 / scale` and 255 steps are
/// normal floats; the readers of a dropped pair read its input instead.
/// A pair whose output is a graph output stays. The ops that look for
/// their input's grid (the integer products) find it through the same ops
/// (`output_grid`). Returns how many it dropped.
pub fn drop_repeats(graph: &mut GraphProto) -> usize {
    // A subgraph (If, Loop) may read a tensor by its name: none is renamed.
    let subgraphs = graph.node.iter().flat_map(|n| &n.attribute).any(|a| a.g.is_some() || !a.graphs.is_empty());
    if subgraphs {
        return 0;
    }
    let initializers: HashMap<String, TensorProto> =
        graph.initializer.iter().map(|t| (t.name.clone(), TensorProto { name: String::new(), ..t.clone() })).collect();
    let outputs: Vec<String> = graph.output.iter().map(|o| o.name.clone()).collect();
    let mut producer: HashMap<String, usize> = HashMap::new();
    let mut renamed: HashMap<String, String> = HashMap::new();
    let mut dropped = Vec::with_capacity(graph.node.len());
    for ix in 0..graph.node.len() {
        for input in &mut graph.node[ix].input {
            if let Some(to) = renamed.get(input) {
                *input = to.clone();
            }
        }
        let node = &graph.node[ix];
        let grid = |at: usize| -> Option<Vec<&TensorProto>> {
            let node = &graph.node[at];
            let values = node.input.get(1..)?.iter().map(|n| initializers.get(n)).collect::<Option<Vec<_>>>()?;
            let scale = values.first().and_then(|t| super::floats(t)).filter(|s| s.len() == 1)?[0];
            (1e-30..=1e30).contains(&scale).then_some(values)
        };
        let repeat = node.op_type == OP_TYPE
            && node.output.len() == 1
            && !outputs.contains(&node.output[0])
            && node.input.first().is_some_and(|first| {
                grid(ix).is_some_and(|own| grid_source(graph, &producer, (ix, first)).and_then(grid) == Some(own))
            });
        if repeat {
            renamed.insert(node.output[0].clone(), node.input[0].clone());
        } else {
            producer.extend(node.output.iter().map(|o| (o.clone(), ix)));
        }
        dropped.push(repeat);
    }
    super::remove_nodes(graph, &dropped);
    dropped.iter().filter(|d| **d).count()
}

/// The fused pair whose values `tensor` (read by node `reader`) holds,
/// through ops that keep them; each step goes to an earlier node, so a
/// graph with a cycle ends the walk instead of running it for ever.
fn grid_source<'g>(
    graph: &'g GraphProto,
    producer: &HashMap<String, usize>,
    (mut reader, mut tensor): (usize, &'g str),
) -> Option<usize> {
    loop {
        let &at = producer.get(tensor).filter(|at| **at < reader)?;
        reader = at;
        let node = &graph.node[at];
        if node.op_type == OP_TYPE {
            return Some(at);
        }
        if !keeps_values(node) || node.output.first().map(String::as_str) != Some(tensor) {
            return None;
        }
        tensor = node.input.first()?;
    }
}

/// Carries out [`fuse_pairs`]'s plans: `(quantiser, its dequantisers)`.
fn apply(graph: &mut GraphProto, plans: &[(usize, Vec<usize>)]) {
    let mut renamed: HashMap<String, String> = HashMap::new();
    let mut dropped = vec![false; graph.node.len()];
    for (q, dqs) in plans {
        let kept = graph.node[dqs[0]].output[0].clone();
        for &d in &dqs[1..] {
            renamed.insert(graph.node[d].output[0].clone(), kept.clone());
        }
        for &d in dqs {
            dropped[d] = true;
        }
        let node = &mut graph.node[*q];
        node.op_type = OP_TYPE.into();
        node.domain = String::new();
        node.output = vec![kept];
        node.attribute.clear();
    }
    super::remove_nodes(graph, &dropped);
    for node in &mut graph.node {
        for input in &mut node.input {
            if let Some(to) = renamed.get(input) {
                *input = to.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::{AttributeProto, ValueInfoProto};

    fn node(op: &str, name: &str, inputs: &[&str], output: &str) -> NodeProto {
        NodeProto {
            op_type: op.into(),
            name: name.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            ..Default::default()
        }
    }

    fn initializer(name: &str, dims: &[i64]) -> TensorProto {
        TensorProto { name: name.into(), dims: dims.to_vec(), data_type: 1, ..Default::default() }
    }

    /// x → Q → DQ → Relu, Q2 read by two DQs, and four quantisers that must
    /// stay: one read by a Relu, one a graph output, one per axis, one whose
    /// dequantiser has another scale.
    fn graph() -> GraphProto {
        let s: &[&'static str] = &["s", "z"];
        fn with(x: &'static str, p: &[&'static str]) -> Vec<&'static str> {
            [&[x][..], p].concat()
        }
        GraphProto {
            node: vec![
                node("QuantizeLinear", "q1", &with("x", s), "q1"),
                node("DequantizeLinear", "dq1", &with("q1", s), "d1"),
                node("Relu", "r1", &["d1"], "r1"),
                node("QuantizeLinear", "q2", &with("r1", s), "q2"),
                node("DequantizeLinear", "dq2a", &with("q2", s), "d2a"),
                node("DequantizeLinear", "dq2b", &with("q2", s), "d2b"),
                node("Add", "add", &["d2a", "d2b"], "sum"),
                node("QuantizeLinear", "q3", &with("sum", s), "q3"),
                node("Relu", "r3", &["q3"], "r3"),
                node("QuantizeLinear", "q4", &with("sum", s), "q4"),
                node("QuantizeLinear", "q5", &with("sum", &["per_axis", "z"]), "q5"),
                node("DequantizeLinear", "dq5", &with("q5", &["per_axis", "z"]), "d5"),
                node("QuantizeLinear", "q6", &with("sum", s), "q6"),
                node("DequantizeLinear", "dq6", &with("q6", &["other", "z"]), "d6"),
            ],
            initializer: vec![
                initializer("s", &[]),
                initializer("z", &[]),
                initializer("other", &[1]),
                initializer("per_axis", &[8]),
            ],
            output: ["r3", "q4", "d5", "d6"].map(|n| ValueInfoProto { name: n.into(), ..Default::default() }).to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn only_pairs_of_one_grid_read_by_nothing_else_are_fused() {
        let mut g = graph();
        assert_eq!(fuse_pairs(&mut g), 2);
        let ops: Vec<(&str, &str)> = g.node.iter().map(|n| (n.name.as_str(), n.op_type.as_str())).collect();
        assert_eq!(
            ops,
            [
                ("q1", OP_TYPE),
                ("r1", "Relu"),
                ("q2", OP_TYPE),
                ("add", "Add"),
                ("q3", "QuantizeLinear"),
                ("r3", "Relu"),
                ("q4", "QuantizeLinear"),
                ("q5", "QuantizeLinear"),
                ("dq5", "DequantizeLinear"),
                ("q6", "QuantizeLinear"),
                ("dq6", "DequantizeLinear"),
            ]
        );
        assert_eq!(g.node[0].input, ["x", "s", "z"]);
        assert_eq!(g.node[0].output, ["d1"], "the fused node writes what its dequantiser wrote");
        assert_eq!(g.node[2].output, ["d2a"]);
        assert_eq!(g.node[3].input, ["d2a", "d2a"], "the second dequantiser's reader reads the first's output");
    }

    /// A hostile graph: nodes of every op these rewrites read with no
    /// inputs or outputs at all. Nothing panics (the release build aborts
    /// on a panic) and nothing is rewritten.
    #[test]
    fn nodes_without_inputs_are_left_alone_without_a_panic() {
        let bare = |op: &str, name: &str| NodeProto { op_type: op.into(), name: name.into(), ..Default::default() };
        let mut g = graph();
        g.node.push(bare(OP_TYPE, "no inputs"));
        g.node.push(bare("DequantizeLinear", "no dq inputs"));
        g.node.push(NodeProto { output: vec!["loose".into()], ..bare("Reshape", "reshape without inputs") });
        g.node.push(node(OP_TYPE, "reads it", &["loose", "s", "z"], "fq"));
        let mut lone = g.clone();
        lone.node.insert(0, node("QuantizeLinear", "q0", &["x", "s", "z"], "q0"));
        lone.node.insert(1, NodeProto { output: vec!["d0".into()], ..bare("DequantizeLinear", "empty dq") });
        lone.node[1].input = vec![];
        assert_eq!(fuse_pairs(&mut lone), 2, "the two good pairs, and the bare nodes left as they were");
        drop_repeats(&mut g);
        assert!(g.node.iter().any(|n| n.name == "no inputs"));
    }

    #[test]
    fn a_pair_is_dropped_only_where_its_input_is_already_on_its_grid() {
        let fq = |name: &str, x: &str, grid: [&str; 2]| node(OP_TYPE, name, &[x, grid[0], grid[1]], name);
        let (g1, g2) = (["s", "z"], ["other", "z"]);
        let mut resize = node("Resize", "linear", &["f1", "", "scales"], "linear");
        resize.attribute.push(AttributeProto { name: "mode".into(), s: b"linear".to_vec(), ..Default::default() });
        let mut g = GraphProto {
            node: vec![
                fq("f1", "x", g1),
                node("MaxPool", "pool", &["f1"], "pool"),
                fq("f2", "pool", g1),
                node("Transpose", "t", &["f2"], "t"),
                fq("f3", "t", g1),
                node("Relu", "relu", &["f3"], "relu"),
                fq("f4", "relu", g1),
                resize,
                fq("f5", "linear", g1),
                node("Resize", "nearest", &["f3", "", "scales"], "nearest"),
                fq("f6", "nearest", g1),
                node("Reshape", "reshape", &["f1", "shape"], "reshape"),
                fq("f7", "reshape", g2),
                fq("f8", "reshape", ["same_as_s", "z"]),
                node("Add", "sum", &["f4", "f8"], "sum"),
                fq("f9", "pool", g1),
                node("Conv", "conv", &["f9", "s"], "conv"),
            ],
            initializer: vec![
                TensorProto { float_data: vec![0.5], ..initializer("s", &[]) },
                TensorProto { float_data: vec![0.5], ..initializer("same_as_s", &[]) },
                TensorProto { float_data: vec![0.25], ..initializer("other", &[]) },
                TensorProto { data_type: 2, int32_data: vec![3], ..initializer("z", &[]) },
            ],
            output: ["f5", "f6", "f7", "sum", "conv"]
                .map(|n| ValueInfoProto { name: n.into(), ..Default::default() })
                .to_vec(),
            ..Default::default()
        };
        assert_eq!(drop_repeats(&mut g), 4);
        let kept: Vec<&str> = g.node.iter().filter(|n| n.op_type == OP_TYPE).map(|n| n.name.as_str()).collect();
        // f2 and f3 (through the dropped f2) follow f1's pool and transpose,
        // f8 a reshape with the same values under another name; a ReLU
        // computes, a linear resize too, f6 is an output, f7 another grid.
        // f9, a convolution's input, goes too.
        assert_eq!(kept, ["f1", "f4", "f5", "f6", "f7"]);
        let inputs = |name: &str| g.node.iter().find(|n| n.name == name).map(|n| n.input[0].clone());
        assert_eq!(inputs("t").as_deref(), Some("pool"));
        assert_eq!(inputs("relu").as_deref(), Some("t"));
        assert_eq!(inputs("nearest").as_deref(), Some("t"));
        assert_eq!(inputs("conv").as_deref(), Some("pool"));
        assert_eq!(
            g.node.iter().find(|n| n.name == "sum").map(|n| n.input.clone()),
            Some(vec!["f4".into(), "reshape".into()])
        );
    }

    #[test]
    fn a_graph_with_a_subgraph_or_a_cycle_loses_no_pair_and_ends() {
        let fq = |name: &str, x: &str| node(OP_TYPE, name, &[x, "s", "z"], name);
        let scale = TensorProto { float_data: vec![0.5], ..initializer("s", &[]) };
        let zero = TensorProto { data_type: 2, int32_data: vec![3], ..initializer("z", &[]) };
        let graph = |nodes: Vec<NodeProto>| GraphProto {
            node: nodes,
            initializer: vec![scale.clone(), zero.clone()],
            output: vec![ValueInfoProto { name: "y".into(), ..Default::default() }],
            ..Default::default()
        };
        let mut with_if = node("If", "if", &["c"], "y");
        with_if.attribute.push(AttributeProto {
            name: "then_branch".into(),
            g: Some(GraphProto::default()),
            ..Default::default()
        });
        let mut g = graph(vec![fq("f1", "x"), node("MaxPool", "pool", &["f1"], "pool"), fq("f2", "pool"), with_if]);
        assert_eq!(drop_repeats(&mut g), 0, "a subgraph could read f2 by name");
        // a and b read each other (a malformed file): the walk from f3 ends.
        let mut g = graph(vec![
            node("Transpose", "a", &["b"], "a"),
            node("Transpose", "b", &["a"], "b"),
            fq("f3", "a"),
            node("Relu", "y", &["f3"], "y"),
        ]);
        assert_eq!(drop_repeats(&mut g), 0);
    }

    #[test]
    fn a_graph_without_pairs_is_left_as_it_is() {
        let mut g = graph();
        g.node.retain(|n| !matches!(n.name.as_str(), "q1" | "dq1" | "q2" | "dq2a" | "dq2b"));
        let before = g.clone();
        assert_eq!(fuse_pairs(&mut g), 0);
        assert_eq!(g, before);
    }
}
