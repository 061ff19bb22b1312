//! Home Assistant MQTT discovery against a real mosquitto: the device
//! config carries the keys Home Assistant documents, every command topic it
//! names changes the matching state, every state topic it names carries
//! the value its template reads, a Home Assistant restart gets the config
//! again, and `mqtt.discovery = false` removes the device.

use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Msg, Watcher, T};
use serde_json::Value;

const BASE: &str = "fusiond/hass";

/// `topic` as a leaf under the device's base.
fn leaf(topic: &str) -> &str {
    topic.strip_prefix(BASE).and_then(|t| t.strip_prefix('/')).unwrap_or_else(|| panic!("{topic} is not under {BASE}"))
}

/// The `value_json.<key>` a template reads first.
fn json_key(template: &str) -> Option<&str> {
    let rest = template.split("value_json.").nth(1)?;
    Some(rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap())
}

/// What a command sends, and the state it must lead to.
fn command_and_state(c: &Value) -> Option<(String, String)> {
    let s = |k: &str| c[k].as_str().map(str::to_string);
    match c["platform"].as_str()? {
        "switch" => Some((s("payload_off")?, s("payload_off")?)),
        "select" => {
            let last = c["options"].as_array()?.last()?.as_str()?.to_string();
            Some((last.clone(), last))
        }
        "number" => {
            let v = (c["max"].as_f64()? / 2.0).round();
            Some((format!("{v}"), format!("{v}")))
        }
        _ => None,
    }
}

fn same_value(state: &Msg, want: &str) -> bool {
    let got = state.text();
    match (got.trim().parse::<f64>(), want.parse::<f64>()) {
        (Ok(a), Ok(b)) => (a - b).abs() < 1e-6,
        _ => got.trim() == want,
    }
}

fn check_control(w: &Watcher, name: &str, c: &Value) {
    let command = c["command_topic"].as_str().unwrap();
    match command_and_state(c) {
        Some((payload, state)) => {
            let from = w.count();
            w.publish(command, payload.clone(), false);
            let topic = leaf(c["state_topic"].as_str().unwrap());
            w.wait_from(from, topic, *T, |m| same_value(m, &state));
            eprintln!("{name}: {payload} on {command} -> {topic} = {state}");
        }
        None => {
            assert_eq!(c["platform"], "button", "{name}: {c}");
            let from = w.count();
            w.publish(command, c["payload_press"].as_str().unwrap(), false);
            match name {
                "snapshot" => drop(w.wait_from(from, "snapshot", *T, |m| m.payload.starts_with(&[0xff, 0xd8]))),
                "reload" => drop(w.wait_from(from, "events", *T, |m| m.json()["event"] == "reloaded")),
                other => panic!("a button the test does not know: {other}"),
            }
        }
    }
}

fn check_state(w: &Watcher, name: &str, c: &Value) {
    let topic = c["state_topic"].as_str().or(c["topic"].as_str()).unwrap();
    let m = w.wait(leaf(topic), *T, |m| !m.payload.is_empty());
    if let Some(key) = c["value_template"].as_str().and_then(json_key) {
        let v = m.json();
        assert!(v.get(key).is_some(), "{name}: {topic} has no `{key}` for its template: {v}");
    }
}

#[test]
fn home_assistant_discovery_names_topics_that_carry_and_change_the_state() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), broker.port, "hass", "");
    let ha = Watcher::start(broker.port, "homeassistant");
    let w = Watcher::start(broker.port, BASE);
    let _d = Daemon::spawn(&config);
    online(&w);
    let m = ha.wait("device/hass/config", *T, |m| !m.payload.is_empty());
    assert!(m.retained || ha.count() > 0);
    let cfg = m.json();
    assert_eq!(cfg["device"]["identifiers"], serde_json::json!(["fusiond_hass"]), "{cfg}");
    for key in ["name", "manufacturer", "model", "sw_version"] {
        assert!(cfg["device"][key].is_string(), "device.{key}: {cfg}");
    }
    assert_eq!(cfg["origin"]["name"], "fusiond");
    let available = &cfg["availability"][0];
    assert_eq!(available["topic"], format!("{BASE}/available"));
    assert!(available["value_template"].as_str().unwrap().contains("online"));
    let components = cfg["components"].as_object().unwrap();
    assert_eq!(components["quality"]["options"], serde_json::json!(["fast", "quality"]));
    for (name, c) in components {
        assert!(c["platform"].is_string() && c["unique_id"].is_string(), "{name}: {c}");
        if c["command_topic"].is_string() {
            check_control(&w, name, c);
        } else {
            check_state(&w, name, c);
        }
    }

    // Home Assistant restarts: it says `online` and gets the config again.
    let from = ha.count();
    ha.publish("homeassistant/status", "online", false);
    ha.wait_from(from, "device/hass/config", *T, |m| !m.payload.is_empty());
}

#[test]
fn discovery_off_removes_the_device_from_home_assistant() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let ha = Watcher::start(broker.port, "homeassistant");
    // A config left behind by an earlier run with discovery on.
    ha.publish("homeassistant/device/gone/config", "{\"device\":{}}", true);
    ha.wait("device/gone/config", *T, |m| !m.payload.is_empty());
    let config = write_config(dir.path(), broker.port, "gone", "");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("reconnect_max_s = 2", "reconnect_max_s = 2\ndiscovery = false");
    std::fs::write(&config, text).unwrap();
    let _d = Daemon::spawn(&config);
    ha.wait("device/gone/config", *T, |m| m.payload.is_empty());
    let late = Watcher::start(broker.port, "homeassistant");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(late.all().iter().all(|m| m.topic != "homeassistant/device/gone/config"), "no retained config is left");
}

/// A reload that adds a tier and lowers the frame-rate limit announces the
/// device again, so Home Assistant's choices follow the config.
#[test]
fn a_reload_that_changes_tiers_or_limits_announces_the_device_again() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), broker.port, "hass2", "");
    let ha = Watcher::start(broker.port, "homeassistant");
    let w = Watcher::start(broker.port, "fusiond/hass2");
    let _d = Daemon::spawn(&config);
    online(&w);
    let first = ha.wait("device/hass2/config", *T, |m| !m.payload.is_empty()).json();
    assert_eq!(first["components"]["quality"]["options"], serde_json::json!(["fast", "quality"]));
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("frame_rate = 5.0", "frame_rate = 5.0\nmax_frame_rate = 12.0")
        + "\n[[tier]]\nname = \"third\"\nmodels = [\"yunet_2023mar\", \"arcface_fr\", \"identity_swapper\"]\n";
    std::fs::write(&config, text).unwrap();
    let from = ha.count();
    w.send("reload", "PRESS");
    let again = ha
        .wait_from(from, "device/hass2/config", *T, |m| {
            !m.payload.is_empty()
                && m.json()["components"]["quality"]["options"].as_array().is_some_and(|o| o.len() == 3)
        })
        .json();
    assert_eq!(again["components"]["quality"]["options"], serde_json::json!(["fast", "quality", "third"]));
    assert_eq!(again["components"]["frame_rate"]["max"], 12.0);
}
