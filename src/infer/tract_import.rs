//! Building tract's graph from an ONNX file while its weights are held once.
//!
//! Three things hold every weight in turn: the mapped file (the SHA-256 check
//! made all of it resident), the decoded protobuf, and tract's tensors.
//! tract-onnx converts every initializer before it drops any, so a plain load
//! holds the weights twice at its peak, three times with the file. Here:
//! - the protobuf is decoded from the mapping through a buffer that hands the
//!   pages it has passed back to the kernel ([`ModelData::release`]), so the
//!   file and the protobuf are never both whole;
//! - the large initializers are taken out of the protobuf and converted one
//!   at a time, each protobuf copy dropped as soon as its tensor exists.
//!   tract imports them as typed graph inputs, which [`restore_weights`]
//!   turns into constants in place before anything analyses the graph, so
//!   the graph tract optimises is the one its own import would build.

use super::{InferError, ModelBytes, ModelData, Result};
use fusiond_tract_ops::tract_onnx::pb;
use fusiond_tract_ops::tract_onnx::prelude::*;
use fusiond_tract_ops::tract_onnx::tract_core::ops::konst::Const;
use std::collections::HashSet;

/// Initializers at least this big are converted here, one at a time. The
/// small ones (shapes, pads, scales, which some ops read while tract parses
/// them) stay in the protobuf for tract's own import.
const BIG: usize = 64 * 1024;

/// How many decoded bytes go by between two releases of the mapping's pages.
const RELEASE_EVERY: usize = 16 << 20;

/// A [`bytes::Buf`] over the model's bytes that releases what it has passed.
struct Releasing<'a> {
    data: &'a dyn ModelData,
    pos: usize,
    released: usize,
}

impl bytes::Buf for Releasing<'_> {
    fn remaining(&self) -> usize {
        self.data.as_ref().len() - self.pos
    }

    fn chunk(&self) -> &[u8] {
        &self.data.as_ref()[self.pos..]
    }

    fn advance(&mut self, n: usize) {
        // Buf's contract: `n` never exceeds `remaining()`.
        self.pos = (self.pos + n).min(self.data.as_ref().len());
        if self.pos - self.released >= RELEASE_EVERY {
            self.data.release(self.released..self.pos);
            self.released = self.pos;
        }
    }
}

/// Decodes the protobuf, releasing the file's pages behind the decoder; the
/// caller's reference to `bytes` must be the only one for the release to
/// shrink the process.
pub(super) fn decode(bytes: ModelBytes) -> Result<pb::ModelProto> {
    let mut buf = Releasing { data: &*bytes, pos: 0, released: 0 };
    let proto = <pb::ModelProto as prost::Message>::decode(&mut buf)
        .map_err(|e| InferError::Load(format!("the file is not a valid ONNX protobuf: {e}")))?;
    let len = AsRef::<[u8]>::as_ref(&*bytes).len();
    bytes.release(buf.released..len);
    Ok(proto)
}

/// The large initializers, converted to tract tensors one by one and taken
/// out of `proto`, which now declares each as a typed graph input instead.
pub(super) fn take_weights(
    proto: &mut pb::ModelProto,
    onnx: &fusiond_tract_ops::tract_onnx::Onnx,
) -> TractResult<Vec<(String, Tensor)>> {
    let Some(graph) = proto.graph.as_mut() else { return Ok(vec![]) };
    let listed: HashSet<String> = graph.input.iter().map(|i| i.name.clone()).collect();
    let mut weights = vec![];
    for t in std::mem::take(&mut graph.initializer) {
        if t.raw_data.len() < BIG {
            graph.initializer.push(t);
            continue;
        }
        let tensor = fusiond_tract_ops::tract_onnx::tensor::load_tensor(&*onnx.provider, &t, None)
            .map_err(|e| e.context(format!("converting initializer `{}`", t.name)))?;
        // IR < 4 lists initializers among the inputs already, with their type.
        if !listed.contains(&t.name) {
            graph.input.push(typed_input(&t));
        }
        weights.push((t.name, tensor));
        // `t`'s raw bytes are dropped here, before the next one is converted.
    }
    Ok(weights)
}

/// A graph input declaring `t`'s element type and shape.
fn typed_input(t: &pb::TensorProto) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value as Dim, Dimension};
    let dim = t.dims.iter().map(|&d| Dimension { value: Some(Dim::DimValue(d)), ..Default::default() }).collect();
    let tensor = pb::type_proto::Tensor { elem_type: t.data_type, shape: Some(pb::TensorShapeProto { dim }) };
    pb::ValueInfoProto {
        name: t.name.clone(),
        r#type: Some(pb::TypeProto { value: Some(pb::type_proto::Value::TensorType(tensor)), ..Default::default() }),
        ..Default::default()
    }
}

/// Turns the graph inputs [`take_weights`] declared back into constants
/// holding its tensors, in place, and drops them from the model's inputs.
pub(super) fn restore_weights(model: &mut InferenceModel, weights: Vec<(String, Tensor)>) -> TractResult<()> {
    let mut inputs = model.input_outlets()?.to_vec();
    for (name, tensor) in weights {
        let tensor = tensor.into_arc_tensor();
        let fact = TypedFact::try_from(tensor.clone())?;
        let node = model.node_by_name_mut(&name)?;
        node.op = Const::new(tensor)?.into();
        node.outputs[0].fact = fact.into();
        let id = node.id;
        inputs.retain(|o| o.node != id);
    }
    model.set_input_outlets(&inputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::Arc;

    fn shared_model(name: &str) -> PathBuf {
        let shared = std::env::var_os("FUSIOND_SHARED")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
        let path = shared.join("models").join(name);
        assert!(
            path.is_file(),
            "{} is missing: put the project's shared/ folder beside the checkout or set FUSIOND_SHARED",
            path.display()
        );
        path
    }

    fn run(mut model: InferenceModel, input: &Tensor) -> Vec<f32> {
        model.set_input_fact(0, InferenceFact::dt_shape(f32::datum_type(), tvec!(1, 3, 112, 112))).unwrap();
        let plan = model.into_optimized().unwrap().into_runnable().unwrap();
        let out = plan.run(tvec!(input.clone().into())).unwrap();
        out[0].try_as_plain_ram().and_then(|v| v.as_slice::<f32>().map(<[f32]>::to_vec)).unwrap()
    }

    /// The shared ArcFace through tract-onnx's own import and through
    /// take_weights / restore_weights: the same embedding.
    #[test]
    fn weights_taken_out_and_put_back_give_tracts_own_outputs_to_1e_5() {
        let bytes = std::fs::read(shared_model("arcface_fr_feature.onnx")).unwrap();
        let onnx = fusiond_tract_ops::tract_onnx::onnx();
        let own = onnx.model_for_read(&mut &bytes[..]).unwrap();
        let mut proto = decode(Arc::new(bytes)).unwrap();
        let weights = take_weights(&mut proto, &onnx).unwrap();
        assert!(weights.len() >= 10, "only {} initializers of 64 KiB or more", weights.len());
        let mut ours = onnx.model_for_proto_model(&proto).unwrap();
        restore_weights(&mut ours, weights).unwrap();
        assert_eq!(ours.input_outlets().unwrap().len(), 1, "the weights are inputs no more");
        let input: Tensor = tract_ndarray::Array4::from_shape_fn((1, 3, 112, 112), |(_, c, y, x)| {
            ((c * 7 + y * 3 + x) % 255) as f32 / 127.5 - 1.0
        })
        .into();
        let (a, b) = (run(own, &input), run(ours, &input));
        assert_eq!(a.len(), 512);
        let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        assert!(worst <= 1e-5, "the embeddings differ by {worst}");
    }
}
