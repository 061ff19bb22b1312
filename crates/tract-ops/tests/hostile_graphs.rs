//! The graph rewrites run on every model the daemon loads, before tract
//! sees it, so a hostile file reaches them first. Thousands of random
//! graphs built from the ops they look at, with inputs missing, outputs
//! missing, names repeated, cycles and initializers of every shape: none
//! may panic (the release build aborts on a panic).

use fusiond_tract_ops::tract_onnx::pb::{
    tensor_proto::DataType, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    ValueInfoProto,
};
use fusiond_tract_ops::{prepare, Int8Activations};

/// xorshift64: the same graphs on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const OPS: [&str; 12] = [
    "QuantizeLinear",
    "DequantizeLinear",
    "FusiondFakeQuant",
    "Conv",
    "Reshape",
    "Transpose",
    "MaxPool",
    "Resize",
    "Relu",
    "Add",
    "Split",
    "Concat",
];

fn tensor(rng: &mut Rng, name: String) -> TensorProto {
    let dims: Vec<i64> = (0..rng.below(5)).map(|_| rng.below(5) as i64 - 1).collect();
    let (data_type, bytes) = match rng.below(3) {
        0 => (DataType::Float as i32, 4),
        1 => (DataType::Int8 as i32, 1),
        _ => (DataType::Uint8 as i32, 1),
    };
    let raw_data = (0..rng.below(40) * bytes).map(|_| rng.below(256) as u8).collect();
    TensorProto { name, dims, data_type, raw_data, ..Default::default() }
}

fn graph(rng: &mut Rng) -> ModelProto {
    let names: Vec<String> = (0..6 + rng.below(10)).map(|i| format!("t{i}")).collect();
    let pick = |rng: &mut Rng| names[rng.below(names.len())].clone();
    let node = |rng: &mut Rng, i: usize| {
        let op = OPS[rng.below(OPS.len())];
        let input = (0..rng.below(5)).map(|_| if rng.below(8) == 0 { String::new() } else { pick(rng) }).collect();
        let output = (0..rng.below(3)).map(|_| pick(rng)).collect();
        let mut attribute = Vec::new();
        if rng.below(2) == 0 {
            let ints = (0..rng.below(5)).map(|_| rng.below(4) as i64 - 1).collect();
            attribute.push(AttributeProto {
                name: ["kernel_shape", "strides", "pads", "group", "mode"][rng.below(5)].into(),
                ints,
                i: rng.below(3) as i64,
                s: b"nearest".to_vec(),
                ..Default::default()
            });
        }
        NodeProto { op_type: op.into(), name: format!("n{i}"), input, output, attribute, ..Default::default() }
    };
    let mut nodes: Vec<NodeProto> = (0..rng.below(14)).map(|i| node(rng, i)).collect();
    let mut initializer: Vec<TensorProto> = (0..rng.below(6))
        .map(|_| {
            let name = pick(rng);
            tensor(rng, name)
        })
        .collect();
    if rng.below(2) == 0 {
        plant(rng, &mut nodes, &mut initializer);
    }
    let value = |name: String| ValueInfoProto { name, ..Default::default() };
    let output = (0..rng.below(3)).map(|_| value(pick(rng))).collect();
    let input = (0..rng.below(3)).map(|_| value(pick(rng))).collect();
    let graph = GraphProto { node: nodes, initializer, input, output, ..Default::default() };
    let opset = OperatorSetIdProto { domain: String::new(), version: [0, 11, 13, 21][rng.below(4)] };
    ModelProto { graph: Some(graph), opset_import: vec![opset], ..Default::default() }
}

/// The shapes the rewrites look for, planted among the random nodes so
/// that they run and meet the damage around them: a quantise-dequantise
/// pair on one scalar grid, an INT8 weight dequantised as a constant, and
/// two convolutions of one input.
fn plant(rng: &mut Rng, nodes: &mut Vec<NodeProto>, initializer: &mut Vec<TensorProto>) {
    let scalar = |name: &str, data_type: DataType, raw: Vec<u8>| TensorProto {
        name: name.into(),
        data_type: data_type as i32,
        raw_data: raw,
        ..Default::default()
    };
    initializer.push(scalar("s", DataType::Float, 0.05f32.to_le_bytes().to_vec()));
    initializer.push(scalar("z", DataType::Int8, vec![0]));
    let w = TensorProto {
        name: "w".into(),
        dims: vec![4, 2, 1, 1],
        data_type: DataType::Int8 as i32,
        raw_data: (0..8).map(|_| rng.below(256) as u8).collect(),
        ..Default::default()
    };
    initializer.push(w);
    let n = |op: &str, name: &str, input: &[&str], output: &str| NodeProto {
        op_type: op.into(),
        name: name.into(),
        input: input.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        ..Default::default()
    };
    let mut planted = vec![
        n("QuantizeLinear", "pq", &["t0", "s", "z"], "pq_out"),
        n("DequantizeLinear", "pdq", &["pq_out", "s", "z"], "pd_out"),
        n("DequantizeLinear", "pw", &["w", "s", "z"], "w_f"),
        n("Conv", "pc1", &["pd_out", "w_f"], "c1"),
        n("Conv", "pc2", &["pd_out", "w_f"], "c2"),
        n("QuantizeLinear", "pq2", &["c1", "s", "z"], "pq2_out"),
        n("DequantizeLinear", "pdq2", &["pq2_out", "s", "z"], "t1"),
    ];
    // Damage one of them now and then: an input or an output gone.
    if rng.below(2) == 0 {
        let k = rng.below(planted.len());
        if rng.below(2) == 0 {
            planted[k].input.truncate(rng.below(3));
        } else {
            planted[k].output.clear();
        }
    }
    let at = rng.below(nodes.len() + 1);
    nodes.splice(at..at, planted);
}

#[test]
fn random_hostile_graphs_never_make_the_rewrites_panic() {
    let mut rng = Rng(0x5eed_f00d_d00d_cafe);
    let mut rewritten = 0;
    for _ in 0..20_000 {
        let mut model = graph(&mut rng);
        let before = model.clone();
        let activations = if rng.next().is_multiple_of(2) { Int8Activations::Grid } else { Int8Activations::Float };
        let prepared = prepare(&mut model, activations);
        rewritten += usize::from(model != before);
        let _ = prepared;
    }
    // Not all of them are left alone: the generator does reach the rewrites.
    assert!(rewritten > 0, "no random graph was rewritten: the generator misses the rewrites");
    eprintln!("hostile graphs: {rewritten} of 20000 rewritten, none panicked");
}
