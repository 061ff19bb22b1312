//! Nearest-neighbour Resizes that repeat each pixel a whole number of times,
//! driven by a constant `sizes` input: SCRFD's two upsamplings (16×40×40 →
//! 80×80 and 16×20×20 → 40×40, their sizes read from the lateral maps' shapes).
//! tract lowers such a Resize to its row-copying `NearestUpsample` only when
//! `scales` drive it; with `sizes` its generic Resize resamples axis by axis
//! through an index and weight plan, many times slower than a row copy
//! (figures: crates/tract-ops/README.md). [`lower`] makes the same replacement
//! for `sizes`, once decluttering has folded them to constants, under tract's
//! own test that the plan is a pixel replication.

use tract_onnx::tract_core::ops::nn::resize::{is_pixel_replication, Interpolator, NearestUpsample, Resize};
use tract_onnx::tract_hir::internal::*;

/// Replaces every [`Resize`] of `model` that [`whole_scales`] finds by a
/// `NearestUpsample` of those scales; returns how many. The replaced
/// nodes are left unconnected, for `compact` or the optimiser to drop.
pub fn lower(model: &mut TypedModel) -> TractResult<usize> {
    let mut lowered = 0;
    for id in model.eval_order()? {
        let node = model.node(id);
        let Some(scales) = whole_scales(model, node)? else { continue };
        let patch = TypedModelPatch::replace_single_op(model, node, &node.inputs[..1], NearestUpsample { scales })?;
        patch.apply(model)?;
        lowered += 1;
    }
    Ok(lowered)
}

/// The whole factor of each axis where `node` is a nearest [`Resize`] of
/// f32 values to constant `sizes` (no `scales`), each a multiple of the
/// input's concrete length, and tract's plan for each resized axis repeats
/// each input pixel that many times; `None` otherwise.
fn whole_scales(model: &TypedModel, node: &TypedNode) -> TractResult<Option<TVec<usize>>> {
    let Some(op) = node.op_as::<Resize>() else { return Ok(None) };
    let (Some(ix), None, Interpolator::Nearest) = (op.optional_sizes_input, op.optional_scales_input, &op.interpolator)
    else {
        return Ok(None);
    };
    let input = model.outlet_fact(node.inputs[0])?;
    let sizes = node.inputs.get(ix).map(|o| model.outlet_fact(*o)).transpose()?.and_then(|f| f.konst.clone());
    let (Some(sizes), Some(shape)) = (sizes, input.shape.as_concrete()) else { return Ok(None) };
    if input.datum_type != f32::datum_type() || sizes.len() != shape.len() {
        return Ok(None);
    }
    let sizes = sizes.cast_to::<i64>()?;
    let mut scales = tvec!();
    for (&len_in, &len_out) in shape.iter().zip(sizes.try_as_plain_ram()?.as_slice::<i64>()?) {
        let Ok(len_out) = usize::try_from(len_out) else { return Ok(None) };
        if len_in == 0 || len_out % len_in != 0 || len_out == 0 {
            return Ok(None);
        }
        let scale = len_out / len_in;
        if scale > 1 && !is_pixel_replication(&op.plan_axis(scale as f32, len_in, len_out), scale) {
            return Ok(None);
        }
        scales.push(scale);
    }
    Ok(scales.iter().any(|s| *s > 1).then_some(scales))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fusiond_kernels::test_values as values;
    use tract_onnx::tract_core::ops::nn::resize::{CoordTransformer, Nearest};

    /// A model of one Resize of a 1×2×3×4 input to constant `sizes`.
    fn model(coord_transformer: CoordTransformer, sizes: [i64; 4]) -> TypedModel {
        let mut model = TypedModel::default();
        let x = model.add_source("x", f32::fact([1, 2, 3, 4])).unwrap();
        let sizes = model.add_const("sizes", tensor1(&sizes)).unwrap();
        let op = Resize {
            coord_transformer,
            interpolator: Interpolator::Nearest,
            nearest: Nearest::Floor,
            optional_scales_input: None,
            optional_sizes_input: Some(1),
        };
        let y = model.wire_node("resize", op, &[x, sizes]).unwrap();
        model.select_output_outlets(&y).unwrap();
        model
    }

    fn run(model: TypedModel, x: &Tensor) -> Tensor {
        let plan = model.into_runnable().unwrap();
        plan.run(tvec!(x.clone().into_tvalue())).unwrap().remove(0).into_tensor()
    }

    #[test]
    fn whole_multiples_become_an_upsample_with_the_resizes_own_outputs() {
        let x = Tensor::from_shape(&[1, 2, 3, 4], &values(24, 7)).unwrap();
        for sizes in [[1, 2, 6, 8], [1, 2, 3, 12], [1, 2, 9, 4]] {
            let stock = model(CoordTransformer::Asymmetric, sizes);
            let mut lowered = stock.clone();
            assert_eq!(lower(&mut lowered).unwrap(), 1, "{sizes:?}");
            lowered.compact().unwrap();
            let ops: Vec<_> = lowered.nodes().iter().map(|n| n.op().name().to_string()).collect();
            assert!(ops.contains(&"NearestUpsample".to_string()) && !ops.contains(&"Resize".to_string()), "{ops:?}");
            assert_eq!(run(lowered, &x), run(stock, &x), "{sizes:?}");
        }
    }

    #[test]
    fn other_sizes_and_coordinates_keep_the_resize() {
        // Not a whole multiple; no change at all; half-pixel coordinates,
        // whose plan at ×2 does not repeat each pixel twice.
        for (coords, sizes) in [
            (CoordTransformer::Asymmetric, [1, 2, 5, 8]),
            (CoordTransformer::Asymmetric, [1, 2, 3, 4]),
            (CoordTransformer::HalfPixel, [1, 2, 6, 8]),
        ] {
            let mut m = model(coords.clone(), sizes);
            assert_eq!(lower(&mut m).unwrap(), 0, "{coords:?} {sizes:?}");
        }
    }
}
