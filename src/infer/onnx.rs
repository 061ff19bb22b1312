//! Reading ONNX files without running them: initializers that a contract
//! keeps outside the compute graph (inswapper's emap), and re-declaring the
//! input sizes of an export that fixed them.

use super::{InferError, InputSpec, Result, Tensor};
#[cfg(feature = "tract")]
use fusiond_tract_ops::tract_onnx::{pb, prelude::Framework};

#[cfg(feature = "tract")]
fn f32_values(t: &pb::TensorProto) -> Option<Vec<f32>> {
    const FLOAT: i32 = 1;
    if t.data_type != FLOAT {
        return None;
    }
    if !t.float_data.is_empty() {
        return Some(t.float_data.clone());
    }
    if !t.raw_data.len().is_multiple_of(4) {
        return None;
    }
    Some(t.raw_data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

/// What to do when the last initializer is not a float emap: a quantised
/// graph (the quantisers rename, fold and reorder initializers) holds none.
pub const NOT_A_FLOAT_GRAPH: &str = "; a quantised graph does not hold the emap: name its float model in the \
                                     manifest's `emap_source`, or write a side file with `fusiond emap`";

/// The last initializer of the graph, which is where insightface stores
/// inswapper's emap. Only meaningful on the float export: quantisers rename,
/// fold and reorder initializers.
///
/// One pass over the bytes, in place (they are usually the mapped file):
/// the protobuf fields are walked to the graph and its initializers are
/// skipped by their lengths, so that only the last one is decoded, rather
/// than a copy of every weight of the model.
#[cfg(feature = "tract")]
pub fn last_initializer(bytes: &[u8]) -> Result<(String, Tensor)> {
    const MODEL_GRAPH: u64 = 7;
    const GRAPH_INITIALIZER: u64 = 5;
    let graph = wire::last(bytes, MODEL_GRAPH, "not an ONNX model")?
        .ok_or_else(|| InferError::Load("the file has no graph".into()))?;
    let last = wire::last(graph, GRAPH_INITIALIZER, "the graph")?
        .ok_or_else(|| InferError::Load("the graph has no initializers".into()))?;
    let last = <pb::TensorProto as prost::Message>::decode(last)
        .map_err(|e| InferError::Load(format!("the last initializer: {e}")))?;
    let shape: Vec<usize> = last.dims.iter().map(|&d| d.max(0) as usize).collect();
    let data = f32_values(&last).ok_or_else(|| {
        InferError::Load(format!("initializer `{}` is not float32 data{NOT_A_FLOAT_GRAPH}", last.name))
    })?;
    let tensor = Tensor::new(&shape, data)
        .ok_or_else(|| InferError::Load(format!("initializer `{}` does not hold {shape:?} values", last.name)))?;
    Ok((last.name.clone(), tensor))
}

/// Without tract there is no ONNX reader in the binary (fuzz builds only).
#[cfg(not(feature = "tract"))]
pub fn last_initializer(_: &[u8]) -> Result<(String, Tensor)> {
    Err(InferError::Engine("this fusiond was built without the tract feature, which reads ONNX files".into()))
}

/// `bytes` with each named input declared at its new fixed shape.
///
/// For exports whose graph computes every size but whose inputs were declared
/// at one (YuNet's 640×640): ONNX Runtime refuses a tensor that contradicts a
/// declared dimension. The declared shapes of the outputs and the value infos
/// were computed for the old size, so they are dropped and the engine infers
/// them again (kept, ONNX Runtime merges them and warns on every run).
#[cfg(feature = "tract")]
pub fn redeclare_inputs(bytes: &[u8], shapes: &[(String, Vec<usize>)]) -> Result<Vec<u8>> {
    use pb::tensor_shape_proto::{dimension::Value as Dim, Dimension};
    let mut proto = fusiond_tract_ops::tract_onnx::onnx()
        .proto_model_for_read(&mut &bytes[..])
        .map_err(|e| InferError::Load(format!("{e:#}")))?;
    let graph = proto.graph.as_mut().ok_or_else(|| InferError::Load("the file has no graph".into()))?;
    for (name, shape) in shapes {
        let input = graph
            .input
            .iter_mut()
            .find(|i| &i.name == name)
            .ok_or_else(|| InferError::Load(format!("the graph declares no input `{name}`")))?;
        let Some(pb::type_proto::Value::TensorType(tensor)) = input.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            return Err(InferError::Load(format!("input `{name}` is not a tensor")));
        };
        let dim = shape.iter().map(|&d| Dimension { value: Some(Dim::DimValue(d as i64)), ..Default::default() });
        tensor.shape = Some(pb::TensorShapeProto { dim: dim.collect() });
    }
    graph.value_info.clear();
    for output in &mut graph.output {
        if let Some(pb::type_proto::Value::TensorType(tensor)) = output.r#type.as_mut().and_then(|t| t.value.as_mut()) {
            tensor.shape = None;
        }
    }
    Ok(prost::Message::encode_to_vec(&proto))
}

/// Without tract there is no ONNX reader in the binary (fuzz builds only).
#[cfg(not(feature = "tract"))]
pub fn redeclare_inputs(_: &[u8], _: &[(String, Vec<usize>)]) -> Result<Vec<u8>> {
    Err(InferError::Engine("this fusiond was built without the tract feature, which reads ONNX files".into()))
}

/// `bytes` with its inputs declared again where a declared dimension
/// contradicts the shape it is loaded at (ONNX Runtime would refuse every
/// run); `None` when none does. An ORT-format file cannot be changed.
pub fn redeclared(
    declared: &[(String, Vec<i64>)],
    inputs: &[InputSpec],
    bytes: &[u8],
    ort_format: bool,
) -> Result<Option<Vec<u8>>> {
    let changed = contradicted(declared, inputs);
    match changed.first() {
        None => Ok(None),
        Some((name, shape)) if ort_format => Err(InferError::Load(format!(
            "input `{name}` is declared at another size than {shape:?} in this ORT-format file; \
             convert the ONNX model again at that size, or load it at its own size"
        ))),
        Some(_) => redeclare_inputs(bytes, &changed).map(Some),
    }
}

/// The inputs, with the shape each is loaded at, whose declared dimensions
/// (`declared`: a value below 1 is symbolic) contradict that shape.
pub fn contradicted(declared: &[(String, Vec<i64>)], inputs: &[InputSpec]) -> Vec<(String, Vec<usize>)> {
    let contradicts = |dims: &[i64], want: &[usize]| {
        dims.len() != want.len() || dims.iter().zip(want).any(|(&d, &w)| d > 0 && d as usize != w)
    };
    inputs
        .iter()
        .filter(|spec| declared.iter().any(|(n, dims)| *n == spec.name && contradicts(dims, &spec.shape)))
        .map(|spec| (spec.name.clone(), spec.shape.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, shape: &[usize]) -> InputSpec {
        InputSpec { name: name.into(), shape: shape.to_vec() }
    }

    #[test]
    fn only_fixed_dimensions_that_differ_contradict() {
        let declared = [("input".to_string(), vec![1, 3, 640, 640]), ("source".to_string(), vec![-1, 512])];
        let inputs = [spec("input", &[1, 3, 480, 640]), spec("source", &[1, 512])];
        assert_eq!(contradicted(&declared, &inputs), [("input".to_string(), vec![1, 3, 480, 640])]);
        let same = [spec("input", &[1, 3, 640, 640]), spec("source", &[7, 512])];
        assert!(contradicted(&declared, &same).is_empty(), "symbolic dimensions take any size");
        let rank = [spec("source", &[1, 512, 1])];
        assert_eq!(contradicted(&declared, &rank).len(), 1, "another rank contradicts");
        let err = redeclared(&declared, &inputs, b"", true).unwrap_err().to_string();
        assert!(err.contains("ORT-format") && err.contains("[1, 3, 480, 640]"), "{err}");
        assert!(redeclared(&declared, &same, b"", true).unwrap().is_none());
    }

    /// YuNet declared at 640x640, declared again at 640x480: the input says
    /// so, and no output or value info keeps a shape computed for 640x640.
    #[cfg(feature = "tract")]
    #[test]
    fn an_input_declared_again_drops_the_shapes_computed_for_the_old_one() {
        let shared = std::env::var_os("FUSIOND_SHARED")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
        let path = shared.join("models/face_detection_yunet_2023mar.onnx");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!("{} is missing ({e}): put shared/ beside the checkout or set FUSIOND_SHARED", path.display())
        });
        let patched = redeclare_inputs(&bytes, &[("input".into(), vec![1, 3, 480, 640])]).unwrap();
        let proto = fusiond_tract_ops::tract_onnx::onnx().proto_model_for_read(&mut &patched[..]).unwrap();
        let graph = proto.graph.unwrap();
        let dims = |vi: &pb::ValueInfoProto| match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(pb::type_proto::Value::TensorType(t)) => t.shape.as_ref().map(|s| s.dim.len()),
            _ => None,
        };
        let input = graph.input.iter().find(|i| i.name == "input").unwrap();
        let Some(pb::type_proto::Value::TensorType(t)) = input.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
            panic!("input is not a tensor")
        };
        let values: Vec<_> = t.shape.as_ref().unwrap().dim.iter().map(|d| d.value.clone()).collect();
        use pb::tensor_shape_proto::dimension::Value::DimValue;
        assert_eq!(values, [1, 3, 480, 640].map(|v| Some(DimValue(v))));
        assert!(graph.value_info.is_empty());
        assert_eq!(graph.output.len(), 12);
        assert!(graph.output.iter().all(|o| dims(o).is_none()), "output shapes are left to the engine");
        assert_eq!(graph.node.len(), 106, "the graph itself is unchanged");
        let err = redeclare_inputs(&bytes, &[("nope".into(), vec![1])]).unwrap_err().to_string();
        assert!(err.contains("no input `nope`"), "{err}");
    }
}

/// Protobuf's wire format, enough to walk to one field without decoding
/// the others: each field is a varint key (number and wire type) and a
/// value whose length the wire type gives.
#[cfg(feature = "tract")]
mod wire {
    /// A length-delimited field's number and bytes (other wire types are
    /// skipped and given with empty bytes).
    pub struct Field<'a> {
        pub number: u64,
        pub bytes: &'a [u8],
    }

    /// The bytes of the last field `number` of the message in `bytes`;
    /// `what` names the message in an error.
    pub fn last<'a>(bytes: &'a [u8], number: u64, what: &str) -> super::Result<Option<&'a [u8]>> {
        let mut found = None;
        for field in fields(bytes) {
            let field = field.map_err(|e| super::InferError::Load(format!("{what}: {e}")))?;
            if field.number == number {
                found = Some(field.bytes);
            }
        }
        Ok(found)
    }

    fn varint(bytes: &mut &[u8]) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = bytes.split_first().ok_or("a varint runs past the end")?;
            *bytes = rest;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a varint longer than 10 bytes".into())
    }

    /// The fields of one message, in order; an error ends the walk.
    pub fn fields(mut bytes: &[u8]) -> impl Iterator<Item = Result<Field<'_>, String>> {
        let mut failed = false;
        std::iter::from_fn(move || {
            if bytes.is_empty() || failed {
                return None;
            }
            let field = next(&mut bytes);
            failed = field.is_err();
            Some(field)
        })
    }

    fn next<'a>(bytes: &mut &'a [u8]) -> Result<Field<'a>, String> {
        let key = varint(bytes)?;
        let (number, kind) = (key >> 3, key & 7);
        let skip = |bytes: &mut &'a [u8], n: usize| -> Result<&'a [u8], String> {
            let (value, rest) = bytes.split_at_checked(n).ok_or_else(|| format!("field {number} runs past the end"))?;
            *bytes = rest;
            Ok(value)
        };
        match kind {
            0 => varint(bytes).map(|_| Field { number, bytes: &[] }),
            1 => skip(bytes, 8).map(|_| Field { number, bytes: &[] }),
            2 => {
                let len = usize::try_from(varint(bytes)?).map_err(|_| "a length over the address space")?;
                skip(bytes, len).map(|value| Field { number, bytes: value })
            }
            5 => skip(bytes, 4).map(|_| Field { number, bytes: &[] }),
            other => Err(format!("field {number} has wire type {other}, which ONNX files do not use")),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn fields_are_walked_by_length_and_a_truncated_one_is_an_error() {
            // field 1 varint 150, field 2 bytes "hi", field 3 fixed32.
            let msg = [0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 1, 2, 3, 4];
            let f: Vec<_> = fields(&msg).map(|f| f.unwrap()).map(|f| (f.number, f.bytes.to_vec())).collect();
            assert_eq!(f, [(1, vec![]), (2, b"hi".to_vec()), (3, vec![])]);
            let cut = fields(&msg[..6]).last().unwrap();
            assert!(cut.is_err_and(|e| e.contains("field 2")));
            assert!(fields(&[0x0b]).next().unwrap().is_err(), "wire type 3 (groups)");
            assert!(fields(&[0xff; 11]).next().unwrap().is_err(), "an endless varint");
        }
    }
}
