//! Convolutions that read the same input with the same geometry run as one:
//! SCRFD's three heads a level (2, 8 and 20 output channels, each 3×3 over
//! the same 64 channels) and YuNet's four 1×1 heads a level. tract packs
//! each convolution's input on its own, for a 3×3 over 64 channels at
//! 80×80 a copy of 14.7 MB, and runs a matrix product of 2 rows as slowly
//! as one of 8. [`merge`] rewrites each such group in the protobuf into one
//! `Conv` whose output channels are the group's end to end, then a `Split`
//! back into the outputs the group had, so the input is packed once and the
//! product runs over all the rows at once.

use super::{drop_unread, f32_initializer, floats, holds_f32};
use std::collections::HashSet;
use tract_onnx::pb::attribute_proto::AttributeType;
use tract_onnx::pb::tensor_proto::DataType;
use tract_onnx::pb::{AttributeProto, GraphProto, NodeProto, TensorProto};

/// A convolution that may join a group: its node, weights and bias.
struct Member<'g> {
    node: &'g NodeProto,
    weights: &'g TensorProto,
    bias: Option<&'g TensorProto>,
}

/// What the members of a group share: the input, the attributes (sorted
/// by name) and the weights' dims past the output channels.
type Key<'g> = (&'g str, Vec<&'g AttributeProto>, &'g [i64]);

/// Merges every group of two or more convolutions of one input with the
/// same attributes (no groups) and constant f32 weights of one shape but
/// the output channels; `opset` is the graph's ONNX opset (from 13, a
/// `Split` takes its sizes as an input). Returns how many convolutions
/// were merged away.
pub fn merge(graph: &mut GraphProto, opset: i64) -> usize {
    let mut merged = 0;
    let mut dropped = vec![false; graph.node.len()];
    let mut inserts: Vec<(usize, [NodeProto; 2], Vec<TensorProto>)> = Vec::new();
    let mut sources = HashSet::new();
    for group in groups(graph) {
        let members: Vec<Member> = group.iter().filter_map(|&ix| member(graph, &graph.node[ix])).collect();
        let Some((nodes, tensors)) = merged_nodes(&members, opset) else { continue };
        for &ix in &group {
            dropped[ix] = true;
            sources.extend(graph.node[ix].input[1..].iter().cloned());
        }
        merged += group.len() - 1;
        inserts.push((group[0], nodes, tensors));
    }
    let mut nodes = Vec::with_capacity(graph.node.len());
    let mut at = inserts.into_iter().peekable();
    for (ix, node) in std::mem::take(&mut graph.node).into_iter().enumerate() {
        // The merged pair where the group's first member was: its input is
        // ready there, and every reader of a member's output comes later.
        if let Some((_, pair, tensors)) = at.next_if(|(first, _, _)| *first == ix) {
            nodes.extend(pair);
            graph.initializer.extend(tensors);
        }
        if !dropped[ix] {
            nodes.push(node);
        }
    }
    graph.node = nodes;
    drop_unread(graph, sources);
    merged
}

/// The indices of the convolutions of each group of two or more, in graph
/// order.
fn groups(graph: &GraphProto) -> Vec<Vec<usize>> {
    let mut groups: Vec<(Key, Vec<usize>)> = Vec::new();
    for (ix, node) in graph.node.iter().enumerate() {
        let Some(m) = member(graph, node) else { continue };
        let mut attributes: Vec<&AttributeProto> = node.attribute.iter().collect();
        attributes.sort_by(|a, b| a.name.cmp(&b.name));
        let key = (node.input[0].as_str(), attributes, &m.weights.dims[1..]);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(ix),
            None => groups.push((key, vec![ix])),
        }
    }
    groups.into_iter().map(|(_, g)| g).filter(|g| g.len() > 1).collect()
}

/// `node` as a member of a group: a plain `Conv` with one output, its
/// weights a 4-D f32 initializer and its bias (if any) one of as many
/// values as output channels.
fn member<'g>(graph: &'g GraphProto, node: &'g NodeProto) -> Option<Member<'g>> {
    let plain = node.op_type == "Conv"
        && node.domain.is_empty()
        && node.output.len() == 1
        && (2..=3).contains(&node.input.len())
        && node.attribute.iter().all(|a| a.name != "group" || a.i == 1);
    if !plain {
        return None;
    }
    let find = |name: &str| graph.initializer.iter().find(|t| t.name == name).filter(|t| holds_f32(t));
    let weights = find(&node.input[1]).filter(|w| w.dims.len() == 4)?;
    let bias = match node.input.get(2).filter(|b| !b.is_empty()) {
        Some(b) => Some(find(b).filter(|b| b.dims == weights.dims[..1])?),
        None => None,
    };
    Some(Member { node, weights, bias })
}

/// The merged `Conv` and the `Split` after it, and their new initializers.
fn merged_nodes(members: &[Member], opset: i64) -> Option<([NodeProto; 2], Vec<TensorProto>)> {
    let first = members.first().filter(|_| members.len() > 1)?.node;
    let sizes: Vec<i64> = members.iter().map(|m| m.weights.dims[0]).collect();
    let (mut weights, mut bias) = (Vec::new(), Vec::new());
    for m in members {
        weights.extend(floats(m.weights)?);
        match m.bias {
            Some(b) => bias.extend(floats(b)?),
            None => bias.extend(std::iter::repeat_n(0f32, usize::try_from(m.weights.dims[0]).ok()?)),
        }
    }
    let name = members.iter().map(|m| m.node.name.as_str()).collect::<Vec<_>>().join("+");
    let mut dims = members[0].weights.dims.clone();
    dims[0] = sizes.iter().sum();
    let (w_name, b_name, out) = (format!("{name}.weight"), format!("{name}.bias"), format!("{name}.output"));
    let mut tensors = vec![f32_initializer(&w_name, &dims, &weights), f32_initializer(&b_name, &dims[..1], &bias)];
    let conv = NodeProto {
        input: vec![first.input[0].clone(), w_name, b_name],
        output: vec![out.clone()],
        name: name.clone(),
        ..first.clone()
    };
    let int = |name: &str, i| AttributeProto {
        name: name.into(),
        i,
        r#type: AttributeType::Int as i32,
        ..Default::default()
    };
    let mut split = NodeProto {
        op_type: "Split".into(),
        name: format!("{name}.split"),
        input: vec![out],
        output: members.iter().map(|m| m.node.output[0].clone()).collect(),
        attribute: vec![int("axis", 1)],
        ..Default::default()
    };
    if opset >= 13 {
        let sizes_name = format!("{name}.split-sizes");
        let dims = vec![sizes.len() as i64];
        let data_type = DataType::Int64 as i32;
        tensors.push(TensorProto {
            name: sizes_name.clone(),
            dims,
            data_type,
            int64_data: sizes,
            ..Default::default()
        });
        split.input.push(sizes_name);
    } else {
        let r#type = AttributeType::Ints as i32;
        split.attribute.push(AttributeProto { name: "split".into(), ints: sizes, r#type, ..Default::default() });
    }
    Some(([conv, split], tensors))
}

#[cfg(test)]
mod tests {
    use super::super::f32_initializer;
    use super::*;

    fn attr(name: &str, ints: &[i64]) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            ints: ints.to_vec(),
            r#type: AttributeType::Ints as i32,
            ..Default::default()
        }
    }

    fn conv(name: &str, input: &str, weights: &str, bias: Option<&str>, strides: i64) -> NodeProto {
        let mut inputs = vec![input.to_string(), weights.to_string()];
        inputs.extend(bias.map(String::from));
        NodeProto {
            op_type: "Conv".into(),
            name: name.into(),
            input: inputs,
            output: vec![format!("{name}_out")],
            // Attributes in another order in each: they are compared as a set.
            attribute: if strides == 1 {
                vec![attr("kernel_shape", &[1, 1]), attr("strides", &[1, 1])]
            } else {
                vec![attr("strides", &[strides, strides]), attr("kernel_shape", &[1, 1])]
            },
            ..Default::default()
        }
    }

    /// Three convolutions of `x` (two of stride 1, one of stride 2) and one
    /// of `y`, and a reader of the first's output.
    fn graph() -> GraphProto {
        GraphProto {
            node: vec![
                conv("a", "x", "wa", Some("ba"), 1),
                NodeProto {
                    op_type: "Relu".into(),
                    input: vec!["a_out".into()],
                    output: vec!["r".into()],
                    ..Default::default()
                },
                conv("s", "x", "wa", None, 2),
                conv("b", "x", "wb", None, 1),
                conv("c", "y", "wb", None, 1),
            ],
            initializer: vec![
                f32_initializer("wa", &[1, 2, 1, 1], &[1., 2.]),
                f32_initializer("ba", &[1], &[0.5]),
                f32_initializer("wb", &[2, 2, 1, 1], &[3., 4., 5., 6.]),
                f32_initializer("unused", &[1], &[9.]),
            ],
            ..Default::default()
        }
    }

    fn values(g: &GraphProto, name: &str) -> Vec<f32> {
        floats(g.initializer.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no {name}"))).unwrap()
    }

    #[test]
    fn convolutions_of_one_input_and_geometry_become_one_and_a_split() {
        let mut g = graph();
        assert_eq!(merge(&mut g, 11), 1);
        let ops: Vec<&str> = g.node.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(ops, ["a+b", "a+b.split", "", "s", "c"], "the pair where `a` was, before `a`'s reader");
        let (conv, split) = (&g.node[0], &g.node[1]);
        assert_eq!(conv.input, ["x", "a+b.weight", "a+b.bias"]);
        assert_eq!(values(&g, "a+b.weight"), [1., 2., 3., 4., 5., 6.]);
        assert_eq!(values(&g, "a+b.bias"), [0.5, 0., 0.], "`b` has no bias: zeros");
        assert_eq!(split.output, ["a_out", "b_out"]);
        assert_eq!(split.attribute.iter().find(|a| a.name == "split").map(|a| a.ints.clone()), Some(vec![1, 2]));
        // `wa` is still read by `s`, `wb` by `c`; `ba` by nobody; `unused` was never ours.
        let names: Vec<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
        assert!(names.contains(&"wa") && names.contains(&"wb") && names.contains(&"unused"));
        assert!(!names.contains(&"ba"));
    }

    #[test]
    fn from_opset_13_the_split_sizes_are_an_input() {
        let mut g = graph();
        merge(&mut g, 13);
        let split = &g.node[1];
        assert_eq!(split.input, ["a+b.output", "a+b.split-sizes"]);
        assert!(split.attribute.iter().all(|a| a.name != "split"));
        let sizes = g.initializer.iter().find(|t| t.name == "a+b.split-sizes").unwrap();
        assert_eq!(sizes.int64_data, [1, 2]);
    }

    #[test]
    fn grouped_or_non_constant_convolutions_are_left_alone() {
        let mut g = graph();
        g.node[3].attribute.push(AttributeProto { name: "group".into(), i: 2, ..Default::default() });
        assert_eq!(merge(&mut g, 11), 0);
        let mut g = graph();
        g.initializer.retain(|t| t.name != "wb");
        assert_eq!(merge(&mut g, 11), 0, "`b`'s weights are not an initializer");
        assert_eq!(g, graph_without("wb"));
    }

    fn graph_without(name: &str) -> GraphProto {
        let mut g = graph();
        g.initializer.retain(|t| t.name != name);
        g
    }
}
