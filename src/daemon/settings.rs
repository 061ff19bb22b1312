//! The config turned, once, into what the daemon's threads need: the MQTT
//! session, the camera, the command limits, the worker's and the control
//! state machine's settings, and the stats timer. A reload builds them
//! again and says which changed keys only a restart applies.

use super::camera::{Health, SourceFactory};
use crate::capture::{FrameSource, SequenceSource, V4l2Source};
use crate::config::{CameraConfig, Config, SourceKind};
use crate::control;
use crate::face::{MaskSettings, SelectorMode, SmoothSettings, StickySettings};
use crate::mqtt::{discovery, ClientIdentity, CommandLimits, LinkSettings, Message, PayloadCaps, TlsSettings, Topics};
use anyhow::{anyhow, Context, Result};
use std::time::Duration;

/// Keys (and sections) a reload puts in force; a change to any other key
/// is reported as needing a restart. `pipeline.blend`, `selector`, `source`
/// and `output.frame_rate` are start values: after start, commands own them.
const RELOADABLE: &[&str] = &[
    "models",
    "tier",
    "inference",
    "pipeline.detect_interval_ms",
    "pipeline.selector_margin",
    "pipeline.selector_hold_ms",
    "pipeline.smoothing",
    "pipeline.refine_size",
    "pipeline.max_yaw_deg",
    "pipeline.fit_detector",
    "pipeline.mouth_mask_grow",
    "pipeline.mouth_mask_feather",
    "pipeline.max_source_bytes",
    "pipeline.sources",
    "pipeline.sources_allowlist",
    "pipeline.max_source_pixels",
    "output.frames",
    "output.label",
    "output.watermark",
    "output.jpeg_quality",
    "output.max_frame_rate",
    "output.stats_interval_s",
    "debug",
];

/// The changed keys between `old` and `new` that a reload cannot apply.
pub fn restart_needed(old: &Config, new: &Config) -> Vec<String> {
    let applies = |key: &str| RELOADABLE.iter().any(|r| key == *r || key.starts_with(&format!("{r}.")));
    old.changed_keys(new).into_iter().filter(|k| !applies(k)).collect()
}

pub struct DaemonSettings {
    pub topics: Topics,
    pub link: LinkSettings,
    pub queue_messages: usize,
    pub limits: CommandLimits,
    pub worker: WorkerConfig,
    /// What commands can change, at their start values.
    pub control: control::Settings,
    pub stats_interval: Duration,
    pub camera: CameraConfig,
    /// The retained Home Assistant discovery config, or the empty retained
    /// message that removes it (`mqtt.discovery = false`).
    pub discovery: Message,
}

impl DaemonSettings {
    pub fn from_config(config: &Config) -> Result<DaemonSettings> {
        let device_id = config.mqtt.device_id.clone().unwrap_or_else(hostname);
        let topics = Topics::new(&config.mqtt.prefix, &device_id)?;
        let o = &config.output;
        Ok(DaemonSettings {
            link: link_settings(config, &device_id)?,
            queue_messages: config.mqtt.queue_messages,
            limits: limits(config),
            worker: WorkerConfig::from_config(config),
            control: control::Settings {
                enabled: true,
                quality: config.models.start_tier.clone(),
                blend: config.pipeline.blend,
                selector: config.pipeline.selector,
                face_order: config.pipeline.face_order,
                frame_rate: if o.frames { o.frame_rate } else { 0.0 },
                mask: MaskSettings { blur: config.pipeline.mask_blur, padding: config.pipeline.mask_padding },
                color_transfer: config.pipeline.color_transfer,
                mouth_mask: config.pipeline.mouth_mask,
                map: None,
                reference_distance: config.pipeline.reference_distance,
                source: None,
            },
            stats_interval: Duration::from_secs(o.stats_interval_s),
            camera: config.camera.clone(),
            discovery: discovery_message(config, &device_id, &topics),
            topics,
        })
    }

    pub fn health(&self) -> Health {
        Health::new(
            Duration::from_millis(self.camera.reconnect_min_ms),
            Duration::from_millis(self.camera.reconnect_max_ms),
        )
    }

    /// The camera the config asks for: the V4L2 device, or the sample
    /// frames when `auto` finds no device.
    pub fn camera_factory(&self) -> Result<SourceFactory> {
        let cam = &self.camera;
        let use_v4l2 = match cam.source {
            SourceKind::V4l2 => true,
            SourceKind::Sequence => false,
            SourceKind::Auto => cam.device.exists(),
        };
        if use_v4l2 {
            let cam = cam.clone();
            return Ok(Box::new(move || V4l2Source::open(&cam).map(|s| Box::new(s) as Box<dyn FrameSource>)));
        }
        let dir = cam.samples.iter().find(|d| d.is_dir()).cloned().ok_or_else(|| {
            anyhow!(
                "no camera at {} and none of camera.samples exists ({}); attach a camera or name a folder of JPEG frames",
                cam.device.display(),
                cam.samples.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            )
        })?;
        if cam.source == SourceKind::Auto {
            log::info!("no camera at {}: playing the sample frames in {}", cam.device.display(), dir.display());
        }
        let fps = cam.samples_fps;
        Ok(Box::new(move || SequenceSource::open(&dir, fps).map(|s| Box::new(s) as Box<dyn FrameSource>)))
    }
}

/// The worker's own config keys; a reload posts them again.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    pub detect_interval: Duration,
    pub smoothing: SmoothSettings,
    /// Turned heads past this yaw have their swap faded out.
    pub max_yaw_deg: f32,
    pub sticky: StickySettings,
    /// The mouth mask's shape (whether it is on is a command's).
    pub mouth_grow: f32,
    pub mouth_feather: f32,
    pub jpeg_quality: u8,
    /// Publishing frames at all (`output.frames`).
    pub frames: bool,
    /// The box number the output frames are marked with
    /// (`[output.watermark]`); `None` leaves them unmarked.
    pub mark: Option<u16>,
    /// The visible badge (`output.label`).
    pub label: bool,
}

impl WorkerConfig {
    pub fn from_config(config: &Config) -> WorkerConfig {
        WorkerConfig {
            detect_interval: Duration::from_millis(config.pipeline.detect_interval_ms),
            smoothing: config.pipeline.smoothing,
            max_yaw_deg: config.pipeline.max_yaw_deg,
            mouth_grow: config.pipeline.mouth_mask_grow,
            mouth_feather: config.pipeline.mouth_mask_feather,
            sticky: StickySettings {
                margin: config.pipeline.selector_margin,
                hold: Duration::from_millis(config.pipeline.selector_hold_ms),
            },
            jpeg_quality: config.output.jpeg_quality,
            frames: config.output.frames,
            label: config.output.label,
            mark: config.output.watermark.enabled.then(|| {
                let device = config.mqtt.device_id.clone().unwrap_or_else(hostname);
                config.output.watermark.box_number(&device)
            }),
        }
    }
}

pub fn limits(config: &Config) -> CommandLimits {
    CommandLimits {
        max_image_bytes: config.pipeline.max_source_bytes,
        max_image_pixels: config.pipeline.max_source_pixels,
        tiers: config.tier.iter().map(|t| t.name.clone()).collect(),
        max_frame_rate: config.output.max_frame_rate,
        frames: config.output.frames,
        allow_stall: config.debug.stall_command,
    }
}

/// The values the live page's selects offer under `config`.
pub(crate) fn choices(config: &Config) -> crate::http::Choices {
    use crate::face::{FaceOrder, SelectorMode};
    crate::http::Choices {
        quality: config.tier.iter().map(|t| t.name.clone()).collect(),
        selector: SelectorMode::ALL.iter().map(|m| m.as_str().to_string()).collect(),
        face_order: FaceOrder::ALL.iter().map(|o| o.as_str().to_string()).collect(),
    }
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().replace(['/', '+', '#'], "_"))
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "fusiond".into())
}

/// Home Assistant's device config after a reload from `old` to `new`: the
/// new tiers, frame-rate limit and `output.frames`, on the broker session
/// (prefix and device id) `old` started, which only a restart changes.
pub(crate) fn discovery_after_reload(old: &Config, new: &Config, topics: &Topics) -> Message {
    let mut announced = new.clone();
    announced.mqtt = old.mqtt.clone();
    let device_id = announced.mqtt.device_id.clone().unwrap_or_else(hostname);
    discovery_message(&announced, &device_id, topics)
}

/// The discovery config (or its withdrawal) `config` announces.
fn discovery_message(config: &Config, device_id: &str, topics: &Topics) -> Message {
    let prefix = &config.mqtt.discovery_prefix;
    if !config.mqtt.discovery {
        return discovery::withdraw(prefix, device_id);
    }
    let input = discovery::DiscoveryInput {
        prefix,
        device_id,
        tiers: config.tier.iter().map(|t| t.name.clone()).collect(),
        selectors: SelectorMode::ALL.iter().map(|m| m.as_str().to_string()).collect(),
        max_frame_rate: config.output.max_frame_rate,
        frames: config.output.frames,
        configuration_url: config.http.page_url(&hostname()),
    };
    discovery::announce(&input, topics)
}

/// The TLS files `mqtt` names, read now so that a missing one stops the
/// start with its name.
fn tls_settings(m: &crate::config::MqttConfig) -> Result<TlsSettings> {
    let read = |key: &str, p: &std::path::Path| {
        std::fs::read(p).with_context(|| format!("mqtt.{key} {}: cannot read it; check the path", p.display()))
    };
    let ca = m.ca_file.as_deref().map(|p| read("ca_file", p)).transpose()?;
    let client = match (&m.cert_file, &m.key_file) {
        (Some(cert), Some(key)) => Some(ClientIdentity {
            chain: read("cert_file", cert)?,
            key: crate::credential::read("mqtt.key_file", key).map_err(|e| anyhow!(e))?.into_bytes(),
        }),
        _ => None,
    };
    Ok(TlsSettings { ca, client })
}

/// The session the config asks for; without `mqtt.host` it is the box's
/// own broker on 127.0.0.1.
fn link_settings(config: &Config, device_id: &str) -> Result<LinkSettings> {
    let m = &config.mqtt;
    let credentials = match (&m.username, &m.password_file) {
        (None, None) => None,
        (user, None) => Some((user.clone().unwrap_or_default(), String::new())),
        (user, Some(file)) => Some((
            user.clone().unwrap_or_default(),
            crate::credential::read("mqtt.password_file", file).map_err(|e| anyhow!(e))?,
        )),
    };
    let tls = if m.tls { Some(tls_settings(m)?) } else { None };
    Ok(LinkSettings {
        host: m.host.clone().unwrap_or_else(|| "127.0.0.1".into()),
        port: m.port,
        client_id: m.client_id.clone().unwrap_or_else(|| format!("fusiond-{device_id}")),
        keep_alive: Duration::from_secs(m.keep_alive_s),
        credentials,
        tls,
        caps: std::sync::Arc::new(PayloadCaps::new(config.pipeline.max_source_bytes)),
        reconnect_max: Duration::from_secs(m.reconnect_max_s),
        client_queue: 64,
        ha_status: m.discovery.then(|| discovery::status_topic(&m.discovery_prefix)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_reload_names_the_keys_only_a_restart_applies() {
        let old = Config::default();
        let text = "[mqtt]\nport = 1884\n[camera]\nfps = 15\n[output]\njpeg_quality = 50\n\
                    [pipeline]\ndetect_interval_ms = 0\nblend = 40.0\n";
        let new = Config::parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(restart_needed(&old, &new), ["camera.fps", "mqtt.port", "pipeline.blend"]);
    }

    #[test]
    fn settings_follow_the_config() {
        let text = "[mqtt]\nhost = \"broker\"\ndevice_id = \"box1\"\n[output]\nframes = false\n";
        let s = DaemonSettings::from_config(&Config::parse(text, Path::new("c.toml")).unwrap()).unwrap();
        assert_eq!((s.link.host.as_str(), s.link.client_id.as_str()), ("broker", "fusiond-box1"));
        assert!(s.link.credentials.is_none());
        assert_eq!(s.control.frame_rate, 0.0);
        assert_eq!(s.topics.base(), "fusiond/box1");
        assert_eq!(s.link.ha_status.as_deref(), Some("homeassistant/status"));
        assert_eq!(s.discovery.topic, "homeassistant/device/box1/config");
    }

    #[test]
    fn without_a_host_the_session_is_the_boxs_own_broker() {
        let s = DaemonSettings::from_config(
            &Config::parse(
                "[mqtt]
device_id = \"b\"\n",
                Path::new("c.toml"),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!((s.link.host.as_str(), s.link.port), ("127.0.0.1", 1883));
    }
}
