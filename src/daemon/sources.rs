//! The control loop's source identities and face bank: a source command
//! turned into an identity (from the cache, the bank or a photo), names
//! saved with their thumbnails, forgotten, and looked up for a mapping.

use super::bank::BankError;
use super::control_loop::ControlLoop;
use super::settings::limits;
use crate::face::{largest_face, largest_identity, Embedding};
use crate::mqtt::{Event, SourceCommand, SourceState};
use std::sync::Arc;

impl ControlLoop<'_> {
    /// The identity of a source command, whether it came from the cache,
    /// how many images went into it, and its label; a refusal names the
    /// reason.
    fn identity(&mut self, src: SourceCommand) -> Result<(String, Embedding, bool, usize), String> {
        let unavailable = || "the face bank is unavailable; see the log".to_string();
        let (name, bytes) = match src {
            SourceCommand::Named(name) => {
                let e = self.bank.as_ref().ok_or_else(unavailable)?.get(&name).map_err(|e| e.to_string())?;
                return Ok((name, e, true, 1));
            }
            SourceCommand::Names(names) => {
                let bank = self.bank.as_ref().ok_or_else(unavailable)?;
                let all =
                    names.iter().map(|n| bank.get(n)).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
                let mean = Embedding::mean(&all).ok_or("the identities have different lengths")?;
                return Ok((names.join("+"), mean, true, names.len()));
            }
            SourceCommand::Image { name, bytes, .. } => (name, bytes),
        };
        let hash = crate::catalog::sha256_hex(&bytes);
        let (embedding, cached) = match self.sources.get(&hash) {
            Some(e) => ((*e).clone(), true),
            None => {
                let img = crate::mqtt::command::decode_source_image(&bytes)?;
                let id = &mut self.identifier;
                let e = largest_identity(&mut id.detector, &mut id.recognizer, &img, "the source image")
                    .map_err(|e| e.to_string())?;
                self.sources.insert(&hash, Arc::new(e.clone()), 1);
                (e, false)
            }
        };
        if let Some(name) = &name {
            self.bank.as_mut().ok_or_else(unavailable)?.insert(name, &embedding).map_err(|e| e.to_string())?;
            self.save_thumbnail(name, &bytes);
        }
        Ok((name.unwrap_or_else(|| format!("image:{}", &hash[..12])), embedding, cached, 1))
    }

    /// Keeps a thumbnail of the face `name` was saved from, for the live
    /// page's bank; one that cannot be made or written is logged and the
    /// bank entry stands.
    fn save_thumbnail(&mut self, name: &str, photo: &[u8]) {
        let made = crate::mqtt::command::decode_source_image(photo).and_then(|img| {
            let face =
                largest_face(&mut self.identifier.detector, &img, "the source image").map_err(|e| e.to_string())?;
            crate::vision::face_thumbnail(&img, &face.bbox, 96)
        });
        let saved = made.and_then(|jpeg| match &self.bank {
            Some(bank) => bank.set_thumbnail(name, &jpeg).map_err(|e| e.to_string()),
            None => Ok(()),
        });
        if let Err(e) = saved {
            log::warn!("face bank: no thumbnail for `{name}`: {e}");
        }
    }

    /// Computes (or recalls) the identity, posts it to the worker, and
    /// updates the source state; a failure is refused and changes nothing.
    pub fn set_source(&mut self, src: SourceCommand) {
        if let Err(reason) = self.gate.admit(&src) {
            return self.refuse("source", reason);
        }
        let (label, embedding, cached, images) = match self.identity(src) {
            Ok(found) => found,
            Err(reason) => return self.refuse("source", reason),
        };
        self.mailbox.source(Some(embedding));
        self.active_source = Some(label.clone());
        self.active_images = images;
        let bank = self.bank.as_ref().map(|b| b.names()).unwrap_or_default();
        let state = SourceState { active: self.active_source.as_deref(), images, bank }.to_json();
        let effect = self.control.source_set(&state);
        self.apply(vec![effect]);
        self.event(Event::SourceSet { source: label, cached });
    }

    /// Removes `name` from the face bank and publishes the source state
    /// with the bank's names; the running source and mapping keep their
    /// identities until they are set again.
    pub fn forget(&mut self, name: &str) {
        let Some(bank) = self.bank.as_mut() else {
            return self.refuse("forget", "the face bank is unavailable; see the log".into());
        };
        if let Err(e) = bank.remove(name) {
            return self.refuse("forget", e.to_string());
        }
        let bank = bank.names();
        let state = SourceState { active: self.active_source.as_deref(), images: self.active_images, bank }.to_json();
        let effect = self.control.source_set(&state);
        self.apply(vec![effect]);
        self.event(Event::Forgotten { name: name.to_string() });
    }

    /// Looks the mapping's names up in the face bank and posts the
    /// identities to the worker; an unknown name is refused and changes
    /// nothing.
    pub fn set_map(&mut self, pairs: Vec<(String, String)>) {
        let Some(bank) = self.bank.as_ref() else {
            return self.refuse("map", "the face bank is unavailable; see the log".into());
        };
        let found: Result<Vec<_>, BankError> = pairs.iter().map(|(a, b)| Ok((bank.get(a)?, bank.get(b)?))).collect();
        match found {
            Ok(identities) => self.mailbox.mappings(identities),
            Err(e) => return self.refuse("map", e.to_string()),
        }
        let state = pairs.iter().map(|(a, b)| format!("{a}={b}")).collect::<Vec<_>>().join(",");
        let effect = self.control.map_set(&state);
        self.apply(vec![effect]);
    }

    /// Sets `pipeline.source` (an image path or a face bank name).
    pub fn initial_source(&mut self) {
        let Some(initial) = self.config.pipeline.source.clone() else { return };
        match std::fs::read(&initial) {
            Ok(bytes) => match crate::mqtt::parse("source", &bytes, &limits(&self.config)) {
                Ok(crate::mqtt::Command::Source(src)) => self.set_source(src),
                Ok(_) => {}
                Err(e) => self.refuse("source", format!("pipeline.source {initial}: {}", e.reason)),
            },
            Err(_) => self.set_source(SourceCommand::Named(initial)),
        }
    }
}
