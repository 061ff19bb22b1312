//! A pointwise convolution followed by a 3×3 depthwise one (and often a
//! ReLU), as YuNet's first five blocks and SCRFD's first four are: 16 to
//! 64 channels over 320×320 and 160×160 maps, the depthwise half at stride
//! 1 or 2. Run one after the other, each node writes its whole output (up
//! to 6.5 MB) and the next reads it back from memory.
//! `PointwiseDepthwise` computes a few rows of the pointwise output at a
//! time into a buffer that stays in the L2 cache, convolves them there and
//! writes only the block's output. Rows are shared among tract's threads;
//! each thread computes the two rows around its share once more.
//!
//! Where a 2×2 max pooling alone reads the block (YuNet's first and
//! fifth), it is taken in too: the block then writes a quarter of its
//! output, and the pooling shares the block's threads.
//!
//! In an INT8 block at stride 1, on a CPU with AVX-512 VNNI, the depthwise half
//! runs as integers ([`fusiond_kernels::depthwise_int8`]): the rows kept are
//! then the pointwise output's integers on its grid. Where the block's input
//! lies on a grid too, the pointwise half runs as integers as well
//! ([`fusiond_kernels::pointwise_int8`]) and writes those integers itself.
//!
//! [`fuse`] replaces the nodes from a [`super::pointwise::PointwiseConv`]'s
//! `declutter`, so it applies wherever that kernel does (x86_64 with AVX2
//! and FMA).

use super::depthwise::Depthwise;
use super::fake_quant_grid;
use super::max_pool::{pool_rows, MaxPool2x2};
use super::{is_relu, share_rows};
use fusiond_kernels::depthwise::{depthwise_rows, depthwise_rows_s2};
use fusiond_kernels::depthwise_int8::{self, DotDepthwise, MARGIN};
use fusiond_kernels::pointwise::{pointwise, Packed, Run, Tiles};
use fusiond_kernels::pointwise_int8::DotPointwise;
use fusiond_kernels::quant::{fake_quant_in_place, Grid};
use held::Held;
use std::ops::Range;
use std::sync::Arc;
use tract_onnx::tract_core::{args_1, as_op, op_as_typed_op, op_out_of_plan};
use tract_onnx::tract_hir::internal::*;

/// The pointwise output a thread keeps at once, in values: 256 KiB, half
/// of an L2 cache of 512 KiB, the smallest it assumes (tuning:
/// crates/tract-ops/README.md).
const MID_VALUES: usize = 64 << 10;

/// The patch that runs `node` (a [`super::pointwise::PointwiseConv`]), a
/// ReLU after it (SCRFD has one there), the depthwise convolution and a
/// ReLU after that as one [`PointwiseDepthwise`], when each feeds only the
/// next, and a 2×2 max pooling after them. In an INT8 graph the
/// quantise-dequantise pair ([`super::FakeQuant`]) after the pointwise
/// half and the one after the depthwise half (or its ReLU) are taken in
/// too.
pub fn fuse(model: &TypedModel, node: &TypedNode, pw: &Packed) -> TractResult<Option<TypedModelPatch>> {
    let mut last = node;
    let mid_relu = take_relu(model, &mut last)?;
    let mid_grid = take_fake_quant(model, &mut last)?;
    let Some(dw_node) = model.single_succ(last.id)? else { return Ok(None) };
    if dw_node.inputs.first() != Some(&last.id.into()) {
        return Ok(None);
    }
    let Some(dw) = dw_node.op_as::<Depthwise>().filter(|dw| dw.kernels.len() == pw.channels().1) else {
        return Ok(None);
    };
    last = dw_node;
    // The depthwise op may have taken in its ReLU and pair already.
    let relu = dw.relu || (dw.out_grid.is_none() && take_relu(model, &mut last)?);
    let out_grid = match dw.out_grid {
        Some(grid) => Some(grid),
        None => take_fake_quant(model, &mut last)?,
    };
    let pool = dw.stride == 1 && take_max_pool(model, &mut last)?;
    let (dw, dw_bias, stride) = (dw.kernels.clone(), dw.bias.clone(), dw.stride);
    let pw = if mid_relu { pw.with_relu() } else { pw.clone() };
    let int8 = match mid_grid {
        Some(grid) if stride == 1 && depthwise_int8::available() => {
            DotDepthwise::new(&dw, &dw_bias, grid).map(Arc::new)
        }
        _ => None,
    };
    let int8_pw = match (&int8, mid_grid, super::output_grid(model, node.inputs[0])) {
        (Some(_), Some(mid), Some(input)) => {
            let (weights, bias) = pw.unpacked();
            DotPointwise::new(&weights, &bias, pw.channels(), (input, mid), pw.relu()).map(Arc::new)
        }
        _ => None,
    };
    let op = PointwiseDepthwise { pw, mid_grid, dw, dw_bias, stride, relu, out_grid, pool, int8, int8_pw };
    let mut patch = TypedModelPatch::default();
    let input = patch.tap_model(model, node.inputs[0])?;
    let wire = patch.wire_node(&node.name, op, &[input])?;
    patch.shunt_outside(model, last.id.into(), wire[0])?;
    Ok(Some(patch))
}

/// What `pick` finds in the node that alone reads `last`, which then moves
/// on to that node; `None` (and `last` stays) where it finds nothing.
fn take<'m, T>(
    model: &'m TypedModel,
    last: &mut &'m TypedNode,
    pick: impl Fn(&TypedNode, usize) -> Option<T>,
) -> TractResult<Option<T>> {
    let Some(next) = model.single_succ(last.id)? else { return Ok(None) };
    let picked = pick(next, last.id);
    if picked.is_some() {
        *last = next;
    }
    Ok(picked)
}

/// Whether a ReLU alone reads `last`, which then moves on to it.
fn take_relu<'m>(model: &'m TypedModel, last: &mut &'m TypedNode) -> TractResult<bool> {
    Ok(take(model, last, |next, from| is_relu(model, next, from).then_some(()))?.is_some())
}

/// Whether a [`MaxPool2x2`] alone reads `last`, which then moves on to it.
fn take_max_pool<'m>(model: &'m TypedModel, last: &mut &'m TypedNode) -> TractResult<bool> {
    Ok(take(model, last, |next, _| (next.op_is::<MaxPool2x2>() && next.inputs.len() == 1).then_some(()))?.is_some())
}

/// The grid of the [`super::FakeQuant`] that alone reads `last`, which then moves
/// on to it.
fn take_fake_quant<'m>(model: &'m TypedModel, last: &mut &'m TypedNode) -> TractResult<Option<Grid>> {
    take(model, last, |next, _| fake_quant_grid(next))
}

/// A 1×1 convolution, a 3×3 depthwise convolution (stride 1 or 2, padded
/// by one) and an optional ReLU, on NCHW f32.
#[derive(Debug, Clone, PartialEq)]
pub struct PointwiseDepthwise {
    pw: Packed,
    /// The grid the pointwise output is rounded to, in an INT8 graph.
    mid_grid: Option<Grid>,
    /// The depthwise kernels, one a channel, row by row.
    dw: Arc<Vec<[f32; 9]>>,
    dw_bias: Arc<Vec<f32>>,
    /// The depthwise half's stride, 1 or 2, across and down alike.
    stride: usize,
    relu: bool,
    /// The grid the output is rounded to, in an INT8 graph.
    out_grid: Option<Grid>,
    /// Whether the output is pooled, 2×2 with stride 2 (its height and
    /// width halved, rounded down); only after a depthwise half of stride 1.
    pool: bool,
    /// The depthwise half as integers, where the CPU runs it and the block
    /// is INT8 (`mid_grid`) at stride 1 with integer kernels.
    int8: Option<Arc<DotDepthwise>>,
    /// The pointwise half as integers too, where the depthwise half is and
    /// the block's input lies on a grid ([`super::output_grid`]).
    int8_pw: Option<Arc<DotPointwise>>,
}

impl Eq for PointwiseDepthwise {}

impl PointwiseDepthwise {
    /// The grid its outputs are rounded to, in an INT8 graph.
    pub fn out_grid(&self) -> Option<Grid> {
        self.out_grid
    }

    /// The output's height and width for an input of `h`×`w`.
    fn out_size(&self, h: usize, w: usize) -> (usize, usize) {
        match (self.pool, self.stride) {
            (true, _) => (h / 2, w / 2),
            (false, 2) => (h.div_ceil(2), w.div_ceil(2)),
            _ => (h, w),
        }
    }

    /// One batch item: `x` is `ci` planes of `h`×`w`, `y` `co` planes of
    /// [`Self::out_size`]. Output rows are shared among tract's threads,
    /// pairs of block rows when pooled.
    pub fn run(&self, x: &[f32], y: &mut [f32], h: usize, w: usize) {
        // Each output value takes its pointwise inputs and 9 taps, for each
        // of the depthwise values under it.
        let under = if self.pool { 4 } else { self.stride * self.stride };
        let work = under * (self.pw.channels().0 + 9);
        if self.pool {
            share_rows(y, (h / 2, w / 2), work, |r, share| self.rows(x, (h, w), 2 * r.start..2 * r.end, share));
        } else {
            share_rows(y, self.out_size(h, w), work, |range, share| self.rows(x, (h, w), range, share));
        }
    }

    /// Block rows `range` (before pooling) of every plane into `out` (one
    /// slice a plane, holding those rows, or the pooled rows of them), a
    /// few rows at a time: each step computes the pointwise rows it needs
    /// into [`Held`], past those it keeps from the step before.
    fn rows(&self, x: &[f32], (h, w): (usize, usize), range: Range<usize>, mut out: Vec<&mut [f32]>) {
        let (co, s) = (self.pw.channels().1, self.stride);
        let ow = self.out_size(h, w).1;
        // A step's block rows read s × step + 1 pointwise rows (+ 1 kept).
        let held_rows = (MID_VALUES / (co * w).max(1)).max(3);
        let step = if s == 2 { (held_rows - 1) / 2 } else { held_rows - 2 };
        // Pooled, a step takes whole pairs of rows (`range` starts even).
        let step = if self.pool { (step & !1).max(2) } else { step };
        let pad = self.int8.as_ref().map(|d| d.pad());
        let mut held = Held::new(co, s * step + 2, w, (pad, self.int8_pw.is_none()));
        // A step's block rows before pooling and a row of scratch, or the
        // stride-2 kernel's split rows.
        let mut scratch = vec![0f32; if self.pool { (step + 1) * w } else { 0 }];
        // The next pointwise row to compute, and the row in the first slot.
        let (mut next, mut first_slot) = (0, 0);
        for y0 in range.clone().step_by(step) {
            let y1 = (y0 + step).min(range.end);
            // Block row y reads pointwise rows s × y - 1 to s × y + 1.
            let (lo, hi) = ((s * y0).saturating_sub(1), (s * (y1 - 1) + 2).min(h));
            if next > lo {
                held.keep(lo - first_slot..next - first_slot);
            }
            let first = next.max(lo);
            self.pointwise_rows(x, (h, w), &mut held, (first - lo, first..hi));
            (next, first_slot) = (hi, lo);
            let (a, b) = (y0 - range.start, y1 - range.start);
            let done = if self.pool { (a / 2 * ow, b / 2 * ow) } else { (a * ow, b * ow) };
            // The slots of pointwise rows s × y0 - 1 to s × (y1 - 1) + 1;
            // none for the rows past the plane's edges.
            let wanted: Vec<Option<usize>> = (s * y0..s * (y1 - 1) + 3)
                .map(|r| r.checked_sub(1).filter(|r| *r >= lo && *r < hi).map(|r| r - lo))
                .collect();
            for (c, out) in out.iter_mut().enumerate() {
                self.finish_channel(c, &held, &wanted, &mut out[done.0..done.1], &mut scratch);
            }
        }
    }

    /// Pointwise rows `rows` of every plane into `held`'s slots from
    /// `slot`: rounded to the middle grid in the tiles, or on the way to
    /// the integers where the depthwise half runs on them.
    fn pointwise_rows(&self, x: &[f32], (h, w): (usize, usize), held: &mut Held, (slot, rows): (usize, Range<usize>)) {
        if let Some(pw) = &self.int8_pw {
            let (pitch, stride) = (w + MARGIN, held.istride);
            for (i, r) in rows.enumerate() {
                pw.row((x, h * w, r * w), w, (&mut held.ints, stride, (slot + i) * pitch), &mut held.words);
            }
            return;
        }
        let n = rows.len() * w;
        let x_run = Run { data: &x[rows.start * w..], stride: h * w, n };
        let mut new: Vec<&mut [f32]> =
            held.mid.chunks_exact_mut(held.stride).map(|plane| &mut plane[slot * w..][..n]).collect();
        let round = if self.int8.is_some() { None } else { self.mid_grid };
        pointwise(x_run, Tiles { round, ..self.pw.tiles(0..self.pw.channels().1) }, &mut new);
        if let Some(int8) = &self.int8 {
            let pitch = w + MARGIN;
            for (new, plane) in new.iter().zip(held.ints.chunks_exact_mut(held.istride)) {
                let at = plane[slot * pitch..].chunks_exact_mut(pitch);
                new.chunks_exact(w).zip(at).for_each(|(row, ints)| int8.to_integers(row, ints));
            }
        }
    }

    /// Channel `c`'s block rows of a step into `done`, from the slots
    /// `wanted` of its pointwise rows.
    fn finish_channel(
        &self,
        c: usize,
        held: &Held,
        wanted: &[Option<usize>],
        done: &mut [f32],
        scratch: &mut Vec<f32>,
    ) {
        if let Some(int8) = &self.int8 {
            let inputs: Vec<&[u8]> = wanted.iter().map(|r| r.map_or(&held.pads[..], |r| held.ints_row(c, r))).collect();
            let dst = |rows: &mut [&mut [f32]]| int8.rows(c, &inputs, (self.relu, self.out_grid), rows);
            self.finish_rows((held.w, inputs.len() - 2), done, scratch, (true, dst));
        } else {
            let inputs: Vec<&[f32]> =
                wanted.iter().map(|r| r.map_or(&held.zeros[..], |r| held.mid_row(c, r))).collect();
            self.finish(c, &inputs, done, scratch);
        }
    }

    /// Channel `c`'s block rows from its pointwise rows `inputs` (those
    /// they read), into `done`: directly, or through `scratch` and then
    /// pooled.
    fn finish(&self, c: usize, inputs: &[&[f32]], done: &mut [f32], scratch: &mut Vec<f32>) {
        let w = inputs[0].len();
        if self.stride == 2 {
            let mut dst: Vec<&mut [f32]> = done.chunks_exact_mut(w.div_ceil(2)).collect();
            depthwise_rows_s2(inputs, &self.dw[c], (self.dw_bias[c], self.relu), &mut dst, scratch);
            if let Some(grid) = self.out_grid {
                fake_quant_in_place(done, grid);
            }
            return;
        }
        let conv = |dst: &mut [&mut [f32]]| depthwise_rows(inputs, &self.dw[c], self.dw_bias[c], self.relu, dst);
        self.finish_rows((w, inputs.len() - 2), done, scratch, (false, conv));
    }

    /// `n` block rows of `w` pixels at stride 1, which `conv` writes
    /// (already `rounded` to the output grid, or rounded here), pooled
    /// where the block does that, into `done`: directly, or through
    /// `scratch` and then pooled.
    fn finish_rows<F>(&self, (w, n): (usize, usize), done: &mut [f32], scratch: &mut [f32], (rounded, conv): (bool, F))
    where
        F: FnOnce(&mut [&mut [f32]]),
    {
        let block = if self.pool { &mut scratch[..n * w] } else { &mut *done };
        let mut dst: Vec<&mut [f32]> = block.chunks_exact_mut(w).collect();
        conv(&mut dst);
        if let (Some(grid), false) = (self.out_grid, rounded) {
            fake_quant_in_place(block, grid);
        }
        if self.pool {
            let (block, scratch) = scratch.split_at_mut(n * w);
            for (pair, line) in block.chunks_exact(2 * w).zip(done.chunks_exact_mut(w / 2)) {
                pool_rows(&pair[..w], &pair[w..], line, scratch);
            }
        }
    }
}

impl Op for PointwiseDepthwise {
    fn name(&self) -> StaticName {
        let part = |on: bool, name: &'static str| if on { name } else { "" };
        let mid = format!("{}{}", part(self.pw.relu(), "+Relu"), part(self.mid_grid.is_some(), "+FakeQuant"));
        let (relu, out) = (part(self.relu, "+Relu"), part(self.out_grid.is_some(), "+FakeQuant"));
        let (int8, pool) = (part(self.int8.is_some(), "Int8"), part(self.pool, "+MaxPool2x2"));
        let pw = part(self.int8_pw.is_some(), "Int8");
        format!("FusiondPointwise{pw}{mid}+Depthwise{int8}{relu}{out}{pool}").into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        let (ci, co) = self.pw.channels();
        Ok(vec![format!("{ci} → {co} channels, then 3×3 per channel at stride {}", self.stride)])
    }

    op_as_typed_op!();
}

impl EvalOp for PointwiseDepthwise {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let x = args_1!(inputs);
        let (ci, co) = self.pw.channels();
        let &[n, c, h, w] = x.shape() else { bail!("Conv 1×1 + 3×3: a rank-4 NCHW input, not {:?}", x.shape()) };
        ensure!(c == ci, "Conv 1×1 + 3×3: {c} input channels where the weights have {ci}");
        let (oh, ow) = self.out_size(h, w);
        // SAFETY: every value is written below (`run` writes whole planes).
        #[allow(unsafe_code)]
        let mut y = unsafe { Tensor::uninitialized::<f32>(&[n, co, oh, ow])? };
        if n * oh * ow > 0 {
            let xs = x.try_as_plain_ram()?;
            let mut ys = y.try_as_plain_ram_mut()?;
            let items = xs
                .as_slice::<f32>()?
                .chunks_exact(c * h * w)
                .zip(ys.as_slice_mut::<f32>()?.chunks_exact_mut(co * oh * ow));
            for (x, y) in items {
                self.run(x, y, h, w);
            }
        }
        Ok(tvec!(y.into_tvalue()))
    }
}

impl TypedOp for PointwiseDepthwise {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let s = &inputs[0].shape;
        ensure!(s.rank() == 4, "Conv 1×1 + 3×3: a rank-4 NCHW input, not {s:?}");
        let (h, w) = match (self.pool, self.stride) {
            (true, _) => (s[2].clone() / 2u64, s[3].clone() / 2u64),
            (false, 2) => ((s[2].clone() + 1u64) / 2u64, (s[3].clone() + 1u64) / 2u64),
            _ => (s[2].clone(), s[3].clone()),
        };
        Ok(tvec!(f32::fact([s[0].clone(), self.pw.channels().1.to_dim(), h, w])))
    }

    as_op!();
}

#[path = "pw_dw_held.rs"]
mod held;

#[cfg(test)]
#[path = "pw_dw_tests.rs"]
mod tests;
