//! Per-person mapping: faces that match a known identity (`alice`) are
//! swapped with another one (`bob`), several mappings at once. Which
//! mapping a face takes is decided once per track, on the first frame it is
//! seen, so the recogniser runs once per person and not once per frame.

use super::{Embedding, Face, Recognizer, Result, StageTimings, Swapper};
use crate::infer::Tensor;
use crate::vision::RgbImage;
use std::collections::HashMap;
use std::time::Instant;

struct Mapping {
    from: Embedding,
    to: Embedding,
    /// `to`'s latent for the current swapper.
    latent: Tensor,
}

#[derive(Default)]
pub struct Mappings {
    entries: Vec<Mapping>,
    /// The mapping each live track matched (`None`: none did).
    tracks: HashMap<u64, Option<usize>>,
}

impl Mappings {
    /// Replaces the mappings (`from` → `to` identities); every track is
    /// matched again.
    pub fn set(&mut self, pairs: Vec<(Embedding, Embedding)>, swapper: &Swapper) -> Result<()> {
        let entries = pairs
            .into_iter()
            .map(|(from, to)| Ok(Mapping { latent: swapper.latent(&to)?, from, to }))
            .collect::<Result<Vec<_>>>()?;
        self.entries = entries;
        self.tracks.clear();
        Ok(())
    }

    /// The latents again, for another swapper (a tier switch).
    pub fn relatent(&mut self, swapper: &Swapper) -> Result<()> {
        for m in &mut self.entries {
            m.latent = swapper.latent(&m.to)?;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn latent(&self, i: usize) -> &Tensor {
        &self.entries[i].latent
    }

    /// Forgets the tracks that ended.
    pub fn forget(&mut self, alive: impl Fn(u64) -> bool) {
        self.tracks.retain(|id, _| alive(*id));
    }

    /// For each face (with its track id), the mapping it takes. Tracks seen
    /// for the first time are recognised once; `max_distance` is the
    /// largest face distance that is still the person.
    pub fn assign(
        &mut self,
        frame: &RgbImage,
        faces: &[(u64, &Face)],
        rec: &mut Recognizer,
        max_distance: f32,
        t: &mut StageTimings,
    ) -> Result<Vec<Option<usize>>> {
        if self.entries.is_empty() {
            return Ok(vec![None; faces.len()]);
        }
        let mut out = Vec::with_capacity(faces.len());
        for (id, face) in faces {
            if let Some(m) = self.tracks.get(id) {
                out.push(*m);
                continue;
            }
            let s = Instant::now();
            let e = rec.embed(frame, &face.landmarks)?;
            t.embed += s.elapsed();
            t.inference += rec.last_inference();
            let best = self
                .entries
                .iter()
                .enumerate()
                .map(|(i, m)| (i, m.from.distance(&e)))
                .filter(|(_, d)| *d < max_distance)
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(i, _)| i);
            self.tracks.insert(*id, best);
            out.push(best);
        }
        Ok(out)
    }
}
