//! Parsing and validating commands. Every payload is hostile until proven
//! otherwise: a bad command becomes a [`CommandError`] (answered on
//! `<base>/error`) and changes nothing; nothing here panics.

use crate::face::{Blend, ColorTransfer, FaceOrder, SelectorMode};
use serde::Serialize;

/// Decodes the pixels of a source image that [`parse`] accepted (format,
/// byte count and header size already checked against the limits).
pub fn decode_source_image(bytes: &[u8]) -> Result<crate::vision::RgbImage, String> {
    let img = image::load_from_memory(bytes).map_err(|e| format!("the image cannot be decoded: {e}"))?;
    Ok(img.to_rgb8())
}

/// Where to take the source identity from.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceCommand {
    /// A JPEG or PNG photo, checked to be decodable within the limits; with
    /// a name it is also saved in the face bank under that name.
    Image { name: Option<String>, bytes: Vec<u8>, width: u32, height: u32 },
    /// The name of an identity in the face bank.
    Named(String),
    /// Several face bank names (`alice,alice2`): their identities averaged,
    /// as FaceFusion averages several source images.
    Names(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Enabled(bool),
    Source(SourceCommand),
    Quality(String),
    Blend(Blend),
    Selector(SelectorMode),
    /// Frames per second published on `frame`; 0 switches frames off.
    FrameRate(f32),
    /// Which face `one` picks first.
    FaceOrder(FaceOrder),
    ColorTransfer(ColorTransfer),
    /// Keep the person's own mouth under the swapped face.
    MouthMask(bool),
    /// Per-person mapping, `from` face bank name → `to` face bank name; the
    /// whole list (empty clears it).
    Map(Vec<(String, String)>),
    /// Box-mask blur, 0..=1 (FaceFusion's face_mask_blur).
    MaskBlur(f32),
    /// Box-mask padding in percent: top, right, bottom, left.
    MaskPadding([f32; 4]),
    /// `reference`: largest face distance, 0..=1.
    ReferenceDistance(f32),
    /// Remove an identity from the face bank.
    Forget(String),
    Snapshot,
    Reload,
    /// Stall the processing loop (tests of the systemd watchdog only).
    Stall,
    /// Panic in the processing loop (tests of the journald panic record).
    Panic,
    /// The camera fails as if unplugged for this long (fault tests: the
    /// soak); it is then opened again as after a real unplug.
    Unplug(std::time::Duration),
}

/// Why a command was refused, as published on `<base>/error`.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[error("command `{command}` refused: {reason}")]
pub struct CommandError {
    pub command: String,
    pub reason: String,
}

/// Bounds that keep hostile payloads harmless.
#[derive(Debug, Clone)]
pub struct CommandLimits {
    /// Largest source image payload (bytes).
    pub max_image_bytes: usize,
    /// Largest decoded source image (pixels): the decompression-bomb guard.
    pub max_image_pixels: u64,
    /// Tier names `quality` accepts.
    pub tiers: Vec<String>,
    /// Highest `frame_rate`.
    pub max_frame_rate: f32,
    /// Frames are published (`output.frames`); without them `frame_rate`
    /// means nothing and is refused.
    pub frames: bool,
    /// Accept `stall`, `panic` and `unplug` (`debug.stall_command`, for
    /// watchdog, journald and fault tests).
    pub allow_stall: bool,
}

impl Default for CommandLimits {
    fn default() -> Self {
        CommandLimits {
            max_image_bytes: 8 * 1024 * 1024,
            max_image_pixels: 24_000_000,
            tiers: vec!["fast".into()],
            max_frame_rate: 30.0,
            frames: true,
            allow_stall: false,
        }
    }
}

fn text<'p>(payload: &'p [u8], err: &dyn Fn(String) -> CommandError) -> Result<&'p str, CommandError> {
    if payload.len() > super::PayloadCaps::TEXT {
        return Err(err(format!("a {}-byte payload is too long for this command", payload.len())));
    }
    std::str::from_utf8(payload).map(str::trim).map_err(|_| err("the payload is not UTF-8 text".into()))
}

fn number(s: &str, lo: f32, hi: f32, err: &dyn Fn(String) -> CommandError) -> Result<f32, CommandError> {
    let v: f32 = s.parse().map_err(|_| err(format!("`{s}` is not a number")))?;
    if !v.is_finite() || v < lo || v > hi {
        return Err(err(format!("{v} is outside {lo}..={hi}")));
    }
    Ok(v)
}

fn on_off(s: &str, err: &dyn Fn(String) -> CommandError) -> Result<bool, CommandError> {
    match s.to_ascii_uppercase().as_str() {
        "ON" => Ok(true),
        "OFF" => Ok(false),
        other => Err(err(format!("`{other}` is not ON or OFF"))),
    }
}

/// `top,right,bottom,left` percentages (one number sets all four).
fn padding(s: &str, err: &dyn Fn(String) -> CommandError) -> Result<[f32; 4], CommandError> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let values = parts.iter().map(|p| number(p, 0.0, 100.0, err)).collect::<Result<Vec<f32>, _>>()?;
    match values[..] {
        [v] => Ok([v; 4]),
        [t, r, b, l] => Ok([t, r, b, l]),
        _ => Err(err(format!("`{s}` is not one percentage or four (top,right,bottom,left)"))),
    }
}

/// Checks an image payload without decoding its pixels: the format by magic
/// bytes, the size, and the dimensions from the header.
fn image(
    payload: &[u8],
    limits: &CommandLimits,
    err: &dyn Fn(String) -> CommandError,
) -> Result<(u32, u32), CommandError> {
    if payload.len() > limits.max_image_bytes {
        return Err(err(format!("the image is {} bytes; the limit is {}", payload.len(), limits.max_image_bytes)));
    }
    let format = image::guess_format(payload).map_err(|_| err("the payload is not a JPEG or PNG image".into()))?;
    if !matches!(format, image::ImageFormat::Jpeg | image::ImageFormat::Png) {
        return Err(err(format!("{format:?} images are not accepted; send JPEG or PNG")));
    }
    let too_many = |w: u32, h: u32| {
        (w as u64 * h as u64 > limits.max_image_pixels)
            .then(|| err(format!("the image claims {w}x{h} pixels; the limit is {} pixels", limits.max_image_pixels)))
    };
    // PNG's size is read from the IHDR bytes before any decoder sees it: the
    // png crate's own limits depend on the pointer width (a 32-bit box
    // rejects a huge header as unreadable), and the refusal should not.
    if let Some(e) = png_header_size(payload).and_then(|(w, h)| too_many(w, h)) {
        return Err(e);
    }
    let reader = image::ImageReader::with_format(std::io::Cursor::new(payload), format);
    let (w, h) = reader.into_dimensions().map_err(|e| err(format!("the image cannot be read: {e}")))?;
    match too_many(w, h) {
        Some(e) => Err(e),
        None => Ok((w, h)),
    }
}

/// Width and height from a PNG's IHDR chunk, which must come first.
fn png_header_size(p: &[u8]) -> Option<(u32, u32)> {
    if p.get(12..16)? != b"IHDR" {
        return None;
    }
    let be = |at: usize| p.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    Some((be(16)?, be(20)?))
}

/// `alice=bob,carol=dave`: up to [`MAX_SOURCE_NAMES`] pairs of face bank
/// names; empty or `none` clears the mapping.
fn map(s: &str, err: &dyn Fn(String) -> CommandError) -> Result<Vec<(String, String)>, CommandError> {
    if s.is_empty() || s.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let pairs: Vec<&str> = s.split(',').map(str::trim).collect();
    if pairs.len() > MAX_SOURCE_NAMES {
        return Err(err(format!("at most {MAX_SOURCE_NAMES} mappings")));
    }
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((a, b)) if identity_name(a.trim()) && identity_name(b.trim()) => {
                Ok((a.trim().to_string(), b.trim().to_string()))
            }
            _ => Err(err(format!("`{p}` is not from=to with face bank names ([A-Za-z0-9_.-], at most 64)"))),
        })
        .collect()
}

/// Most identities a `source` command may average.
pub const MAX_SOURCE_NAMES: usize = 16;

/// `name`, or `name,name,...` (2 to [`MAX_SOURCE_NAMES`] names).
fn named_source(payload: &[u8]) -> Option<SourceCommand> {
    let text = std::str::from_utf8(payload).ok()?.trim();
    let names: Vec<&str> = text.split(',').map(str::trim).collect();
    if names.len() > MAX_SOURCE_NAMES || !names.iter().all(|n| identity_name(n)) {
        return None;
    }
    Some(match names[..] {
        [one] => SourceCommand::Named(one.into()),
        _ => SourceCommand::Names(names.iter().map(|n| n.to_string()).collect()),
    })
}

/// A face bank name: 1 to 64 of `[A-Za-z0-9_.-]` (no `/`, so it is safe
/// in a file name).
pub fn identity_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// A `source` payload: image bytes, `<name>\n<image bytes>`, or saved names.
fn source(
    payload: &[u8],
    limits: &CommandLimits,
    err: &dyn Fn(String) -> CommandError,
) -> Result<SourceCommand, CommandError> {
    // `<name>\n<image bytes>` names the image; the name line is short
    // and the image starts with its magic bytes.
    let (name, bytes) = match payload.iter().take(66).position(|&b| b == b'\n') {
        Some(i) if image::guess_format(&payload[i + 1..]).is_ok() => {
            let name = std::str::from_utf8(&payload[..i]).ok().map(str::trim).filter(|n| identity_name(n));
            let name = name.ok_or_else(|| err("the name line must be [A-Za-z0-9_.-], at most 64".into()))?;
            (Some(name.to_string()), &payload[i + 1..])
        }
        _ => (None, payload),
    };
    if image::guess_format(bytes).is_ok() {
        let (width, height) = image(bytes, limits, &err)?;
        return Ok(SourceCommand::Image { name, bytes: bytes.to_vec(), width, height });
    }
    named_source(payload).ok_or_else(|| {
        err(format!(
            "send JPEG or PNG bytes, or the name of a saved identity ([A-Za-z0-9_.-], at most 64), or up \
             to {MAX_SOURCE_NAMES} names separated by commas"
        ))
    })
}

/// Parses the payload of `<base>/<feature>/set`.
pub fn parse(feature: &str, payload: &[u8], limits: &CommandLimits) -> Result<Command, CommandError> {
    let err = |reason: String| CommandError { command: feature.chars().take(64).collect(), reason };
    match feature {
        "enabled" => on_off(text(payload, &err)?, &err).map(Command::Enabled),
        "mouth_mask" => on_off(text(payload, &err)?, &err).map(Command::MouthMask),
        "source" => source(payload, limits, &err).map(Command::Source),
        "quality" => {
            let tier = text(payload, &err)?;
            match limits.tiers.iter().any(|t| t == tier) {
                true => Ok(Command::Quality(tier.into())),
                false => Err(err(format!("`{tier}` is not a tier; known: {}", limits.tiers.join(", ")))),
            }
        }
        "blend" => {
            let percent = number(text(payload, &err)?, 0.0, 100.0, &err)?;
            Blend::new(percent).map(Command::Blend).ok_or_else(|| err(format!("{percent} is outside 0..=100")))
        }
        "selector" => {
            let s = text(payload, &err)?;
            SelectorMode::parse(s)
                .map(Command::Selector)
                .ok_or_else(|| err(format!("`{s}` is not one, many or reference")))
        }
        "frame_rate" if !limits.frames => Err(err(
            "output.frames is off, so no frames are published: set output.frames = true to use frame_rate".into(),
        )),
        "frame_rate" => Ok(Command::FrameRate(number(text(payload, &err)?, 0.0, limits.max_frame_rate, &err)?)),
        "face_order" => {
            let s = text(payload, &err)?;
            let known = || FaceOrder::ALL.map(FaceOrder::as_str).join(", ");
            FaceOrder::parse(s).map(Command::FaceOrder).ok_or_else(|| err(format!("`{s}` is not one of {}", known())))
        }
        "color_transfer" => {
            let s = text(payload, &err)?;
            ColorTransfer::parse(s).map(Command::ColorTransfer).ok_or_else(|| err(format!("`{s}` is not none or rct")))
        }
        "map" => map(text(payload, &err)?, &err).map(Command::Map),
        "mask_blur" => Ok(Command::MaskBlur(number(text(payload, &err)?, 0.0, 1.0, &err)?)),
        "mask_padding" => padding(text(payload, &err)?, &err).map(Command::MaskPadding),
        "reference_distance" => Ok(Command::ReferenceDistance(number(text(payload, &err)?, 0.0, 1.0, &err)?)),
        "forget" => {
            let name = text(payload, &err)?;
            match identity_name(name) {
                true => Ok(Command::Forget(name.to_string())),
                false => Err(err(format!("`{name}` is not a face bank name ([A-Za-z0-9_.-], at most 64)"))),
            }
        }
        "snapshot" => Ok(Command::Snapshot),
        "reload" => Ok(Command::Reload),
        "stall" if limits.allow_stall => Ok(Command::Stall),
        "panic" if limits.allow_stall => Ok(Command::Panic),
        "unplug" if limits.allow_stall => {
            let seconds = number(text(payload, &err)?, 0.1, 600.0, &err)?;
            Ok(Command::Unplug(std::time::Duration::from_secs_f32(seconds)))
        }
        _ => Err(err(format!("unknown command; known: {}", super::topics::FEATURES.join(", ")))),
    }
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
