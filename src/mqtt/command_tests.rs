use super::*;
use std::time::Duration;

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
    assert_eq!(ok("source", b"alice, bob"), Command::Source(SourceCommand::Names(vec!["alice".into(), "bob".into()])));
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
fn forget_takes_one_face_bank_name() {
    assert_eq!(ok("forget", b" alice \n"), Command::Forget("alice".into()));
    for bad in [&b"../alice"[..], b"a,b", b"", b"\xff"] {
        assert!(!refused("forget", bad).is_empty(), "{bad:?}");
    }
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
    assert_eq!(parse("unplug", b"2.5", &debug), Ok(Command::Unplug(Duration::from_millis(2500))));
    assert!(refused("unplug", b"2").contains("unknown command"));
    for bad in ["0", "601", "-1", "inf", "NaN", "soon"] {
        assert!(parse("unplug", bad.as_bytes(), &debug).is_err(), "{bad}");
    }
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

#[test]
fn frame_rate_is_refused_when_no_frames_are_published() {
    let off = CommandLimits { frames: false, ..CommandLimits::default() };
    let err = parse("frame_rate", b"5", &off).unwrap_err();
    assert!(err.reason.contains("output.frames"), "{err}");
    assert!(parse("frame_rate", b"5", &CommandLimits::default()).is_ok());
}
