//! What each fuzz target runs: the daemon's own entry point for that input,
//! with the settings the daemon derives from its default config. A target
//! passes when nothing panics, overflows or reads out of bounds; the
//! results are not checked (the unit tests do that), only reached.

use fusiond::capture::buffer::{to_rgb, BufferFormat};
use fusiond::config::Config;
use fusiond::control::{refusal, Control, Effect, Inbox, Settings};
use fusiond::daemon::bank::FaceBank;
use fusiond::daemon::DaemonSettings;
use fusiond::face::Embedding;
use fusiond::http::guard::Guard;
use fusiond::http::wire::{Conn, Limits};
use fusiond::http::{respond, Access, HttpState};
use fusiond::manifest::Manifest;
use fusiond::mqtt::command::decode_source_image;
use fusiond::mqtt::command::MAX_SOURCE_NAMES;
use fusiond::mqtt::topics::FEATURES;
use fusiond::mqtt::{parse, Command, CommandLimits, PayloadCaps, SourceCommand};
use fusiond::store::emap::parse_emap;
use fusiond::vision::RgbImage;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Fuzzing decodes images of at most this many pixels, so that an
/// iteration stays fast; the daemon's default is 24 MP, checked the same way.
const MAX_PIXELS: u64 = 1 << 20;

fn daemon_settings() -> &'static DaemonSettings {
    static SETTINGS: OnceLock<DaemonSettings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let config = Config::parse("", Path::new("fuzz.toml")).expect("the default config parses");
        DaemonSettings::from_config(&config).expect("the default config gives settings")
    })
}

fn limits() -> CommandLimits {
    CommandLimits { max_image_pixels: MAX_PIXELS, ..daemon_settings().limits.clone() }
}

/// `<feature byte><payload>`: a command through [`Control::handle`], then
/// what the control loop does with its effects, as far as it runs without
/// models ([`act`]). The byte picks one of the features, or past them takes
/// the payload's first line as the feature name. A source photo's pixels
/// are left to the `source_image` target: decoding one under the sanitizer
/// takes tens of milliseconds, which held this target to 19 runs a second.
pub fn command(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else { return };
    let (feature, payload) = match FEATURES.get(pick as usize) {
        Some(f) => (f.to_string(), rest),
        None => {
            let at = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            (String::from_utf8_lossy(&rest[..at]).into_owned(), rest.get(at + 1..).unwrap_or_default())
        }
    };
    let mut control = Control::new(daemon_settings().control.clone(), limits());
    let effects = control.handle(&feature, payload);
    let _ = refusal(&effects);
    let _ = control.retained();
    act(&effects, control.settings());
}

/// The face bank the `command` target acts on, in a temporary folder that
/// each run empties first (tests/fuzz.sh runs one target at a time, and
/// libFuzzer exits without dropping it).
fn acting_bank() -> &'static Mutex<FaceBank> {
    static BANK: OnceLock<Mutex<FaceBank>> = OnceLock::new();
    BANK.get_or_init(|| {
        let dir = std::env::temp_dir().join("fusiond-fuzz-bank");
        let _ = std::fs::remove_dir_all(&dir);
        Mutex::new(FaceBank::open(&dir).expect("a face bank in the temporary folder"))
    })
}

/// Acts on `effects` as the control loop does, without models: a named
/// photo goes into the bank (under a fixed identity, as no recogniser runs
/// here), names are looked up or removed, a mapping's names are looked up,
/// and a tier switch must name a configured tier. Then the invariants the
/// validator promises are checked: a setting out of its range, a photo
/// over the pixel limit or a tier the config lacks is a bug.
fn act(effects: &[Effect], settings: &Settings) {
    let limits = limits();
    let mut bank = acting_bank().lock().unwrap_or_else(|p| p.into_inner());
    for effect in effects {
        match effect {
            Effect::SetSource(SourceCommand::Image { name, width, height, .. }) => {
                let pixels = u64::from(*width) * u64::from(*height);
                assert!(pixels <= limits.max_image_pixels, "a {width}x{height} photo passed the pixel limit");
                if let Some(name) = name {
                    let _ = bank.insert(name, &identity());
                }
            }
            Effect::SetSource(SourceCommand::Named(name)) | Effect::Forget(name) => {
                let _ = bank.get(name);
                if matches!(effect, Effect::Forget(_)) {
                    let _ = bank.remove(name);
                }
            }
            Effect::SetSource(SourceCommand::Names(names)) => {
                assert!((2..=MAX_SOURCE_NAMES).contains(&names.len()), "{} names", names.len());
                names.iter().for_each(|n| drop(bank.get(n)));
            }
            Effect::SetMap(pairs) => pairs.iter().for_each(|(a, b)| drop((bank.get(a), bank.get(b)))),
            Effect::SwitchTier(tier) => assert!(limits.tiers.contains(tier), "a switch to unknown tier `{tier}`"),
            _ => {}
        }
    }
    let blend = settings.blend.percent();
    assert!((0.0..=100.0).contains(&blend), "blend {blend}");
    assert!((0.0..=limits.max_frame_rate).contains(&settings.frame_rate), "frame_rate {}", settings.frame_rate);
    assert!((0.0..=1.0).contains(&settings.mask.blur), "mask_blur {}", settings.mask.blur);
    assert!(settings.mask.padding.iter().all(|p| (0.0..=100.0).contains(p)), "{:?}", settings.mask.padding);
    assert!((0.0..=1.0).contains(&settings.reference_distance), "reference {}", settings.reference_distance);
    assert!(bank.names().len() <= fusiond::daemon::bank::MAX_IDENTITIES);
}

/// The one identity the `command` target saves: a unit 512-d vector.
fn identity() -> Embedding {
    Embedding::from_raw((0..512).map(|i| if i == 0 { 1.0 } else { 0.0 }).collect())
}

/// A main config and conf.d fragments, separated by `\n%%\n` lines.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let layers: Vec<(PathBuf, String)> = text
        .split("\n%%\n")
        .enumerate()
        .map(|(i, t)| (PathBuf::from(format!("conf.d/{i:02}.toml")), t.to_string()))
        .collect();
    if let Ok(config) = Config::layered(&layers, Path::new("fusiond.toml")) {
        let _ = DaemonSettings::from_config(&config);
        let _ = config.changed_keys(&Config::parse("", Path::new("fusiond.toml")).expect("defaults"));
    }
}

pub fn manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(m) = Manifest::parse(text, Path::new("manifest.toml"), Path::new("/models")) {
        for e in &m.entries {
            let _ = e.input_shapes();
            let _ = e.resized([640, 640]);
        }
    }
}

/// The same bytes as a face bank and as an emap side file.
pub fn bank(data: &[u8]) {
    if let Ok(bank) = FaceBank::parse(PathBuf::from("face_bank.safetensors"), data) {
        for name in bank.names() {
            let _ = bank.get(&name);
        }
    }
    let _ = parse_emap(data);
}

/// A `source` payload (image bytes, or `<name>\n<image bytes>`), checked
/// at the daemon's own limit (24 MP by default) and then, when the header
/// claims at most [`MAX_PIXELS`] (so that an iteration stays fast), decoded
/// as the control loop does. A photo whose decoded pixels outnumber what
/// the check read from its header would get past the bomb guard: that is a
/// bug, and so is a header over the limit that the check let through.
pub fn source_image(data: &[u8]) {
    let daemon = &daemon_settings().limits;
    let Ok(Command::Source(SourceCommand::Image { bytes, width, height, .. })) = parse("source", data, daemon) else {
        return;
    };
    let claimed = u64::from(width) * u64::from(height);
    assert!(
        claimed <= daemon.max_image_pixels,
        "a {width}x{height} photo passed the {} pixel limit",
        daemon.max_image_pixels
    );
    if claimed <= MAX_PIXELS {
        if let Ok(img) = decode_source_image(&bytes) {
            let decoded = u64::from(img.width()) * u64::from(img.height());
            assert!(decoded <= claimed, "checked as {width}x{height}, decoded as {}x{}", img.width(), img.height());
        }
    }
}

/// `<format><width u16><height u16><stride u24><buffer>`: one V4L2 buffer
/// with a hostile size, stride and byte count. Sides are kept to 2047 so an
/// iteration stays fast; the 8192 bound is a unit test.
pub fn frame(data: &[u8]) {
    let Some((head, buffer)) = data.split_at_checked(8) else { return };
    let fourcc = [*b"YUYV", *b"NV12", *b"MJPG"][head[0] as usize % 3];
    let side = |a: u8, b: u8| u32::from(u16::from_le_bytes([a, b])) % 2048;
    let stride = usize::from(head[5]) | usize::from(head[6]) << 8 | usize::from(head[7]) << 16;
    let format = BufferFormat { fourcc, width: side(head[1], head[2]), height: side(head[3], head[4]), stride };
    let (mut packed, mut image) = (Vec::new(), RgbImage::new(1, 1));
    let _ = to_rgb(buffer, &format, &mut packed, &mut image);
}

/// A client's bytes, read `chunk` at a time, answered into `written`.
struct Scripted<'a> {
    input: &'a [u8],
    chunk: usize,
    written: Vec<u8>,
}

impl Read for Scripted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.chunk.min(buf.len()).min(self.input.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input = &self.input[n..];
        Ok(n)
    }
}

impl Write for Scripted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Conn for Scripted<'_> {
    fn set_timeout(&mut self, _: Duration) -> io::Result<()> {
        Ok(())
    }
}

/// The HTTP side as the daemon wires it: the state, the token, and a
/// control loop behind the one inbox that answers each command.
fn http_state() -> &'static (Arc<HttpState>, Access) {
    static STATE: OnceLock<(Arc<HttpState>, Access)> = OnceLock::new();
    STATE.get_or_init(|| {
        let settings = daemon_settings();
        let state = Arc::new(HttpState::new(5.0));
        let inbox = Arc::new(Inbox::new(64, Arc::new(PayloadCaps::new(1 << 20)), Box::new(|_| {})));
        state.set_commands(inbox.clone());
        // Streams and snapshots answer at once: no frame will come.
        state.hub.close();
        let mut control = Control::new(settings.control.clone(), limits());
        std::thread::spawn(move || loop {
            if let Some(c) = inbox.recv_timeout(Duration::from_secs(1)) {
                // A photo's pixels are the source_image target's.
                let effects = control.handle(&c.feature, &c.payload);
                if let Some(reply) = c.reply {
                    let _ = reply.try_send(refusal(&effects).map_or(Ok(()), Err));
                }
            }
        });
        let guard = Guard::new([127, 0, 0, 1].into(), "fuzz", &[], &[]);
        (state, Access::new(Some("fuzz-token-0123456789".into()), guard))
    })
}

/// `<read size><bytes from the client>`: one connection, as the server
/// serves it (`Authorization: Bearer fuzz-token-0123456789` is accepted).
pub fn http(data: &[u8]) {
    let Some((&chunk, input)) = data.split_first() else { return };
    let (state, access) = http_state();
    let mut conn = Scripted { input, chunk: usize::from(chunk).max(1), written: Vec::new() };
    let _ = respond(&mut conn, &Limits::new(), state, access);
}
