//! Parsing and validating commands. Every payload is hostile until proven
//! otherwise: a bad command becomes a [`CommandError`] (answered on
//! `<base>/error`) and changes nothing; nothing here panics.

use crate::face::{Blend, ColorTransfer, FaceOrder, SelectorMode};
use serde::Serialize;

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
    Snapshot,
    Reload,
    /// Stall the processing loop (tests of the systemd watchdog only).
    Stall,
    /// Panic in the processing loop (tests of the journald panic record).
    Panic,
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
    /// Accept `stall` and `panic` (`debug.stall_command`, for watchdog and
    /// journald tests).
    pub allow_stall: bool,
}

impl Default for CommandLimits {
    fn default() -> Self {
        CommandLimits {
            max_image_bytes: 8 * 1024 * 1024,
            max_image_pixels: 24_000_000,
            tiers: vec!["fast".into()],
            max_frame_rate: 30.0,
            allow_stall: false,
        }
    }
}

fn text<'p>(payload: &'p [u8], err: &dyn Fn(String) -> CommandError) -> Result<&'p str, CommandError> {
    if payload.len() > 256 {
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

fn identity_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Parses the payload of `<base>/<feature>/set`.
pub fn parse(feature: &str, payload: &[u8], limits: &CommandLimits) -> Result<Command, CommandError> {
    let err = |reason: String| CommandError { command: feature.chars().take(64).collect(), reason };
    match feature {
        "enabled" => on_off(text(payload, &err)?, &err).map(Command::Enabled),
        "mouth_mask" => on_off(text(payload, &err)?, &err).map(Command::MouthMask),
        "source" => {
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
                return Ok(Command::Source(SourceCommand::Image { name, bytes: bytes.to_vec(), width, height }));
            }
            named_source(payload).map(Command::Source).ok_or_else(|| {
                err(format!(
                    "send JPEG or PNG bytes, or the name of a saved identity ([A-Za-z0-9_.-], at most 64), or up \
                     to {MAX_SOURCE_NAMES} names separated by commas"
                ))
            })
        }
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
        "snapshot" => Ok(Command::Snapshot),
        "reload" => Ok(Command::Reload),
        "stall" if limits.allow_stall => Ok(Command::Stall),
        "panic" if limits.allow_stall => Ok(Command::Panic),
        _ => Err(err(format!("unknown command; known: {}", super::topics::FEATURES.join(", ")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(feature: &str, payload: &[u8]) -> Command {
        parse(feature, payload, &CommandLimits::default()).unwrap()
    }

    fn refused(feature: &str, payload: &[u8]) -> String {
        parse(feature, payload, &CommandLimits::default()).unwrap_err().reason
    }

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut out = Vec::new();
        image::RgbImage::new(w, h).write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png).unwrap();
        out
    }

    /// A PNG whose header claims `w`×`h` with no pixel data behind it.
    fn png_bomb(w: u32, h: u32) -> Vec<u8> {
        let mut real = png(1, 1);
        real[16..20].copy_from_slice(&w.to_be_bytes());
        real[20..24].copy_from_slice(&h.to_be_bytes());
        // Fix the IHDR CRC so the header itself is valid.
        let crc = crc32(&real[12..29]);
        real[29..33].copy_from_slice(&crc.to_be_bytes());
        real
    }

    fn crc32(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    #[test]
    fn valid_commands_parse() {
        assert_eq!(ok("enabled", b"ON"), Command::Enabled(true));
        assert_eq!(ok("enabled", b" off\n"), Command::Enabled(false));
        assert_eq!(ok("quality", b"fast"), Command::Quality("fast".into()));
        assert_eq!(ok("blend", b"80"), Command::Blend(Blend::new(80.0).unwrap()));
        assert_eq!(ok("selector", b"many"), Command::Selector(SelectorMode::Many));
        assert_eq!(ok("frame_rate", b"0"), Command::FrameRate(0.0));
        assert_eq!(ok("mask_blur", b"0.5"), Command::MaskBlur(0.5));
        assert_eq!(ok("mouth_mask", b"on"), Command::MouthMask(true));
        assert_eq!(
            ok("map", b"alice=bob, carol=dave"),
            Command::Map(vec![("alice".into(), "bob".into()), ("carol".into(), "dave".into())])
        );
        assert_eq!(ok("map", b"none"), Command::Map(vec![]));
        assert_eq!(ok("color_transfer", b"rct"), Command::ColorTransfer(ColorTransfer::Rct));
        assert_eq!(ok("face_order", b"left-right"), Command::FaceOrder(FaceOrder::LeftRight));
        assert_eq!(ok("mask_padding", b"10"), Command::MaskPadding([10.0; 4]));
        assert_eq!(ok("mask_padding", b"1, 2,3 ,4"), Command::MaskPadding([1.0, 2.0, 3.0, 4.0]));
        assert_eq!(ok("reference_distance", b"0.25"), Command::ReferenceDistance(0.25));
        assert_eq!(ok("snapshot", b""), Command::Snapshot);
        assert_eq!(ok("reload", b"PRESS"), Command::Reload);
        assert_eq!(ok("source", b"alice"), Command::Source(SourceCommand::Named("alice".into())));
        assert_eq!(
            ok("source", b"alice, bob"),
            Command::Source(SourceCommand::Names(vec!["alice".into(), "bob".into()]))
        );
        assert!(matches!(
            ok("source", &png(8, 6)),
            Command::Source(SourceCommand::Image { name: None, width: 8, height: 6, .. })
        ));
        let named = [&b"alice\n"[..], &png(4, 4)].concat();
        assert!(
            matches!(ok("source", &named), Command::Source(SourceCommand::Image { name: Some(n), .. }) if n == "alice")
        );
        let bad_name = [&b"al ice!\n"[..], &png(4, 4)].concat();
        assert!(refused("source", &bad_name).contains("name line"));
    }

    #[test]
    fn wrong_types_and_out_of_range_values_are_refused() {
        assert!(refused("enabled", b"maybe").contains("ON or OFF"));
        assert!(refused("blend", b"101").contains("outside"));
        assert!(refused("blend", b"NaN").contains("outside"));
        assert!(refused("blend", b"lots").contains("not a number"));
        assert!(refused("frame_rate", b"-1").contains("outside"));
        assert!(refused("quality", b"turbo").contains("known: fast"));
        assert!(refused("selector", b"all").contains("one, many or reference"));
        assert!(refused("enabled", &[0xff, 0xfe]).contains("UTF-8"));
        assert!(refused("blend", &[b'1'; 1000]).contains("too long"));
        assert!(refused("launch", b"1").contains("unknown command"));
        // The debug commands exist only with debug.stall_command.
        assert!(refused("stall", b"now").contains("unknown command") && refused("panic", b"now").contains("unknown"));
        let debug = CommandLimits { allow_stall: true, ..CommandLimits::default() };
        assert_eq!(parse("panic", b"now", &debug), Ok(Command::Panic));
        assert!(refused("source", b"alice,,bob").contains("commas"));
        assert!(refused("source", "a,".repeat(17).trim_end_matches(',').as_bytes()).contains("up to 16"));
        assert!(refused("mask_blur", b"2").contains("outside"));
        assert!(refused("mouth_mask", b"maybe").contains("ON or OFF"));
        assert!(refused("map", b"alice").contains("from=to"));
        assert!(refused("map", b"alice=b ob").contains("from=to"));
        assert!(refused("color_transfer", b"lut").contains("none or rct"));
        assert!(refused("face_order", b"tallest").contains("left-right"));
        assert!(refused("mask_padding", b"1,2,3").contains("four"));
        assert!(refused("mask_padding", b"1,2,x,4").contains("not a number"));
        assert!(refused("mask_padding", b"101").contains("outside"));
        assert!(refused("reference_distance", b"NaN").contains("outside"));
    }

    #[test]
    fn hostile_images_are_refused_without_decoding() {
        assert!(refused("source", b"\x89PNG\r\n\x1a\n garbage").contains("cannot be read"));
        assert!(refused("source", &png_bomb(100_000, 100_000)).contains("claims 100000x100000"));
        assert!(refused("source", b"GIF89a....").contains("not accepted"));
        assert!(refused("source", b"../../etc/passwd").contains("JPEG or PNG bytes"));
        let big = CommandLimits { max_image_bytes: 100, ..CommandLimits::default() };
        let err = parse("source", &png(64, 64), &big).unwrap_err();
        assert!(err.reason.contains("limit is 100"), "{err}");
        assert_eq!(err.command, "source");
    }

    #[test]
    fn refusals_serialise_to_the_error_topic_json() {
        let e = parse("blend", b"200", &CommandLimits::default()).unwrap_err();
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["command"], "blend");
        assert!(json["reason"].as_str().unwrap().contains("200"));
    }
}
