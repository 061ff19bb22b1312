//! The FP16 self-test's fixed inputs. A model TensorRT builds in FP16 runs
//! beside its FP32 build on them, and FP16 is refused when its outputs do
//! not agree within [`Bounds::FP16`](super::super::agreement::Bounds::FP16):
//! a refusal leaves the model on the same GPU provider in FP32.

use super::super::{InputSpec, Tensor};

/// The fixed inputs of the self-test: a smooth picture in 0..1 for an
/// image-shaped input (the swapper's target face), a unit vector for any
/// other (its identity latent), the same on every start.
pub fn probe_inputs(inputs: &[InputSpec]) -> Vec<(String, Tensor)> {
    inputs.iter().map(|i| (i.name.clone(), probe(&i.shape))).collect()
}

fn probe(shape: &[usize]) -> Tensor {
    let len: usize = shape.iter().product();
    let data: Vec<f32> = match shape {
        [_, c, h, w] if *h > 1 && *w > 1 => (0..len)
            .map(|i| {
                let (x, y, ch) = (i % w, (i / w) % h, (i / (w * h)) % c);
                let fx = x as f32 / *w as f32 * std::f32::consts::TAU * (ch + 1) as f32;
                let fy = y as f32 / *h as f32 * std::f32::consts::TAU;
                0.5 + 0.4 * fx.sin() * fy.cos()
            })
            .collect(),
        _ => {
            let v: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37 + 0.1).sin()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            v.into_iter().map(|x| x / norm).collect()
        }
    };
    Tensor::new(shape, data).unwrap_or_else(|| Tensor::zeros(shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_inputs_are_a_picture_and_a_unit_latent() {
        let specs = [
            InputSpec { name: "target".into(), shape: vec![1, 3, 128, 128] },
            InputSpec { name: "source".into(), shape: vec![1, 512] },
        ];
        let p = probe_inputs(&specs);
        assert!(p[0].1.data().iter().all(|v| (0.099..=0.901).contains(v)));
        let norm: f32 = p[1].1.data().iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        assert_eq!(probe_inputs(&specs), p);
    }
}
