//! The model families fusiond knows (`contract` in a manifest) and what
//! each implies when the manifest does not say: role, colour order,
//! normalisation, input size, alignment template and output range.

use super::LATENT_LEN;
use crate::vision::{ChannelOrder, Normalization, Template};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Detector,
    Recognizer,
    Swapper,
    Enhancer,
    Landmarker,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Contract {
    Yunet,
    Scrfd,
    YoloFace,
    Arcface,
    Inswapper,
    Hyperswap,
    Gfpgan,
    Landmark68,
}

impl Contract {
    pub fn kind(self) -> Kind {
        use Contract::*;
        match self {
            Yunet | Scrfd | YoloFace => Kind::Detector,
            Arcface => Kind::Recognizer,
            Inswapper | Hyperswap => Kind::Swapper,
            Gfpgan => Kind::Enhancer,
            Landmark68 => Kind::Landmarker,
        }
    }

    /// FaceFusion's feeding conventions for this contract: (channel order,
    /// normalisation in pixel units, native input size).
    pub(super) fn defaults(self) -> (ChannelOrder, Normalization, [u32; 2]) {
        use ChannelOrder::*;
        use Contract::*;
        match self {
            Yunet => (Bgr, Normalization::uniform(0.0, 1.0), [640, 640]),
            Scrfd => (Bgr, Normalization::uniform(127.5, 128.0), [640, 640]),
            YoloFace => (Bgr, Normalization::uniform(0.0, 255.0), [640, 640]),
            Arcface => (Rgb, Normalization::uniform(127.5, 127.5), [112, 112]),
            Inswapper => (Rgb, Normalization::uniform(0.0, 255.0), [128, 128]),
            Hyperswap => (Rgb, Normalization::uniform(127.5, 127.5), [256, 256]),
            Gfpgan => (Rgb, Normalization::uniform(127.5, 127.5), [512, 512]),
            Landmark68 => (Rgb, Normalization::uniform(0.0, 256.0), [64, 64]),
        }
    }

    pub(super) fn default_template(self) -> Option<Template> {
        match self {
            Contract::Arcface => Some(Template::Arcface112V2),
            Contract::Inswapper | Contract::Hyperswap => Some(Template::Arcface128),
            Contract::Gfpgan => Some(Template::Ffhq512),
            _ => None,
        }
    }

    /// Values a recogniser of this contract puts out per face.
    pub(super) fn default_embedding_len(self) -> Option<usize> {
        matches!(self, Contract::Arcface).then_some(LATENT_LEN)
    }

    /// Model output → 0..1 as `value · std + mean` (swappers and enhancers).
    pub(super) fn default_output(self) -> (f32, f32) {
        match self {
            Contract::Hyperswap | Contract::Gfpgan => (0.5, 0.5),
            _ => (0.0, 1.0),
        }
    }
}
