//! Which detected faces get swapped: the mode a user picks
//! ([`SelectorMode`]), the swap strength ([`Blend`]), and the selector the
//! pipeline runs ([`Selector`], which carries the reference identity).

use super::{Embedding, Face};
use serde::{Deserialize, Serialize};

/// FaceFusion's default reference distance.
pub const REFERENCE_DISTANCE: f32 = 0.3;

/// The selection mode of the config (`pipeline.selector`), the `selector`
/// command and the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SelectorMode {
    /// Only the largest face.
    One,
    /// Every face.
    Many,
    /// The person who was the largest face when the mode was chosen.
    Reference,
}

impl SelectorMode {
    pub const ALL: [SelectorMode; 3] = [SelectorMode::One, SelectorMode::Many, SelectorMode::Reference];

    pub fn as_str(self) -> &'static str {
        match self {
            SelectorMode::One => "one",
            SelectorMode::Many => "many",
            SelectorMode::Reference => "reference",
        }
    }

    pub fn parse(s: &str) -> Option<SelectorMode> {
        SelectorMode::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

impl std::fmt::Display for SelectorMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Swap strength in percent: 0 keeps the original face, 100 takes the
/// swapped one.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f32", into = "f32")]
pub struct Blend(f32);

impl Blend {
    pub const FULL: Blend = Blend(100.0);

    /// `percent` when it is within 0..=100.
    pub fn new(percent: f32) -> Option<Blend> {
        (0.0..=100.0).contains(&percent).then_some(Blend(percent))
    }

    pub fn percent(self) -> f32 {
        self.0
    }

    /// 0..=1, as the paste mixes.
    pub fn fraction(self) -> f32 {
        self.0 / 100.0
    }
}

impl TryFrom<f32> for Blend {
    type Error = String;
    fn try_from(percent: f32) -> Result<Self, String> {
        Blend::new(percent).ok_or_else(|| format!("blend {percent} is outside 0..=100"))
    }
}

impl From<Blend> for f32 {
    fn from(b: Blend) -> f32 {
        b.0
    }
}

/// Which face `one` picks first (FaceFusion's face selector order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaceOrder {
    LeftRight,
    RightLeft,
    #[default]
    LargeSmall,
    SmallLarge,
    BestWorst,
    /// Closest to the frame's centre.
    Center,
}

impl FaceOrder {
    pub const ALL: [FaceOrder; 6] = [
        FaceOrder::LeftRight,
        FaceOrder::RightLeft,
        FaceOrder::LargeSmall,
        FaceOrder::SmallLarge,
        FaceOrder::BestWorst,
        FaceOrder::Center,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FaceOrder::LeftRight => "left-right",
            FaceOrder::RightLeft => "right-left",
            FaceOrder::LargeSmall => "large-small",
            FaceOrder::SmallLarge => "small-large",
            FaceOrder::BestWorst => "best-worst",
            FaceOrder::Center => "center",
        }
    }

    pub fn parse(s: &str) -> Option<FaceOrder> {
        FaceOrder::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// Index of the face that comes first; `center` is the frame's centre.
    pub fn first(self, faces: &[Face], center: [f32; 2]) -> Option<usize> {
        let cx = |f: &Face| (f.bbox[0] + f.bbox[2]) / 2.0;
        let to_center = |f: &Face| (cx(f) - center[0]).hypot((f.bbox[1] + f.bbox[3]) / 2.0 - center[1]);
        let key = |f: &Face| match self {
            FaceOrder::LeftRight => cx(f),
            FaceOrder::RightLeft => -cx(f),
            FaceOrder::LargeSmall => -f.area(),
            FaceOrder::SmallLarge => f.area(),
            FaceOrder::BestWorst => -f.score,
            FaceOrder::Center => to_center(f),
        };
        faces.iter().enumerate().min_by(|a, b| key(a.1).total_cmp(&key(b.1))).map(|(i, _)| i)
    }
}

impl std::fmt::Display for FaceOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Face selection as the pipeline runs it.
#[derive(Debug, Clone)]
pub enum Selector {
    /// Only the largest face.
    One,
    /// Every face.
    Many,
    /// The face closest to `reference`, if its distance ((1 − cos)/2) is
    /// below `max_distance` (FaceFusion's default 0.3).
    Reference { reference: Embedding, max_distance: f32 },
}

impl Selector {
    pub fn needs_embeddings(&self) -> bool {
        matches!(self, Selector::Reference { .. })
    }

    /// Indices into `faces` to swap. `embeddings` is parallel to `faces` and
    /// only consulted in reference mode.
    pub fn select(&self, faces: &[Face], embeddings: &[Embedding]) -> Vec<usize> {
        match self {
            Selector::Many => (0..faces.len()).collect(),
            Selector::One => super::largest(faces).into_iter().collect(),
            Selector::Reference { reference, max_distance } => embeddings
                .iter()
                .enumerate()
                .map(|(i, e)| (i, reference.distance(e)))
                .filter(|(_, d)| d < max_distance)
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(i, _)| i)
                .into_iter()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(size: f32) -> Face {
        Face { bbox: [0.0, 0.0, size, size], score: 0.9, landmarks: [[0.0; 2]; 5] }
    }

    #[test]
    fn one_picks_the_largest_face() {
        assert_eq!(Selector::One.select(&[face(10.0), face(30.0), face(20.0)], &[]), vec![1]);
        assert!(Selector::One.select(&[], &[]).is_empty());
    }

    #[test]
    fn reference_picks_the_closest_face_within_the_threshold() {
        let r = Embedding::from_raw(vec![1.0, 0.0]);
        let near = Embedding::from_raw(vec![0.9, 0.1]);
        let far = Embedding::from_raw(vec![-1.0, 0.2]);
        let sel = Selector::Reference { reference: r, max_distance: 0.3 };
        assert_eq!(sel.select(&[face(1.0), face(2.0)], &[far.clone(), near]), vec![1]);
        assert!(sel.select(&[face(1.0)], &[far]).is_empty());
    }

    #[test]
    fn modes_and_blends_parse_only_what_is_valid() {
        assert_eq!(SelectorMode::parse("many"), Some(SelectorMode::Many));
        assert_eq!(SelectorMode::parse("all"), None);
        assert_eq!(Blend::new(40.0).map(Blend::fraction), Some(0.4));
        assert!(Blend::new(100.5).is_none() && Blend::new(f32::NAN).is_none());
        assert!(toml::from_str::<std::collections::BTreeMap<String, Blend>>("b = 101.0").is_err());
    }
}
