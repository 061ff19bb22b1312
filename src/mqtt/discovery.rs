//! Home Assistant MQTT discovery: one retained device-based config on
//! `<discovery_prefix>/device/<device_id>/config` that names every entity
//! and the topics it reads and writes. Plain data; the daemon pushes the
//! message and the [`Link`](super::Link) republishes it on every reconnect
//! and when Home Assistant announces itself on `<discovery_prefix>/status`.

use super::{Message, Topics};
use serde::Serialize;
use std::collections::BTreeMap;

/// What the config is built from.
#[derive(Debug, Clone)]
pub struct DiscoveryInput<'a> {
    pub prefix: &'a str,
    pub device_id: &'a str,
    pub tiers: Vec<String>,
    pub selectors: Vec<String>,
    pub max_frame_rate: f32,
    /// Frames are published (`output.frames`): the frame rate number and the
    /// frame camera are announced only then.
    pub frames: bool,
    /// The HTTP page, when it is reachable from outside the box.
    pub configuration_url: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct DeviceConfig {
    pub device: Device,
    pub origin: Origin,
    pub availability: Vec<Availability>,
    pub components: BTreeMap<String, Component>,
    pub qos: u8,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Device {
    pub identifiers: Vec<String>,
    pub name: String,
    pub manufacturer: &'static str,
    pub model: &'static str,
    pub sw_version: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configuration_url: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Origin {
    pub name: &'static str,
    pub sw_version: &'static str,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Availability {
    pub topic: String,
    /// `<base>/available` also says `starting`, `warming` and `stopped`:
    /// everything but `online` is offline.
    pub value_template: &'static str,
}

/// One entity. Only the keys its platform uses are set.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Component {
    /// The key under `components`.
    #[serde(skip)]
    pub key: &'static str,
    pub platform: &'static str,
    pub unique_id: String,
    pub name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_topic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_topic: Option<String>,
    /// The camera's image topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_template: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_on: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_off: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_press: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit_of_measurement: Option<&'static str>,
    /// Decimals Home Assistant shows a numeric sensor with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggested_display_precision: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_class: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_class: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity_category: Option<&'static str>,
}

/// Republishes every retained message after 0.5–2.5 s, spread by the
/// clock so a fleet of boxes does not answer Home Assistant at once.
pub(super) fn republish_later(outbox: std::sync::Arc<super::Outbox>) {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let delay = std::time::Duration::from_millis(500 + u64::from(nanos % 2000));
    let spawned = std::thread::Builder::new().name("mqtt-rediscover".into()).spawn(move || {
        std::thread::sleep(delay);
        outbox.connected();
    });
    if let Err(e) = spawned {
        log::warn!("mqtt: cannot schedule the discovery republish: {e}");
    }
}

/// The config topic of `device_id`.
pub fn config_topic(prefix: &str, device_id: &str) -> String {
    format!("{prefix}/device/{device_id}/config")
}

/// The topic Home Assistant announces itself on.
pub fn status_topic(prefix: &str) -> String {
    format!("{prefix}/status")
}

/// The retained config message.
pub fn announce(input: &DiscoveryInput, topics: &Topics) -> Message {
    let body = serde_json::to_vec(&device_config(input, topics)).unwrap_or_default();
    Message::retained(config_topic(input.prefix, input.device_id), body)
}

/// The empty retained message that removes the device from Home Assistant.
pub fn withdraw(prefix: &str, device_id: &str) -> Message {
    Message::retained(config_topic(prefix, device_id), Vec::new())
}

pub fn device_config(input: &DiscoveryInput, topics: &Topics) -> DeviceConfig {
    let version = env!("CARGO_PKG_VERSION");
    DeviceConfig {
        device: Device {
            identifiers: vec![format!("fusiond_{}", input.device_id)],
            name: format!("fusiond {}", input.device_id),
            manufacturer: "fusiond",
            model: "fusiond face fusion daemon",
            sw_version: version,
            configuration_url: input.configuration_url.clone(),
        },
        origin: Origin { name: "fusiond", sw_version: version },
        availability: vec![Availability {
            topic: topics.available(),
            value_template: "{{ 'online' if value == 'online' else 'offline' }}",
        }],
        components: components(input, topics),
        qos: 1,
    }
}

fn components(input: &DiscoveryInput, topics: &Topics) -> BTreeMap<String, Component> {
    let id = |key: &str| format!("fusiond_{}_{key}", input.device_id);
    let mut all = controls(input, topics, &id);
    all.extend(sensors(topics, &id));
    // Without published frames, their rate and their camera mean nothing.
    all.retain(|c| input.frames || !matches!(c.key, "frame_rate" | "frame"));
    all.into_iter().map(|c| (c.key.to_string(), c)).collect()
}

/// The entities that send commands: each on `<base>/<key>/set`, with its
/// state on `<base>/<key>/state` (buttons have none).
fn controls(input: &DiscoveryInput, topics: &Topics, id: &dyn Fn(&str) -> String) -> Vec<Component> {
    let control = |platform, key: &'static str, name| Component {
        key,
        platform,
        unique_id: id(key),
        name,
        command_topic: Some(topics.set(key)),
        state_topic: (platform != "button").then(|| topics.state(key)),
        ..Component::default()
    };
    let number = |key, name, max, step, unit| Component {
        min: Some(0.0),
        max: Some(max),
        step: Some(step),
        unit_of_measurement: Some(unit),
        ..control("number", key, name)
    };
    let press = Some("PRESS");
    vec![
        Component { payload_on: Some("ON"), payload_off: Some("OFF"), ..control("switch", "enabled", "Face swap") },
        Component { options: Some(input.tiers.clone()), ..control("select", "quality", "Quality tier") },
        Component { options: Some(input.selectors.clone()), ..control("select", "selector", "Faces swapped") },
        number("blend", "Blend", 100.0, 1.0, "%"),
        number("frame_rate", "Frame rate", input.max_frame_rate, 0.5, "fps"),
        Component { payload_press: press, ..control("button", "snapshot", "Snapshot") },
        Component {
            payload_press: press,
            entity_category: Some("config"),
            ..control("button", "reload", "Reload config")
        },
    ]
}

/// The entities that only read: `stats`, `faces` and the frame.
fn sensors(topics: &Topics, id: &dyn Fn(&str) -> String) -> Vec<Component> {
    let stats = topics.stats();
    let sensor = |key: &'static str, name, topic: &str, template| Component {
        key,
        platform: "sensor",
        unique_id: id(key),
        name,
        state_topic: Some(topic.to_string()),
        value_template: Some(template),
        state_class: Some("measurement"),
        suggested_display_precision: Some(0),
        ..Component::default()
    };
    let p95 =
        "{{ value_json.latency_ms.capture_to_publish.p95_ms if value_json.latency_ms.capture_to_publish else none }}";
    let diagnostic = Some("diagnostic");
    vec![
        Component {
            unit_of_measurement: Some("fps"),
            suggested_display_precision: Some(1),
            ..sensor("processed_fps", "Processed frame rate", &stats, "{{ value_json.processed_fps }}")
        },
        Component {
            unit_of_measurement: Some("ms"),
            suggested_display_precision: Some(1),
            device_class: Some("duration"),
            entity_category: diagnostic,
            ..sensor("latency_p95", "Capture to publish p95", &stats, p95)
        },
        sensor("faces", "Faces in view", &topics.faces(), "{{ value_json.faces | length }}"),
        Component {
            state_class: Some("total_increasing"),
            entity_category: diagnostic,
            ..sensor("dropped_frames", "Dropped frames", &stats, "{{ value_json.dropped_frames }}")
        },
        Component {
            key: "frame",
            platform: "camera",
            unique_id: id("frame"),
            name: "Fused frame",
            topic: Some(topics.frame()),
            ..Component::default()
        },
        Component {
            key: "camera",
            platform: "binary_sensor",
            unique_id: id("camera"),
            name: "Camera streaming",
            state_topic: Some(stats.clone()),
            value_template: Some("{{ 'ON' if value_json.camera == 'streaming' else 'OFF' }}"),
            payload_on: Some("ON"),
            payload_off: Some("OFF"),
            device_class: Some("running"),
            entity_category: diagnostic,
            ..Component::default()
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> DiscoveryInput<'static> {
        DiscoveryInput {
            prefix: "homeassistant",
            device_id: "box1",
            tiers: vec!["fast".into(), "quality".into()],
            selectors: vec!["one".into(), "many".into(), "reference".into()],
            max_frame_rate: 30.0,
            frames: true,
            configuration_url: None,
        }
    }

    #[test]
    fn the_config_names_every_entity_on_the_devices_topics() {
        let topics = Topics::new("fusiond", "box1").unwrap();
        let m = announce(&input(), &topics);
        assert_eq!(m.topic, "homeassistant/device/box1/config");
        assert!(m.retain);
        let v: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
        let cmps = v["components"].as_object().unwrap();
        let platforms: Vec<&str> = cmps.values().map(|c| c["platform"].as_str().unwrap()).collect();
        for p in ["switch", "select", "number", "button", "sensor", "camera", "binary_sensor"] {
            assert!(platforms.contains(&p), "{p} missing: {platforms:?}");
        }
        assert_eq!(cmps["enabled"]["command_topic"], "fusiond/box1/enabled/set");
        assert_eq!(cmps["enabled"]["state_topic"], "fusiond/box1/enabled/state");
        assert_eq!(cmps["quality"]["options"], serde_json::json!(["fast", "quality"]));
        assert_eq!(cmps["frame_rate"]["max"], 30.0);
        assert!(cmps["snapshot"].get("state_topic").is_none(), "a button has no state");
        assert_eq!(v["availability"][0]["topic"], "fusiond/box1/available");
        assert!(v["device"].get("configuration_url").is_none());
        let ids: std::collections::BTreeSet<&str> = cmps.values().map(|c| c["unique_id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), cmps.len(), "unique ids are unique");
        // Numeric sensors say how many decimals to show (not 14.009283016614699 fps).
        for c in cmps.values().filter(|c| c["platform"] == "sensor") {
            assert!(c["suggested_display_precision"].is_u64(), "{c}");
        }
        assert_eq!(cmps["processed_fps"]["suggested_display_precision"], 1);
    }

    #[test]
    fn without_frames_neither_their_rate_nor_their_camera_is_announced() {
        let topics = Topics::new("fusiond", "box1").unwrap();
        let v: serde_json::Value =
            serde_json::from_slice(&announce(&DiscoveryInput { frames: false, ..input() }, &topics).payload).unwrap();
        let cmps = v["components"].as_object().unwrap();
        assert!(cmps.get("frame_rate").is_none() && cmps.get("frame").is_none(), "{cmps:?}");
        assert!(cmps.get("blend").is_some() && cmps.get("processed_fps").is_some());
    }

    #[test]
    fn withdrawing_is_an_empty_retained_config() {
        let m = withdraw("ha", "box1");
        assert_eq!((m.topic.as_str(), m.payload.len(), m.retain), ("ha/device/box1/config", 0, true));
        assert_eq!(status_topic("ha"), "ha/status");
    }
}
