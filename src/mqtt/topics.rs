//! The topic grammar: everything hangs under `<prefix>/<device_id>`.
//!
//! | topic | direction | payload |
//! |---|---|---|
//! | `<base>/available` | out, retained | `starting`, `warming`, `online`, `offline` (last will), `stopped` |
//! | `<base>/frame` | out, QoS 0 | JPEG bytes |
//! | `<base>/snapshot` | out | JPEG bytes |
//! | `<base>/faces`, `stats`, `events`, `error` | out | JSON |
//! | `<base>/<feature>/set` | in | command |
//! | `<base>/<feature>/state` | out, retained | the applied value |

/// Features that take commands on `<base>/<feature>/set`.
pub const FEATURES: [&str; 16] = [
    "enabled",
    "source",
    "quality",
    "blend",
    "selector",
    "face_order",
    "color_transfer",
    "mouth_mask",
    "map",
    "frame_rate",
    "mask_blur",
    "mask_padding",
    "reference_distance",
    "forget",
    "snapshot",
    "reload",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    #[error("mqtt.{key} `{value}` may not be empty or contain `+`, `#` or an empty level")]
    Invalid { key: &'static str, value: String },
    #[error("mqtt.device_id `{0}` may not contain `/`")]
    DeviceIdSlash(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics {
    base: String,
}

fn valid(s: &str) -> bool {
    !s.is_empty() && !s.contains(['+', '#', '\0']) && s.split('/').all(|level| !level.is_empty())
}

impl Topics {
    pub fn new(prefix: &str, device_id: &str) -> Result<Topics, TopicError> {
        if !valid(prefix) {
            return Err(TopicError::Invalid { key: "prefix", value: prefix.into() });
        }
        if !valid(device_id) {
            return Err(TopicError::Invalid { key: "device_id", value: device_id.into() });
        }
        if device_id.contains('/') {
            return Err(TopicError::DeviceIdSlash(device_id.into()));
        }
        Ok(Topics { base: format!("{prefix}/{device_id}") })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn at(&self, leaf: &str) -> String {
        format!("{}/{leaf}", self.base)
    }

    pub fn available(&self) -> String {
        self.at("available")
    }
    pub fn frame(&self) -> String {
        self.at("frame")
    }
    pub fn snapshot(&self) -> String {
        self.at("snapshot")
    }
    pub fn faces(&self) -> String {
        self.at("faces")
    }
    pub fn stats(&self) -> String {
        self.at("stats")
    }
    pub fn events(&self) -> String {
        self.at("events")
    }
    pub fn error(&self) -> String {
        self.at("error")
    }
    pub fn state(&self, feature: &str) -> String {
        self.at(&format!("{feature}/state"))
    }
    pub fn set(&self, feature: &str) -> String {
        self.at(&format!("{feature}/set"))
    }

    /// The one subscription the daemon needs.
    pub fn set_filter(&self) -> String {
        self.at("+/set")
    }

    /// The feature of a `<base>/<feature>/set` topic; `None` for anything else.
    pub fn feature_of<'t>(&self, topic: &'t str) -> Option<&'t str> {
        let rest = topic.strip_prefix(self.base.as_str())?.strip_prefix('/')?;
        let feature = rest.strip_suffix("/set")?;
        (!feature.is_empty() && !feature.contains('/')).then_some(feature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_hang_under_prefix_and_device() {
        let t = Topics::new("fusiond", "cam-1").unwrap();
        assert_eq!(t.available(), "fusiond/cam-1/available");
        assert_eq!(t.set("blend"), "fusiond/cam-1/blend/set");
        assert_eq!(t.state("blend"), "fusiond/cam-1/blend/state");
        assert_eq!(t.set_filter(), "fusiond/cam-1/+/set");
    }

    #[test]
    fn only_set_topics_of_this_device_carry_commands() {
        let t = Topics::new("home/fusiond", "cam-1").unwrap();
        assert_eq!(t.feature_of("home/fusiond/cam-1/blend/set"), Some("blend"));
        assert_eq!(t.feature_of("home/fusiond/cam-1/blend/state"), None);
        assert_eq!(t.feature_of("home/fusiond/cam-2/blend/set"), None);
        assert_eq!(t.feature_of("home/fusiond/cam-1/a/b/set"), None);
        assert_eq!(t.feature_of("home/fusiond/cam-1//set"), None);
    }

    #[test]
    fn wildcards_and_empty_levels_are_refused() {
        assert!(Topics::new("a/+", "x").is_err());
        assert!(Topics::new("a//b", "x").is_err());
        assert!(Topics::new("a", "#").is_err());
        assert!(matches!(Topics::new("a", "x/y"), Err(TopicError::DeviceIdSlash(_))));
        assert!(Topics::new("", "x").is_err());
    }
}
