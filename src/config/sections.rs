//! The sections of the config file as they are written, each with its
//! defaults and the checks that need nothing outside the section. `Option`
//! means the key may be left out, and leaving it out means something (the
//! doc line says what).

use crate::face::{Blend, ColorTransfer, FaceOrder, MaskSettings, MouthSettings, SelectorMode, SmoothSettings};
use crate::infer::Precision;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

fn bad(message: impl Into<String>) -> Result<(), String> {
    Err(message.into())
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelsConfig {
    /// Persistent model directories, searched in order.
    pub dirs: Vec<PathBuf>,
    /// tmpfs mount point that models are staged into and loaded from.
    pub ramdisk: PathBuf,
    /// Size limit of the tmpfs when `fusiond stage` mounts it.
    pub ramdisk_size_mib: u64,
    /// Tier the daemon starts in.
    pub start_tier: String,
    /// Load the next tier in the background once the start tier is ready.
    pub preload_next: bool,
    /// Loaded-model cache bounds.
    pub cache_max_models: usize,
    pub cache_max_mib: u64,
    /// Hash staged files again when loading them (staging already did).
    pub verify_on_load: bool,
}

impl Default for ModelsConfig {
    fn default() -> Self {
        ModelsConfig {
            dirs: vec![PathBuf::from("/var/lib/fusiond/models")],
            ramdisk: PathBuf::from("/run/fusiond/models"),
            ramdisk_size_mib: 1024,
            start_tier: "fast".into(),
            preload_next: false,
            cache_max_models: 8,
            cache_max_mib: 2048,
            verify_on_load: false,
        }
    }
}

impl ModelsConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.dirs.is_empty() {
            return bad("models.dirs is empty; name the persistent model directory");
        }
        if self.ramdisk_size_mib == 0 || self.cache_max_models == 0 || self.cache_max_mib == 0 {
            return bad("models.ramdisk_size_mib, cache_max_models and cache_max_mib must be > 0");
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TierConfig {
    pub name: String,
    /// Model names from the manifests; one per role (detector, recogniser,
    /// swapper, optional enhancer).
    pub models: Vec<String>,
    /// The float precision the tier's models run in on tract: `fp32`, or
    /// `fp16` for CPUs with FP16 arithmetic (ONNX Runtime refuses `fp16`).
    #[serde(default)]
    pub precision: Precision,
}

/// Which camera the daemon reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// The V4L2 device when it exists, else the sample frames.
    Auto,
    V4l2,
    Sequence,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CameraConfig {
    pub source: SourceKind,
    /// V4L2 device node or a stable /dev/v4l/by-id/... link.
    pub device: PathBuf,
    /// Pixel formats in order of preference (FourCC: MJPG, YUYV, NV12).
    pub formats: Vec<String>,
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    /// Sample frame folders for the sequence source; the first that exists
    /// is used. Relative paths start at the working directory.
    pub samples: Vec<PathBuf>,
    /// Rate the sample frames are played at.
    pub samples_fps: f32,
    /// Reconnect backoff after the camera is lost: first and longest wait.
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    /// A camera that delivers no frame for this long is treated as lost.
    pub stall_timeout_ms: u64,
}

impl Default for CameraConfig {
    fn default() -> Self {
        CameraConfig {
            source: SourceKind::Auto,
            device: PathBuf::from("/dev/video0"),
            formats: vec!["MJPG".into(), "YUYV".into(), "NV12".into()],
            width: 640,
            height: 480,
            fps: 30,
            samples: vec![
                PathBuf::from("/usr/share/fusiond/samples"),
                PathBuf::from("../shared/camera/two_people_pan"),
            ],
            samples_fps: 15.0,
            reconnect_min_ms: 250,
            reconnect_max_ms: 5000,
            stall_timeout_ms: 2000,
        }
    }
}

impl CameraConfig {
    pub fn validate(&self) -> Result<(), String> {
        if let Some(f) = self.formats.iter().find(|f| !matches!(f.as_str(), "MJPG" | "YUYV" | "NV12")) {
            return bad(format!("camera.formats: `{f}` is not one of MJPG, YUYV, NV12"));
        }
        let side = |v: u32| (1..=crate::vision::MAX_SIDE).contains(&v);
        let even = self.width.is_multiple_of(2);
        if self.formats.is_empty() || !side(self.width) || !side(self.height) || !even || self.fps == 0 {
            return bad(format!(
                "camera.formats must not be empty, width and height 1 to {} and width even, fps > 0",
                crate::vision::MAX_SIDE
            ));
        }
        if self.reconnect_min_ms == 0 || self.reconnect_max_ms < self.reconnect_min_ms || self.stall_timeout_ms == 0 {
            return bad("camera: need 0 < reconnect_min_ms <= reconnect_max_ms and stall_timeout_ms > 0");
        }
        if !(self.samples_fps > 0.0 && self.samples_fps <= 240.0) {
            return bad(format!("camera.samples_fps {} must be in (0, 240]", self.samples_fps));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MqttConfig {
    /// Broker host; unset means the box's own broker on 127.0.0.1:port.
    pub host: Option<String>,
    pub port: u16,
    /// Topics hang under `<prefix>/<device_id>`.
    pub prefix: String,
    /// Unset means the hostname.
    pub device_id: Option<String>,
    /// Unset means `fusiond-<device_id>`.
    pub client_id: Option<String>,
    /// Unset sends no credentials.
    pub username: Option<String>,
    /// File holding the password. A bare file name is looked up in
    /// $CREDENTIALS_DIRECTORY (systemd's LoadCredential=) first.
    pub password_file: Option<String>,
    pub tls: bool,
    /// PEM CA bundle for TLS; unset uses the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Mutual TLS: the box's certificate (PEM, then any intermediates).
    pub cert_file: Option<PathBuf>,
    /// Mutual TLS: the certificate's private key (PEM). A bare file name is
    /// looked up in $CREDENTIALS_DIRECTORY first (LoadCredential=, or
    /// LoadCredentialEncrypted= on boxes with a TPM).
    pub key_file: Option<String>,
    pub keep_alive_s: u64,
    /// Longest wait between reconnect attempts (the backoff doubles up to it).
    pub reconnect_max_s: u64,
    /// Bound on queued outgoing messages; frames are dropped first.
    pub queue_messages: usize,
    /// Publish a Home Assistant device-discovery config (retained); false
    /// removes the device from Home Assistant.
    pub discovery: bool,
    /// Home Assistant's discovery prefix (its `status` topic is under it).
    pub discovery_prefix: String,
}

impl Default for MqttConfig {
    fn default() -> Self {
        MqttConfig {
            host: None,
            port: 1883,
            prefix: "fusiond".into(),
            device_id: None,
            client_id: None,
            username: None,
            password_file: None,
            tls: false,
            ca_file: None,
            cert_file: None,
            key_file: None,
            keep_alive_s: 15,
            reconnect_max_s: 5,
            queue_messages: 256,
            discovery: true,
            discovery_prefix: "homeassistant".into(),
        }
    }
}

impl MqttConfig {
    pub fn validate(&self) -> Result<(), String> {
        let empty = [
            ("host", self.host.as_deref()),
            ("device_id", self.device_id.as_deref()),
            ("client_id", self.client_id.as_deref()),
            ("username", self.username.as_deref()),
            ("password_file", self.password_file.as_deref()),
            ("ca_file", self.ca_file.as_deref().and_then(|p| p.to_str())),
            ("cert_file", self.cert_file.as_deref().and_then(|p| p.to_str())),
            ("key_file", self.key_file.as_deref()),
        ];
        if let Some((key, _)) = empty.iter().find(|(_, v)| v.is_some_and(str::is_empty)) {
            return bad(format!("mqtt.{key} is empty; leave the key out for its default"));
        }
        match (&self.cert_file, &self.key_file, self.tls) {
            (Some(_), None, _) => return bad("mqtt.cert_file needs mqtt.key_file, the certificate's private key"),
            (None, Some(_), _) => return bad("mqtt.key_file needs mqtt.cert_file, the certificate it belongs to"),
            (Some(_), Some(_), false) => return bad("mqtt.cert_file and key_file are for TLS: set mqtt.tls = true"),
            _ => {}
        }
        crate::mqtt::Topics::new(&self.prefix, self.device_id.as_deref().unwrap_or("x")).map_err(|e| e.to_string())?;
        crate::mqtt::Topics::new(&self.discovery_prefix, "x")
            .map_err(|_| format!("mqtt.discovery_prefix `{}` is not a topic prefix", self.discovery_prefix))?;
        if self.keep_alive_s < 5 || self.reconnect_max_s == 0 || self.queue_messages < 16 {
            return bad("mqtt: need keep_alive_s >= 5, reconnect_max_s > 0 and queue_messages >= 16");
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    /// Which source faces may be used: `any`, `enrolled` (bank faces,
    /// enrolled by authenticated commands) or `allowlist`.
    pub sources: crate::control::policy::SourcePolicy,
    /// With `sources = "allowlist"`: a file of the SHA-256 digests of the
    /// images allowed, one a line (`sha256sum` output works).
    pub sources_allowlist: Option<PathBuf>,
    /// Run the detector at most this often; faces are tracked in between.
    pub detect_interval_ms: u64,
    /// Swap strength at start, 0..=100.
    pub blend: Blend,
    pub selector: SelectorMode,
    /// Which face `one` picks first, at start.
    pub face_order: FaceOrder,
    /// `one`: another face must have this much more area (0.2 = 20 %)...
    pub selector_margin: f32,
    /// ...for this long before `one` switches to it.
    pub selector_hold_ms: u64,
    /// Temporal smoothing and prediction of each tracked face.
    pub smoothing: SmoothSettings,
    /// Between full detections, find each track again with the detector at
    /// this input size on a crop around it; 0 predicts only. Needs a
    /// resizable detector.
    pub refine_size: u32,
    /// A face turned further than this many degrees of yaw (estimated from
    /// its landmarks) has its swap faded out over 150 ms instead of pasted
    /// broken, and faded back in when it turns back; 90 never fades.
    pub max_yaw_deg: f32,
    /// Run a resizable detector at the camera's aspect, not letterboxed
    /// into its square input ([`ModelEntry::fitted`](crate::manifest::ModelEntry::fitted)).
    pub fit_detector: bool,
    /// `reference`: largest face distance ((1 - cos)/2) that is still the
    /// person, at start.
    pub reference_distance: f32,
    /// The paste's box mask at start: blur (0..=1, a fraction of half the
    /// crop) and padding per side in percent (top, right, bottom, left).
    pub mask_blur: f32,
    pub mask_padding: [f32; 4],
    /// Colour transfer of the swapped face onto the scene, at start.
    pub color_transfer: ColorTransfer,
    /// Keep the person's own mouth at start (needs a landmarker in the tier).
    pub mouth_mask: bool,
    /// The kept region: this much larger than the lip line, feathered by this
    /// fraction of the mouth's width.
    pub mouth_mask_grow: f32,
    pub mouth_mask_feather: f32,
    /// Source identity at start: an image path or a face bank name; unset
    /// means none (frames are analysed, not swapped, until one is set).
    pub source: Option<String>,
    /// Where the face bank (face_bank.safetensors) is kept.
    pub state_dir: PathBuf,
    /// Source embeddings cached by image hash.
    pub source_cache: usize,
    /// Largest source image accepted over MQTT, in bytes and in pixels.
    pub max_source_bytes: usize,
    pub max_source_pixels: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            detect_interval_ms: 80,
            blend: Blend::FULL,
            selector: SelectorMode::One,
            face_order: FaceOrder::LargeSmall,
            selector_margin: 0.2,
            selector_hold_ms: 1000,
            smoothing: SmoothSettings::default(),
            refine_size: 224,
            max_yaw_deg: 60.0,
            fit_detector: true,
            reference_distance: 0.3,
            mask_blur: 0.3,
            mask_padding: [0.0; 4],
            color_transfer: ColorTransfer::None,
            mouth_mask: false,
            mouth_mask_grow: 0.15,
            mouth_mask_feather: 0.1,
            source: None,
            state_dir: PathBuf::from("/var/lib/fusiond/state"),
            sources: Default::default(),
            sources_allowlist: None,
            source_cache: 16,
            max_source_bytes: 8 * 1024 * 1024,
            max_source_pixels: 24_000_000,
        }
    }
}

impl PipelineConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.source.as_deref() == Some("") {
            return bad("pipeline.source is empty; leave the key out to start without a source");
        }
        if self.sources == crate::control::policy::SourcePolicy::Allowlist && self.sources_allowlist.is_none() {
            return bad("pipeline.sources = \"allowlist\" needs pipeline.sources_allowlist, a file of SHA-256 digests");
        }
        if self.source_cache == 0 || self.max_source_bytes == 0 || self.max_source_pixels == 0 {
            return bad("pipeline: source_cache, max_source_bytes and max_source_pixels must be > 0");
        }
        if !(MaskSettings { blur: self.mask_blur, padding: self.mask_padding }).is_valid() {
            return bad("pipeline: mask_blur must be within 0..=1 and each mask_padding within 0..=100");
        }
        if !(0.0..=90.0).contains(&self.max_yaw_deg) {
            return bad(format!("pipeline.max_yaw_deg {} must be 0 to 90 (90 never fades)", self.max_yaw_deg));
        }
        if self.refine_size != 0 && !(32..=640).contains(&self.refine_size) {
            return bad(format!("pipeline.refine_size {} must be 0 (off) or 32 to 640", self.refine_size));
        }
        let mouth = MouthSettings { enabled: true, grow: self.mouth_mask_grow, feather: self.mouth_mask_feather };
        if !mouth.is_valid() {
            return bad("pipeline: mouth_mask_grow must be within 0..=2 and mouth_mask_feather within 0..=1");
        }
        if !(0.0..=1.0).contains(&self.reference_distance) {
            return bad(format!("pipeline.reference_distance {} must be within 0..=1", self.reference_distance));
        }
        if !(self.selector_margin.is_finite() && (0.0..=10.0).contains(&self.selector_margin)) {
            return bad(format!("pipeline.selector_margin {} must be within 0..=10", self.selector_margin));
        }
        self.smoothing.validate()
    }
}

/// Switches for tests; never set on a production box.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DebugConfig {
    /// Accept the `stall` command, which hangs the processing loop so the
    /// systemd watchdog fires, `panic`, which panics in it so the journal's
    /// panic record can be checked, and `unplug`, which fails the camera for
    /// a while (the soak's camera fault).
    pub stall_command: bool,
}
