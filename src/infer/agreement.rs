//! How closely two runs of a model agree: an image-shaped output (a
//! swapped face) by PSNR against the reference, any other (an embedding, a
//! detector's maps) by cosine. The FP16 self-test and the GPU check's
//! comparison with tract both judge with it.

use super::Outputs;

/// The least agreement a run must keep with its reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// For image-shaped outputs, the reference's range being the peak.
    pub min_psnr_db: f64,
    /// For any other output.
    pub min_cosine: f64,
}

impl Bounds {
    /// FP16 against FP32: the FP16 self-test's bounds.
    pub const FP16: Bounds = Bounds { min_psnr_db: 35.0, min_cosine: 0.99 };
    /// FP32 on another engine or provider (TF32 convolutions on a GPU
    /// included) against tract.
    pub const FP32: Bounds = Bounds { min_psnr_db: 40.0, min_cosine: 0.999 };
}

/// PSNR of `b` against `a`, the peak being `a`'s range.
pub fn psnr(a: &[f32], b: &[f32]) -> f64 {
    let (lo, hi) = a.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
    let peak = f64::from(hi - lo).max(1e-6);
    let mse = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum::<f64>() / a.len().max(1) as f64;
    if mse.is_nan() {
        f64::NEG_INFINITY
    } else if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (peak * peak / mse).log10()
    }
}

/// Cosine of the angle between `a` and `b` (NaN counts as no agreement).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let c = dot / (norm(a) * norm(b));
    if c.is_nan() {
        if norm(a) == 0.0 && norm(b) == 0.0 {
            1.0
        } else {
            -1.0
        }
    } else {
        c
    }
}

/// An image-shaped tensor: `[n, 3, h, w]` with h, w of 16 or more.
fn image_shaped(shape: &[usize]) -> bool {
    matches!(shape, [_, 3, h, w] if *h >= 16 && *w >= 16)
}

/// `Ok(summary)` when every output of `other` agrees with `reference`
/// within `bounds`, else the first that does not and by how much.
pub fn judge(reference: &Outputs, other: &Outputs, bounds: Bounds) -> Result<String, String> {
    let Bounds { min_psnr_db, min_cosine } = bounds;
    let mut least_db: Option<(f64, &str)> = None;
    let mut least_cos: Option<(f64, &str)> = None;
    for ((name, a), (_, b)) in reference.iter().zip(other.iter()) {
        if a.shape() != b.shape() {
            return Err(format!("output `{name}` has shape {:?}, the reference {:?}", b.shape(), a.shape()));
        }
        if image_shaped(a.shape()) {
            let db = psnr(a.data(), b.data());
            if db < min_psnr_db {
                return Err(format!("output `{name}`: PSNR {db:.1} dB (at least {min_psnr_db} wanted)"));
            }
            least_db = least_db.filter(|(l, _)| *l <= db).or(Some((db, name)));
        } else {
            let c = cosine(a.data(), b.data());
            if c < min_cosine {
                return Err(format!("output `{name}`: cosine {c:.4} (at least {min_cosine} wanted)"));
            }
            least_cos = least_cos.filter(|(l, _)| *l <= c).or(Some((c, name)));
        }
    }
    let mut summary = Vec::new();
    if let Some((db, name)) = least_db {
        summary.push(format!("PSNR {db:.1} dB ({name})"));
    }
    if let Some((c, name)) = least_cos {
        summary.push(format!("cosine {c:.5} ({name})"));
    }
    Ok(summary.join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::Tensor;
    use super::*;
    use std::sync::Arc;

    fn outputs(tensors: Vec<Tensor>) -> Outputs {
        let names: Arc<[String]> = (0..tensors.len()).map(|i| format!("out{i}")).collect();
        Outputs::new(names, tensors)
    }

    /// A smooth picture in 0.1..0.9, with alternating noise of `noise`.
    fn face(noise: f32) -> Tensor {
        let data = (0..3 * 32 * 32)
            .map(|i| 0.5 + 0.4 * (i as f32 * 0.05).sin() + noise * if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        Tensor::new(&[1, 3, 32, 32], data).unwrap()
    }

    #[test]
    fn a_face_that_drifts_is_refused_and_one_that_keeps_is_accepted() {
        // Noise 0.004 on a range of about 0.8 is 46 dB, 0.02 is 32 dB.
        let reference = outputs(vec![face(0.0)]);
        assert!(judge(&reference, &outputs(vec![face(0.004)]), Bounds::FP16).unwrap().contains("dB"));
        let err = judge(&reference, &outputs(vec![face(0.02)]), Bounds::FP16).unwrap_err();
        assert!(err.contains("PSNR") && err.contains("35"), "{err}");
        assert!(judge(&reference, &outputs(vec![face(0.004)]), Bounds::FP32).is_ok());
        assert!(judge(&reference, &outputs(vec![face(0.01)]), Bounds::FP32).is_err());
    }

    #[test]
    fn an_embedding_below_the_cosine_bound_is_refused() {
        let a: Vec<f32> = (0..512).map(|i| (i as f32 * 0.1).sin()).collect();
        let close: Vec<f32> = a.iter().enumerate().map(|(i, v)| v + 0.01 * (i as f32).cos()).collect();
        let far: Vec<f32> = a.iter().enumerate().map(|(i, v)| v + 0.3 * (i as f32 * 1.7).cos()).collect();
        let t = |d: Vec<f32>| outputs(vec![Tensor::new(&[1, 512], d).unwrap()]);
        assert!(judge(&t(a.clone()), &t(close), Bounds::FP16).is_ok());
        let err = judge(&t(a.clone()), &t(far), Bounds::FP16).unwrap_err();
        assert!(err.contains("cosine"), "{err}");
    }

    #[test]
    fn non_finite_outputs_and_other_shapes_are_refused() {
        let nan = Tensor::new(&[1, 3, 32, 32], vec![f32::NAN; 3 * 32 * 32]).unwrap();
        assert!(judge(&outputs(vec![face(0.0)]), &outputs(vec![nan]), Bounds::FP16).is_err());
        let inf = Tensor::new(&[1, 4], vec![1.0, f32::INFINITY, 0.0, 0.0]).unwrap();
        let ok = Tensor::new(&[1, 4], vec![1.0, 2.0, 0.0, 0.0]).unwrap();
        assert!(judge(&outputs(vec![ok.clone()]), &outputs(vec![inf]), Bounds::FP16).is_err());
        let other = Tensor::new(&[4, 1], vec![1.0, 2.0, 0.0, 0.0]).unwrap();
        assert!(judge(&outputs(vec![ok]), &outputs(vec![other]), Bounds::FP16).unwrap_err().contains("shape"));
    }
}
