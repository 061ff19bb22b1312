//! The control owner loop: it owns the models, the face bank and the
//! [`Control`] state machine. Commands come in from MQTT, effects go out as
//! retained states, events and posts to the worker's mailbox; stats go out
//! on a timer. Nothing here waits on the worker or on the broker.

use super::bank::FaceBank;
use super::counters::Counters;
use super::mailbox::Mailbox;
use super::memory::Trim;
use super::settings::{limits, restart_needed, WorkerConfig};
use super::stages::Identifier;
use super::Signals;
use crate::audit::AuditLog;
use crate::config::Config;
use crate::control::policy::SourceGate;
use crate::control::{self, Control, Effect, Inbox, Incoming};
use crate::face::Embedding;
use crate::http::HttpState;
use crate::infer::Engines;
use crate::mqtt::{CommandError, Event, Message, Outbox, PayloadCaps, Topics};
use crate::procmem::{free_heap, release_free_heap};
use crate::store::cache::Cache;
use crate::store::{Store, TierModels};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct ControlLoop<'a> {
    pub config_path: PathBuf,
    pub config: Config,
    pub topics: Topics,
    pub outbox: Arc<Outbox>,
    pub control: Control,
    pub store: Arc<Store>,
    pub models: TierModels,
    pub identifier: Identifier,
    pub bank: Option<FaceBank>,
    pub sources: Cache<Embedding>,
    pub mailbox: Arc<Mailbox>,
    pub counters: Counters,
    pub stats_interval: Duration,
    pub signals: &'a Signals<'a>,
    /// The active source's label, for the source state.
    pub active_source: Option<String>,
    /// How many images went into it.
    pub active_images: usize,
    /// Models whose failed execution providers were already reported.
    pub reported_providers: HashSet<String>,
    /// `/metrics` reads the newest stats here.
    pub http: Arc<HttpState>,
    /// `pipeline.sources` and who sent the command being applied.
    pub gate: SourceGate,
    /// The audit log, when `[audit]` keeps one.
    pub audit: Option<AuditLog>,
    /// The payload limits MQTT, HTTP and the inbox share (a reload sets them).
    pub caps: Arc<PayloadCaps>,
    /// The last refusal since the command being applied came in.
    pub refused: Option<CommandError>,
    /// When to hand freed heap back after slow commands.
    pub trim: Trim,
}

impl ControlLoop<'_> {
    pub fn event(&self, e: Event) {
        self.outbox.push(e.message(&self.topics));
    }

    /// Every execution provider that the config asked for and that could
    /// not be used, once per loaded model: loud in the log and on `events`,
    /// because a silent fall back to the CPU is the failure users miss.
    pub fn report_providers(&mut self) {
        let mut events = Vec::new();
        for m in self.models.all() {
            let placement = m.model.placement();
            if placement.failed.is_empty() || !self.reported_providers.insert(m.entry.name.clone()) {
                continue;
            }
            for f in placement.failed {
                log::error!(
                    "model `{}`: execution provider {} failed: {}; running on {:?} instead",
                    m.entry.name,
                    f.provider,
                    f.error,
                    placement.providers
                );
                let running_on = placement.providers.clone();
                let (model, provider, error) = (m.entry.name.clone(), f.provider, f.error);
                events.push(Event::ProviderFailed { model, provider, error, running_on });
            }
        }
        events.into_iter().for_each(|e| self.event(e));
    }

    pub fn refuse(&mut self, command: &str, reason: String) {
        let e = CommandError { command: command.into(), reason };
        log::warn!("{e}");
        self.outbox.push(e.message(&self.topics));
        self.refused = Some(e);
    }

    pub fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::State { feature, value } => {
                    self.http.set_state(feature, &value);
                    self.outbox.push(Message::retained(self.topics.state(feature), value));
                }
                Effect::Error(e) => self.refuse(&e.command, e.reason),
                Effect::Reconfigure => {
                    self.check_mouth();
                    self.mailbox.settings(self.control.settings());
                }
                Effect::Snapshot => self.mailbox.snapshot(),
                Effect::SetSource(src) => self.set_source(src),
                Effect::SetMap(pairs) => self.set_map(pairs),
                Effect::Forget(name) => self.forget(&name),
                Effect::SwitchTier(tier) => self.switch_tier(&tier, "quality"),
                Effect::Reload => self.reload(),
                Effect::Stall => self.mailbox.stall(),
                Effect::Panic => self.mailbox.panic(),
                Effect::Unplug(d) => self.counters.capture.unplug(d),
            }
        }
    }

    /// A mouth mask that the running tier cannot do (it lists no
    /// landmarker) is refused and switched off.
    pub fn check_mouth(&mut self) {
        if !self.control.settings().mouth_mask || self.models.landmarker.is_some() {
            return;
        }
        let reason = format!(
            "tier `{}` lists no landmarker; add a landmark68 model (landmark68_fr) to its models",
            self.models.tier
        );
        self.refuse("mouth_mask", reason);
        let effect = self.control.mouth_mask_unavailable();
        self.apply(vec![effect]);
        self.mailbox.settings(self.control.settings());
    }

    /// Loads tier `tier` (or the one below it that loads) and posts it to
    /// the worker; the quality state names the tier that runs, then the
    /// `tier_changed` event follows.
    pub fn switch_tier(&mut self, tier: &str, command: &str) {
        let before = self.models.tier.clone();
        let (models, degraded) = match self.store.activate(tier) {
            Ok(outcome) => outcome.into_parts(),
            Err(reason) => {
                self.refuse(command, format!("tier `{tier}` cannot load: {reason}"));
                let effect = self.control.tier_in_use(&before);
                return self.apply(vec![effect]);
            }
        };
        match Identifier::new(&models) {
            Ok(id) => self.identifier = id,
            Err(e) => {
                self.refuse(command, e.to_string());
                let effect = self.control.tier_in_use(&before);
                return self.apply(vec![effect]);
            }
        }
        self.models = models.clone();
        self.check_mouth();
        self.report_providers();
        self.mailbox.models(models);
        let running = self.models.tier.clone();
        self.degraded(tier, degraded);
        // The retained state is queued ahead of the event, so whoever acts
        // on `tier_changed` already finds the state naming the new tier.
        let effect = self.control.tier_in_use(&running);
        self.apply(vec![effect]);
        self.event(Event::TierChanged { from: before, tier: running });
    }

    /// A lower tier than `wanted` runs, for `reason`, or (`None`) the one
    /// wanted: the `degraded` event and the HTTP health say so.
    pub fn degraded(&self, wanted: &str, reason: Option<String>) {
        let running = self.models.tier.clone();
        let problem = reason.as_ref().map(|r| format!("running tier `{running}` instead of `{wanted}`: {r}"));
        self.http.set_problem("tier", problem);
        if let Some(reason) = reason {
            self.event(Event::Degraded { wanted: wanted.into(), tier: running, reason });
        }
    }

    /// Rereads the config and reloads the models; a bad config is refused
    /// and the daemon carries on with the old one. Keys only a restart
    /// applies are named in the log and in the `reloaded` event.
    pub fn reload(&mut self) {
        let config = match Config::load(&self.config_path) {
            Ok(c) => c,
            Err(e) => return self.refuse("reload", format!("{e}; still running on the previous configuration")),
        };
        let store = match Engines::from_settings(&config.inference)
            .map_err(|e| e.to_string())
            .and_then(|engines| Store::open(&config, engines).map_err(|e| e.to_string()))
        {
            Ok(s) => Arc::new(s),
            Err(e) => return self.refuse("reload", format!("{e}; still running on the previous models")),
        };
        let gate = match source_gate(&config) {
            Ok(g) => g,
            Err(e) => return self.refuse("reload", format!("{e}; still running on the previous configuration")),
        };
        self.gate = gate;
        let restart = restart_needed(&self.config, &config);
        if !restart.is_empty() {
            log::warn!("reload: these changes take effect at the next restart: {}", restart.join(", "));
        }
        self.control.set_limits(limits(&config));
        // Tiers, the frame rate's limit and output.frames may have changed.
        self.outbox.push(super::settings::discovery_after_reload(&self.config, &config, &self.topics));
        self.http.set_choices(super::settings::choices(&config));
        self.caps.set_source(config.pipeline.max_source_bytes);
        self.mailbox.config(WorkerConfig::from_config(&config));
        self.stats_interval = Duration::from_secs(config.output.stats_interval_s);
        self.store = store;
        self.config = config;
        let tier = self.control.settings().quality.clone();
        let tier = if self.config.tier_index(&tier).is_some() { tier } else { self.config.models.start_tier.clone() };
        self.switch_tier(&tier, "reload");
        self.store.preload_next(&self.models.tier);
        self.event(Event::Reloaded { config: self.config_path.clone(), restart_needed: restart });
    }

    /// Writes an applied command to the audit log when it is one the log
    /// keeps; a log that cannot be written is reported and the daemon goes on.
    fn audit(&mut self, feature: &str, payload: &[u8], from: &str) {
        let Some(log) = &mut self.audit else { return };
        for (change, value) in crate::audit::changes(feature, payload) {
            if let Err(e) = log.append(change, &value, from) {
                log::warn!("{e}");
            }
        }
    }

    fn publish_stats(&mut self) {
        let stats = self.counters.stats(&self.outbox, &self.models, self.store.cached());
        self.http.set_stats(&stats);
        self.outbox.push(stats.message(&self.topics));
    }

    /// Commands, signals and stats until `signals.stop`, the command
    /// channel closing, or the worker ending; says whether the worker ended.
    pub fn serve(&mut self, inbox: &Inbox, worker: &JoinHandle<Result<(), String>>) -> bool {
        let mut next_stats = Instant::now() + self.stats_interval.min(Duration::from_secs(2));
        // Loading and warming the models at the start is slow work too.
        self.trim.after_slow_work(Instant::now());
        while !self.signals.stop.load(Ordering::Relaxed) {
            if let Some(Incoming { feature, payload, reply, from }) = inbox.recv_timeout(Duration::from_millis(100)) {
                let effects = self.control.handle(&feature, &payload);
                let refused = control::refusal(&effects);
                let slow =
                    effects.iter().any(|e| matches!(e, Effect::Reload | Effect::SetSource(_) | Effect::SwitchTier(_)));
                if slow {
                    self.trim.after_slow_work(Instant::now());
                }
                self.refused = None;
                self.gate.sender_authenticated = from.authenticated;
                self.apply(effects);
                // Sources set otherwise (the config's) are the owner's.
                self.gate.sender_authenticated = true;
                // The verdict comes once the command is applied, so a
                // client that reads the state next sees it; a refusal
                // found while applying (a photo without a face) counts.
                let verdict = refused.or(self.refused.take());
                if verdict.is_none() {
                    self.audit(&feature, &payload, &from.who);
                }
                if let Some(reply) = reply {
                    let _ = reply.try_send(verdict.map_or(Ok(()), Err));
                }
            }
            if self.signals.reload.swap(false, Ordering::Relaxed) {
                log::info!("SIGHUP: rereading {}", self.config_path.display());
                self.reload();
                self.audit("reload", b"", "SIGHUP");
                self.trim.after_slow_work(Instant::now());
            } else if inbox.is_empty() {
                let now = Instant::now();
                if self.trim.due(now) || (self.trim.check(now) && self.trim.too_much_free(free_heap())) {
                    release_free_heap();
                }
            }
            if Instant::now() >= next_stats {
                next_stats = Instant::now() + self.stats_interval;
                self.publish_stats();
            }
            if worker.is_finished() {
                return true;
            }
        }
        false
    }
}

/// `pipeline.sources` with its allowlist read; an allowlist that cannot be
/// read or parsed is an error naming the file.
pub fn source_gate(config: &Config) -> Result<SourceGate, String> {
    use crate::control::policy::{parse_allowlist, SourcePolicy};
    let p = &config.pipeline;
    let allowed = match (&p.sources, &p.sources_allowlist) {
        (SourcePolicy::Allowlist, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("pipeline.sources_allowlist {}: {e}", file.display()))?;
            parse_allowlist(&text).map_err(|e| format!("pipeline.sources_allowlist {}: {e}", file.display()))?
        }
        _ => Default::default(),
    };
    Ok(SourceGate { policy: p.sources, allowed, sender_authenticated: true })
}
