//! 1×1 convolutions ("pointwise") with few input channels (YuNet's and
//! SCRFD's 16 to 152 channels, from 320×320 down) or few output channels
//! (SCRFD's lateral ones, to 16). tract runs each as a matrix product
//! whose input it first copies into packed panels, a pass as long as the
//! product itself on the large early maps; see [`MAX_CI`] for where
//! tract's own is the faster. `PointwiseConv` reads the NCHW rows where they
//! lie ([`fusiond_kernels::pointwise`]). The Conv parser here also wires
//! fusiond's other convolutions ([`PatchConv`], [`Depthwise`]) where they
//! fit.
//!
//! Its f32 kernels are used only on x86_64 with AVX2 and FMA (checked when a
//! model is loaded); elsewhere, the ARM boards among them, tract's own
//! convolution runs, since a kernel without those units would not beat
//! tract's assembly. The one exception is an INT8 convolution on a CPU with
//! an 8-bit dot product (aarch64's, too): it takes the integer product
//! ([`PatchConv::for_int8`]).

use super::depthwise::{may_be_depthwise, Depthwise};
use super::patch_conv::{integer_min_taps, PatchConv};
use super::{int8_weights, is_relu};
use super::{share_rows, StockParser};
use fusiond_kernels::pointwise::{kernel_available, pointwise, Packed, Run, MAX_CI, MAX_CO_ANY_CI};
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_core::ops::cnn::KernelFormat;
use tract_onnx::tract_core::{args_1, as_op, op_as_typed_op, op_out_of_plan};
use tract_onnx::tract_hir::internal::*;
use tract_onnx::tract_hir::ops::cnn::{Conv, PaddingSpec};
use tract_onnx::tract_hir::ops::nn::DataFormat;

/// tract's own Conv parser: every convolution starts there.
pub static STOCK: StockParser = StockParser::new("Conv");

/// The Conv parser: 1×1 convolutions of up to [`MAX_CI`] input and output
/// channels, or of up to [`MAX_CO_ANY_CI`] output channels, run as
/// [`PointwiseConv`].
pub fn parse(ctx: &ParsingContext, node: &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let (op, extra) = STOCK.parse(ctx, node)?;
    let conv = op.as_op().downcast_ref::<Box<dyn Expansion>>().and_then(|e| e.as_any().downcast_ref::<Conv>());
    match conv {
        Some(conv)
            if (kernel_available() || integer_min_taps().is_some())
                && plain(conv)
                && (conv.group.unwrap_or(1) == 1 || may_be_depthwise(conv)) =>
        {
            Ok((expand(PointwiseExpansion(conv.clone())), extra))
        }
        _ => Ok((op, extra)),
    }
}

/// Whether the node's attributes allow one of fusiond's convolutions: NCHW
/// and OIHW, no dilation or quantisation, the bias (if any) as the third
/// input; groups only as a depthwise convolution allows them. The kernel's
/// shape is checked when it is wired ([`PointwiseConv::for_facts`],
/// [`PatchConv::for_facts`], [`Depthwise::for_facts`]).
fn plain(conv: &Conv) -> bool {
    let quantised = [
        conv.x_scale_input,
        conv.x_zero_point_input,
        conv.k_scale_input,
        conv.k_zero_point_input,
        conv.y_scale_input,
        conv.y_zero_point_input,
    ]
    .iter()
    .any(Option::is_some)
        || conv.override_output_datum_type.is_some();
    conv.data_format == DataFormat::NCHW
        && conv.kernel_fmt == KernelFormat::OIHW
        && conv.k_input.unwrap_or(1) == 1
        && conv.bias_input.is_none_or(|b| b == 2)
        && ones(&conv.dilations)
        && !quantised
}

fn ones(v: &Option<TVec<usize>>) -> bool {
    v.as_ref().is_none_or(|v| v.iter().all(|d| *d == 1))
}

/// Whether a [`plain`] convolution's attributes allow a 1×1 kernel that
/// moves nothing: no stride or padding.
fn may_be_pointwise(conv: &Conv) -> bool {
    let no_padding = match &conv.padding {
        // With a 1×1 kernel and stride 1, "same" pads nothing either.
        PaddingSpec::Valid | PaddingSpec::SameUpper | PaddingSpec::SameLower => true,
        PaddingSpec::Explicit(b, a) | PaddingSpec::ExplicitOnnxPool(b, a, _) => b.iter().chain(a).all(|p| *p == 0),
    };
    conv.kernel_shape.as_ref().is_none_or(|k| k.iter().all(|d| *d == 1)) && ones(&conv.strides) && no_padding
}

/// The ONNX Conv as tract parses it; wired as [`PointwiseConv`],
/// [`PatchConv`] or [`Depthwise`] where the facts allow, as tract's own
/// convolution otherwise.
#[derive(Debug, Clone)]
struct PointwiseExpansion(Conv);

impl Expansion for PointwiseExpansion {
    fn name(&self) -> StaticName {
        "Conv".into()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        self.0.rules(s, inputs, outputs)
    }

    fn wire(&self, name: &str, model: &mut TypedModel, inputs: &[OutletId]) -> TractResult<TVec<OutletId>> {
        let bias = inputs.get(2).map(|b| model.outlet_fact(*b)).transpose()?;
        let (x, w) = (model.outlet_fact(inputs[0])?, model.outlet_fact(inputs[1])?);
        let f32_kernels = kernel_available();
        if self.0.group.unwrap_or(1) != 1 {
            return match Depthwise::for_facts(&self.0, x, w, bias).filter(|_| f32_kernels) {
                Some(op) => model.wire_node(name, op, &inputs[..1]),
                None => self.0.wire(name, model, inputs),
            };
        }
        let pointwise =
            (f32_kernels && may_be_pointwise(&self.0)).then(|| PointwiseConv::for_facts(x, w, bias)).flatten();
        if let Some(op) = pointwise {
            return model.wire_node(name, op, &inputs[..1]);
        }
        // An input on an 8-bit grid and INT8 weights (kept as integers, or
        // found again in the f32 ones folded from them) take the integer
        // product where the CPU has it.
        let in_grid = super::output_grid(model, inputs[0]);
        let taps = |k: &Tensor| k.shape().get(1..).map_or(0, |d| d.iter().product::<usize>());
        let int8 = match &w.konst {
            Some(k) if in_grid.is_some() && integer_min_taps().is_some_and(|m| taps(k) >= m) => {
                int8_weights::recovered(k)
            }
            Some(_) => None,
            None => int8_weights::behind(model, inputs[1]),
        };
        let patches = match int8.and_then(|q| PatchConv::for_int8(&self.0, (x, in_grid), q, bias)) {
            Some(op) => Some(op),
            None if f32_kernels && w.konst.is_some() => PatchConv::for_facts(&self.0, x, w, bias),
            None => None,
        };
        match patches {
            Some(op) => model.wire_node(name, op, &inputs[..1]),
            None => self.0.wire(name, model, inputs),
        }
    }
}

/// A 1×1 convolution of an NCHW f32 tensor with constant weights and bias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointwiseConv(Packed);

impl PointwiseConv {
    /// The op for these input facts (weights `co`×`ci`×1×1, bias `co` or
    /// none), or `None` where it does not apply.
    pub fn for_facts(x: &TypedFact, w: &TypedFact, bias: Option<&TypedFact>) -> Option<PointwiseConv> {
        let f32_dt = f32::datum_type();
        let w = w.konst.as_ref()?;
        let &[co, ci, 1, 1] = w.shape() else { return None };
        let channels_match = x.shape.rank() == 4 && x.shape[1].to_usize().is_ok_and(|c| c == ci);
        let fits = ci > 0 && co > 0 && (co <= MAX_CO_ANY_CI || (ci <= MAX_CI && co <= MAX_CI));
        if x.datum_type != f32_dt || w.datum_type() != f32_dt || !channels_match || !fits {
            return None;
        }
        let bias = super::const_bias(bias, co)?;
        let w = w.try_as_plain_ram().ok()?;
        Some(PointwiseConv(Packed::new(w.as_slice::<f32>().ok()?, &bias, co, ci)))
    }

    /// One batch item: `x` is `ci` planes of `hw` values, `y` `co` planes.
    /// With a thread pool set, the pixels are shared among its threads, so
    /// that each thread reads only its own part of the input.
    pub fn run(&self, x: &[f32], y: &mut [f32], hw: usize) {
        let (ci, co) = self.0.channels();
        share_rows(y, (hw, 1), ci, |pixels, mut share| {
            let run = Run { data: &x[pixels.start..], stride: hw, n: pixels.len() };
            pointwise(run, self.0.tiles(0..co), &mut share);
        });
    }
}

impl Op for PointwiseConv {
    fn name(&self) -> StaticName {
        if self.0.relu() { "FusiondPointwiseConv+Relu" } else { "FusiondPointwiseConv" }.into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        let (ci, co) = self.0.channels();
        Ok(vec![format!("{ci} → {co} channels")])
    }

    op_as_typed_op!();
}

impl EvalOp for PointwiseConv {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let x = args_1!(inputs);
        let &[n, c, h, w] = x.shape() else { bail!("Conv 1×1: a rank-4 NCHW input, not {:?}", x.shape()) };
        let (ci, co) = self.0.channels();
        ensure!(c == ci, "Conv 1×1: {c} input channels where the weights have {ci}");
        let hw = h * w;
        // SAFETY: every value is written below (`run` writes whole rows).
        #[allow(unsafe_code)]
        let mut y = unsafe { Tensor::uninitialized::<f32>(&[n, co, h, w])? };
        if n * hw > 0 {
            let xs = x.try_as_plain_ram()?;
            let mut ys = y.try_as_plain_ram_mut()?;
            let items =
                xs.as_slice::<f32>()?.chunks_exact(c * hw).zip(ys.as_slice_mut::<f32>()?.chunks_exact_mut(co * hw));
            for (x, y) in items {
                self.run(x, y, hw);
            }
        }
        Ok(tvec!(y.into_tvalue()))
    }
}

impl TypedOp for PointwiseConv {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let s = &inputs[0].shape;
        ensure!(s.rank() == 4, "Conv 1×1: a rank-4 NCHW input, not {s:?}");
        Ok(tvec!(f32::fact([s[0].clone(), self.0.channels().1.to_dim(), s[2].clone(), s[3].clone()])))
    }

    /// Takes in the 3×3 depthwise convolution (and ReLU) that reads only
    /// this node ([`super::pw_dw`]), or else the ReLU that alone reads it.
    fn declutter(&self, model: &TypedModel, node: &TypedNode) -> TractResult<Option<TypedModelPatch>> {
        if let Some(patch) = super::pw_dw::fuse(model, node, &self.0)? {
            return Ok(Some(patch));
        }
        match model.single_succ(node.id)? {
            Some(next) if !self.0.relu() && is_relu(model, next, node.id) => {
                TypedModelPatch::fuse_with_next(model, node, PointwiseConv(self.0.with_relu())).map(Some)
            }
            _ => Ok(None),
        }
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use fusiond_kernels::test_values as values;
    use tract_linalg::multithread::{multithread_tract_scope, Executor};

    /// The convolution as a plain triple loop.
    fn reference(x: &[f32], w: &[f32], b: &[f32], hw: usize, ci: usize, co: usize) -> Vec<f32> {
        let mut y = vec![0f32; co * hw];
        for o in 0..co {
            for p in 0..hw {
                y[o * hw + p] = b[o] + (0..ci).map(|k| w[o * ci + k] as f64 * x[k * hw + p] as f64).sum::<f64>() as f32;
            }
        }
        y
    }

    #[test]
    fn every_output_is_its_bias_plus_the_weighted_input_channels() {
        // Channel counts off the tile (6 = 4 + 2, 1), pixel counts off the
        // block (24·2 + 5, 7: the tails run through the scalar loop; 24·2
        // + 8 + 3 and 24 + 16, through the 8-pixel tiles too) and past one
        // copied run of blocks (24·9 + 5).
        // With AVX-512: 48-pixel blocks, 16-pixel tails (48·9 + 16 + 5,
        // 48 + 16). 100 channels copy one block at a time; with 7221 pixels
        // the work is worth sharing among threads, whose shares of pixels
        // start off the block.
        let cases = [
            (100, 6, 7221),
            (3, 6, 53),
            (16, 16, 48),
            (5, 1, 7),
            (40, 9, 100),
            (8, 5, 221),
            (7, 5, 59),
            (16, 8, 40),
            (9, 6, 453),
            (33, 5, 64),
        ];
        for (ci, co, hw) in cases {
            let (x, w, b) = (values(ci * hw, 1), values(co * ci, 2), values(co, 3));
            let packed = Packed::new(&w, &b, co, ci);
            let ops = [PointwiseConv(packed.clone()), PointwiseConv(packed.with_relu())];
            for (op, threads) in ops.iter().flat_map(|op| [(op, 1), (op, 3)]) {
                let mut y = vec![f32::NAN; co * hw];
                multithread_tract_scope(Executor::multithread(threads), || op.run(&x, &mut y, hw));
                let relu = op.0.relu();
                let want = reference(&x, &w, &b, hw, ci, co).into_iter().map(|v| if relu { v.max(0.0) } else { v });
                assert!(y.iter().all(|v| v.is_finite()), "ci {ci} co {co} hw {hw}: an output left unwritten");
                let worst = y.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(worst < 1e-5, "ci {ci} co {co} hw {hw}, relu {relu}, {threads} threads: off by {worst}");
            }
        }
    }

    /// An INT8 graph's rounding taken into the tiles (in registers with
    /// AVX-512, a pass after the AVX2 tiles, per value in the scalar tail)
    /// gives the pass after them, to the bit, with and without the ReLU.
    #[test]
    fn the_rounding_in_the_tiles_is_the_pass_after_them_to_the_bit() {
        use fusiond_kernels::pointwise::{pointwise, Run, Tiles};
        use fusiond_kernels::quant::{fake_quant_in_place, Grid};
        let grid = Grid { scale: 0.03, zero_point: 40.0, lo: 0.0, hi: 255.0 };
        for (ci, co, hw) in [(16, 16, 48 * 9 + 16 + 5), (3, 6, 53), (40, 9, 100)] {
            let (x, w, b) = (values(ci * hw, 1), values(co * ci, 2), values(co, 3));
            for packed in [Packed::new(&w, &b, co, ci), Packed::new(&w, &b, co, ci).with_relu()] {
                let mut planes = [vec![f32::NAN; co * hw], vec![f32::NAN; co * hw]];
                for (plane, round) in planes.iter_mut().zip([Some(grid), None]) {
                    let mut rows: Vec<&mut [f32]> = plane.chunks_exact_mut(hw).collect();
                    let run = Run { data: &x, stride: hw, n: hw };
                    pointwise(run, Tiles { round, ..packed.tiles(0..co) }, &mut rows);
                }
                let [rounded, mut after] = planes;
                fake_quant_in_place(&mut after, grid);
                let same = rounded.iter().zip(&after).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "ci {ci} co {co} hw {hw}, relu {}: the rounding differs", packed.relu());
            }
        }
    }

    #[test]
    fn the_op_applies_only_to_constant_1x1_f32_weights_that_fit_the_input() {
        let x = f32::fact([1, 3, 4, 4]);
        let konst = |t: Tensor| TypedFact::try_from(t).unwrap();
        let w = konst(Tensor::from_shape(&[2, 3, 1, 1], &[1f32; 6]).unwrap());
        let bias = konst(tensor1(&[0.5f32, 1.0]));
        let op = PointwiseConv::for_facts(&x, &w, Some(&bias)).expect("a pointwise convolution");
        assert_eq!((op.0.channels(), op.0.tiles(0..2).bias[..2].to_vec()), ((3, 2), vec![0.5, 1.0]));
        assert!(PointwiseConv::for_facts(&x, &w, None).is_some(), "no bias");
        let three = konst(Tensor::from_shape(&[2, 3, 3, 3], &[1f32; 54]).unwrap());
        assert!(PointwiseConv::for_facts(&x, &three, None).is_none(), "a 3×3 kernel");
        let other_ci = konst(Tensor::from_shape(&[2, 4, 1, 1], &[1f32; 8]).unwrap());
        assert!(PointwiseConv::for_facts(&x, &other_ci, None).is_none(), "4 channels for 3");
        assert!(PointwiseConv::for_facts(&x, &f32::fact([2, 3, 1, 1]), None).is_none(), "weights computed at run time");
        // Past MAX_CI input or output channels, only with few output channels.
        let many_out = konst(Tensor::from_shape(&[MAX_CI + 1, 3, 1, 1], &vec![1f32; (MAX_CI + 1) * 3]).unwrap());
        assert!(PointwiseConv::for_facts(&x, &many_out, None).is_none(), "more output channels than pay");
        let co = MAX_CO_ANY_CI + 1;
        let wide = konst(Tensor::from_shape(&[co, MAX_CI + 1, 1, 1], &vec![1f32; co * (MAX_CI + 1)]).unwrap());
        let x_wide = f32::fact([1, MAX_CI + 1, 4, 4]);
        assert!(PointwiseConv::for_facts(&x_wide, &wide, None).is_none(), "more input channels than pay");
        let narrow =
            konst(Tensor::from_shape(&[co - 1, MAX_CI + 1, 1, 1], &vec![1f32; (co - 1) * (MAX_CI + 1)]).unwrap());
        assert!(PointwiseConv::for_facts(&x_wide, &narrow, None).is_some(), "few output channels");
        let long_bias = konst(tensor1(&[0f32; 3]));
        assert!(PointwiseConv::for_facts(&x, &w, Some(&long_bias)).is_none(), "3 biases for 2 channels");
    }
}
