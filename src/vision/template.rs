//! The 5-point alignment templates of the face models (FaceFusion's
//! `warp_template`s), normalised to a unit crop.

use super::{estimate_similarity, Affine};
use serde::{Deserialize, Serialize};

/// An alignment template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Template {
    Arcface112V2,
    Arcface128,
    Arcface112V1,
    Ffhq512,
}

impl Template {
    // Quoted digit for digit from the reference, so they can be checked by eye.
    #[allow(clippy::excessive_precision)]
    const fn unit(self) -> [[f32; 2]; 5] {
        match self {
            Template::Arcface112V2 => [
                [0.341_916_07, 0.461_574_11],
                [0.656_533_93, 0.459_833_93],
                [0.500_225, 0.640_505_36],
                [0.370_975_89, 0.824_691_96],
                [0.631_516_96, 0.823_250_89],
            ],
            Template::Arcface128 => [
                [0.361_676_56, 0.403_877_34],
                [0.636_967_19, 0.402_354_69],
                [0.500_196_87, 0.560_442_19],
                [0.387_103_91, 0.721_605_47],
                [0.615_077_34, 0.720_344_53],
            ],
            Template::Arcface112V1 => [
                [0.354_732_14, 0.456_589_29],
                [0.645_267_86, 0.456_589_29],
                [0.5, 0.611_544_64],
                [0.379_133_93, 0.776_875],
                [0.620_866_07, 0.776_875],
            ],
            Template::Ffhq512 => [
                [0.376_916_76, 0.468_646_64],
                [0.622_856_97, 0.469_128_13],
                [0.501_238_59, 0.613_319_04],
                [0.393_088_22, 0.725_411],
                [0.611_502_05, 0.724_904_65],
            ],
        }
    }

    /// Template points for a `size`×`size` crop.
    pub fn points(self, size: u32) -> [[f32; 2]; 5] {
        self.unit().map(|[x, y]| [x * size as f32, y * size as f32])
    }

    /// The frame → crop similarity that puts `landmarks` on this template;
    /// `None` when the landmarks are degenerate (all on one point).
    pub fn align(self, landmarks: &[[f32; 2]; 5], size: u32) -> Option<Affine> {
        estimate_similarity(landmarks, &self.points(size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arcface_112_v2_matches_insightface_reference_points() {
        let p = Template::Arcface112V2.points(112);
        let want = [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366], [41.5493, 92.3655], [70.7299, 92.2041]];
        for (a, b) in p.iter().zip(want) {
            assert!((a[0] - b[0]).abs() < 1e-3 && (a[1] - b[1]).abs() < 1e-3, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn arcface_128_is_arcface_112_v2_shifted_by_8px() {
        let a = Template::Arcface112V2.points(112);
        let b = Template::Arcface128.points(128);
        for (p, q) in a.iter().zip(b) {
            assert!((p[0] + 8.0 - q[0]).abs() < 1e-3 && (p[1] - q[1]).abs() < 1e-3);
        }
    }
}
