//! Reading ONNX files without running them: initializers that a contract
//! keeps outside the compute graph (inswapper's emap), and re-declaring the
//! input sizes of an export that fixed them.

use super::{InferError, Result, Tensor};
#[cfg(feature = "tract")]
use tract_onnx::{pb, prelude::Framework};

#[cfg(feature = "tract")]
fn f32_values(t: &pb::TensorProto) -> Option<Vec<f32>> {
    const FLOAT: i32 = 1;
    if t.data_type != FLOAT {
        return None;
    }
    if !t.float_data.is_empty() {
        return Some(t.float_data.clone());
    }
    if t.raw_data.len() % 4 != 0 {
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
#[cfg(feature = "tract")]
pub fn last_initializer(bytes: &[u8]) -> Result<(String, Tensor)> {
    let proto =
        tract_onnx::onnx().proto_model_for_read(&mut &bytes[..]).map_err(|e| InferError::Load(format!("{e:#}")))?;
    let graph = proto.graph.as_ref().ok_or_else(|| InferError::Load("the file has no graph".into()))?;
    let last = graph.initializer.last().ok_or_else(|| InferError::Load("the graph has no initializers".into()))?;
    let shape: Vec<usize> = last.dims.iter().map(|&d| d.max(0) as usize).collect();
    let data = f32_values(last).ok_or_else(|| {
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
    let mut proto =
        tract_onnx::onnx().proto_model_for_read(&mut &bytes[..]).map_err(|e| InferError::Load(format!("{e:#}")))?;
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
