//! The daemon's control state machine, without IO: MQTT commands in, the
//! retained states to publish and the actions for the pipeline out. A
//! refused command changes nothing and yields only an error.

mod inbox;
pub mod policy;

pub use inbox::Inbox;

use crate::face::{Blend, ColorTransfer, FaceOrder, MaskSettings, SelectorMode};
use crate::mqtt::{parse, Command, CommandError, CommandLimits, SourceCommand};
use std::sync::mpsc::SyncSender;

/// The settings commands can change, as echoed on `<feature>/state`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub enabled: bool,
    /// The tier that runs (not the one last asked for, when it fell back).
    pub quality: String,
    pub blend: Blend,
    pub selector: SelectorMode,
    /// Which face `one` picks first.
    pub face_order: FaceOrder,
    /// Frames per second on `frame`; 0 is off.
    pub frame_rate: f32,
    /// The paste's box mask: blur and padding.
    pub mask: MaskSettings,
    pub color_transfer: ColorTransfer,
    /// Keep the person's own mouth (needs a landmarker in the tier).
    pub mouth_mask: bool,
    /// `reference`: largest face distance that is still the person.
    pub reference_distance: f32,
    /// The mapping as published (`alice=bob,…`), once one is set.
    pub map: Option<String>,
    /// The source state as published (JSON naming the active identity and
    /// the face bank), once a source is set.
    pub source: Option<String>,
}

/// A command on its way to the control loop, from MQTT or HTTP through the
/// one [`Inbox`]: both go through [`Control::handle`]. HTTP waits on `reply` for whether it was
/// refused (the same reason `<base>/error` carries) or taken.
pub struct Incoming {
    pub feature: String,
    pub payload: bytes::Bytes,
    pub reply: Option<SyncSender<Result<(), CommandError>>>,
    pub from: Sender,
}

/// Who sent a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    /// For the audit log: `mqtt ...` or `http peer ... token ...`.
    pub who: String,
    /// Checked by a secret: HTTP with `http.token_file`, MQTT with
    /// `mqtt.username` (the broker checks it).
    pub authenticated: bool,
}

/// The refusal among `effects`, if the command was refused.
pub fn refusal(effects: &[Effect]) -> Option<CommandError> {
    effects.iter().find_map(|e| match e {
        Effect::Error(e) => Some(e.clone()),
        _ => None,
    })
}

/// What the daemon must do after a command.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Publish `value` retained on `<feature>/state`.
    State { feature: &'static str, value: String },
    /// Compute (or look up) and set the source identity.
    SetSource(SourceCommand),
    /// Look up the mapping's identities and set it.
    SetMap(Vec<(String, String)>),
    /// Remove the identity from the face bank.
    Forget(String),
    /// Switch the pipeline to tier `0`; the daemon then reports the tier
    /// that runs with [`Control::tier_in_use`], which echoes the state.
    SwitchTier(String),
    /// Apply the new blend (0..1), selector or enabled flag to the pipeline.
    Reconfigure,
    /// Publish the next full-quality frame on `snapshot`.
    Snapshot,
    /// Reread the configuration and models.
    Reload,
    /// Stall the processing loop (watchdog tests only).
    Stall,
    /// Panic in the processing loop (journald tests only).
    Panic,
    /// Fail the camera as if unplugged for this long (fault tests only).
    Unplug(std::time::Duration),
    /// Publish on `error`; nothing changed.
    Error(CommandError),
}

pub struct Control {
    settings: Settings,
    limits: CommandLimits,
}

fn on_off(b: bool) -> String {
    if b { "ON" } else { "OFF" }.to_string()
}

/// `top,right,bottom,left`, as the command takes it.
fn padding_state(p: &[f32; 4]) -> String {
    p.iter().map(|v| format!("{v}")).collect::<Vec<_>>().join(",")
}

impl Control {
    pub fn new(settings: Settings, limits: CommandLimits) -> Self {
        Control { settings, limits }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Every retained state, to republish on each (re)connect before `online`.
    pub fn retained(&self) -> Vec<Effect> {
        let s = &self.settings;
        let mut out = vec![
            Effect::State { feature: "enabled", value: on_off(s.enabled) },
            Effect::State { feature: "quality", value: s.quality.clone() },
            Effect::State { feature: "blend", value: format!("{}", s.blend.percent()) },
            Effect::State { feature: "selector", value: s.selector.to_string() },
            Effect::State { feature: "face_order", value: s.face_order.to_string() },
            Effect::State { feature: "frame_rate", value: format!("{}", s.frame_rate) },
            Effect::State { feature: "color_transfer", value: s.color_transfer.to_string() },
            Effect::State { feature: "mouth_mask", value: on_off(s.mouth_mask) },
            Effect::State { feature: "mask_blur", value: format!("{}", s.mask.blur) },
            Effect::State { feature: "mask_padding", value: padding_state(&s.mask.padding) },
            Effect::State { feature: "reference_distance", value: format!("{}", s.reference_distance) },
        ];
        if let Some(name) = &s.source {
            out.push(Effect::State { feature: "source", value: name.clone() });
        }
        if let Some(map) = &s.map {
            out.push(Effect::State { feature: "map", value: map.clone() });
        }
        out
    }

    /// Applies the command on `<feature>/set`.
    pub fn handle(&mut self, feature: &str, payload: &[u8]) -> Vec<Effect> {
        let command = match parse(feature, payload, &self.limits) {
            Ok(c) => c,
            Err(e) => return vec![Effect::Error(e)],
        };
        match command {
            // The state follows once the switch says which tier runs: a tier
            // that cannot load falls back, and the state names the fallback.
            Command::Quality(tier) => vec![Effect::SwitchTier(tier)],
            // The mapping's state is published once its names are found.
            Command::Map(pairs) => vec![Effect::SetMap(pairs)],
            // The source's state is published once the identity is computed.
            Command::Source(src) => vec![Effect::SetSource(src)],
            Command::Forget(name) => vec![Effect::Forget(name)],
            Command::Snapshot => vec![Effect::Snapshot],
            Command::Reload => vec![Effect::Reload],
            Command::Stall => vec![Effect::Stall],
            Command::Panic => vec![Effect::Panic],
            Command::Unplug(d) => vec![Effect::Unplug(d)],
            setting => match self.set(setting) {
                // The echo first: applying may correct it (a mouth mask the tier
                // cannot do is switched off again), and the correction must be last.
                Some((feature, value)) => vec![Effect::State { feature, value }, Effect::Reconfigure],
                None => Vec::new(),
            },
        }
    }

    /// Changes one setting; its feature and the state to echo.
    fn set(&mut self, setting: Command) -> Option<(&'static str, String)> {
        let s = &mut self.settings;
        Some(match setting {
            Command::Enabled(on) => {
                s.enabled = on;
                ("enabled", on_off(on))
            }
            Command::Blend(v) => {
                s.blend = v;
                ("blend", format!("{}", v.percent()))
            }
            Command::Selector(sel) => {
                s.selector = sel;
                ("selector", sel.to_string())
            }
            Command::FrameRate(fps) => {
                s.frame_rate = fps;
                ("frame_rate", format!("{fps}"))
            }
            Command::FaceOrder(o) => {
                s.face_order = o;
                ("face_order", o.to_string())
            }
            Command::MouthMask(on) => {
                s.mouth_mask = on;
                ("mouth_mask", on_off(on))
            }
            Command::ColorTransfer(c) => {
                s.color_transfer = c;
                ("color_transfer", c.to_string())
            }
            Command::MaskBlur(v) => {
                s.mask.blur = v;
                ("mask_blur", format!("{v}"))
            }
            Command::MaskPadding(p) => {
                s.mask.padding = p;
                ("mask_padding", padding_state(&p))
            }
            Command::ReferenceDistance(d) => {
                s.reference_distance = d;
                ("reference_distance", format!("{d}"))
            }
            _ => return None,
        })
    }

    /// Records the source state once the daemon has set the identity.
    pub fn source_set(&mut self, state: &str) -> Effect {
        self.settings.source = Some(state.to_string());
        Effect::State { feature: "source", value: state.to_string() }
    }

    /// Records the mapping once the daemon has set it.
    pub fn map_set(&mut self, state: &str) -> Effect {
        self.settings.map = Some(state.to_string());
        Effect::State { feature: "map", value: state.to_string() }
    }

    /// Turns the mouth mask off (the running tier cannot do it) and echoes it.
    pub fn mouth_mask_unavailable(&mut self) -> Effect {
        self.settings.mouth_mask = false;
        Effect::State { feature: "mouth_mask", value: on_off(false) }
    }

    /// Records the tier actually running (after a switch failed or fell
    /// back) and echoes it.
    pub fn tier_in_use(&mut self, tier: &str) -> Effect {
        self.settings.quality = tier.to_string();
        Effect::State { feature: "quality", value: tier.to_string() }
    }

    /// New bounds after a configuration reload.
    pub fn set_limits(&mut self, limits: CommandLimits) {
        self.limits = limits;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control() -> Control {
        let settings = Settings {
            enabled: true,
            quality: "fast".into(),
            blend: Blend::FULL,
            selector: SelectorMode::One,
            face_order: FaceOrder::LargeSmall,
            frame_rate: 5.0,
            mask: MaskSettings::default(),
            color_transfer: ColorTransfer::None,
            mouth_mask: false,
            reference_distance: 0.3,
            map: None,
            source: None,
        };
        let limits = CommandLimits { tiers: vec!["fast".into(), "quality".into()], ..CommandLimits::default() };
        Control::new(settings, limits)
    }

    #[test]
    fn a_valid_command_changes_the_setting_and_echoes_its_state() {
        let mut c = control();
        assert_eq!(c.handle("quality", b"quality"), vec![Effect::SwitchTier("quality".into())]);
        assert_eq!(c.settings().quality, "fast", "the quality state follows the switch");
        assert_eq!(
            c.tier_in_use("quality"),
            Effect::State { feature: "quality", value: "quality".into() },
            "the tier that runs is echoed"
        );
        assert_eq!(c.settings().quality, "quality");
        c.handle("blend", b"40");
        assert_eq!(c.settings().blend.percent(), 40.0);
        c.handle("enabled", b"OFF");
        assert!(!c.settings().enabled);
        assert_eq!(
            c.handle("mask_padding", b"10, 0,5,0"),
            vec![Effect::State { feature: "mask_padding", value: "10,0,5,0".into() }, Effect::Reconfigure]
        );
        c.handle("mask_blur", b"0.5");
        c.handle("reference_distance", b"0.2");
        assert_eq!((c.settings().mask.blur, c.settings().reference_distance), (0.5, 0.2));
    }

    #[test]
    fn a_refused_command_changes_nothing() {
        let mut c = control();
        let before = c.settings().clone();
        let bad: [(&str, &[u8]); 7] = [
            ("blend", b"900"),
            ("quality", b"turbo"),
            ("enabled", b"\xff"),
            ("nope", b"1"),
            ("mask_blur", b"1.5"),
            ("mask_padding", b"10,10"),
            ("reference_distance", b"-0.1"),
        ];
        for (f, p) in bad {
            let effects = c.handle(f, p);
            assert!(matches!(effects.as_slice(), [Effect::Error(_)]), "{f}: {effects:?}");
        }
        assert_eq!(c.settings(), &before);
    }

    #[test]
    fn retained_states_cover_every_setting_and_the_source_once_set() {
        let mut c = control();
        assert_eq!(c.retained().len(), 11);
        assert_eq!(c.handle("source", b"alice"), vec![Effect::SetSource(SourceCommand::Named("alice".into()))]);
        assert_eq!(c.settings().source, None, "not set until the daemon computed it");
        c.source_set("alice");
        assert!(c.retained().contains(&Effect::State { feature: "source", value: "alice".into() }));
    }

    #[test]
    fn a_flood_of_hostile_commands_leaves_the_state_machine_unchanged() {
        let mut c = control();
        let before = c.settings().clone();
        for i in 0..1000u32 {
            let payload = i.to_le_bytes().repeat(i as usize % 300);
            c.handle(["blend", "source", "quality", "enabled", "selector"][i as usize % 5], &payload);
        }
        assert_eq!(c.settings(), &before);
    }
}
