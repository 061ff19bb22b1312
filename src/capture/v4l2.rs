use super::buffer::{to_rgb, BufferFormat};
use super::{CaptureError, Frame, FrameSource};
use crate::config::CameraConfig;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};
use v4l::buffer::Type;
use v4l::io::mmap::Stream;
use v4l::io::traits::CaptureStream;
use v4l::video::Capture;
use v4l::{Device, FourCC};

/// Buffers mapped for streaming: enough to keep the driver busy while one is
/// converted, few enough that a frame is never old.
const BUFFERS: u32 = 4;

/// A V4L2 camera streaming through mmap buffers, converted into RGB frames.
pub struct V4l2Source {
    name: String,
    fourcc: [u8; 4],
    width: u32,
    height: u32,
    /// Bytes per line as the driver reports it.
    stride: usize,
    stream: Stream<'static>,
    /// Rows repacked when the driver pads them (stride > packed width).
    packed: Vec<u8>,
    _device: Device,
}

/// ENODEV/ENXIO/EIO mean the device went away (unplugged, driver gone).
fn is_gone(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc_errno::ENODEV | libc_errno::ENXIO | libc_errno::EIO))
}

mod libc_errno {
    pub const ENODEV: i32 = nix::errno::Errno::ENODEV as i32;
    pub const ENXIO: i32 = nix::errno::Errno::ENXIO as i32;
    pub const EIO: i32 = nix::errno::Errno::EIO as i32;
    pub const EAGAIN: i32 = nix::errno::Errno::EAGAIN as i32;
}

/// The first of `allowed` (camera.formats, in order) that the device offers.
fn choose_format(offered: &[[u8; 4]], allowed: &[String], shown: &str) -> Result<[u8; 4], CaptureError> {
    allowed.iter().filter_map(|f| <[u8; 4]>::try_from(f.as_bytes()).ok()).find(|f| offered.contains(f)).ok_or_else(
        || CaptureError::Format {
            source_name: shown.to_string(),
            message: format!(
                "it offers {} but camera.formats allows only {}",
                offered.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect::<Vec<_>>().join(", "),
                allowed.join(", ")
            ),
        },
    )
}

impl V4l2Source {
    /// Opens `camera.device` (following a by-id link), negotiates the first
    /// of `camera.formats` it offers at the asked size and rate, and maps the
    /// buffers; no frame for `camera.stall_timeout_ms` is a stall.
    pub fn open(s: &CameraConfig) -> Result<V4l2Source, CaptureError> {
        let path = s.device.canonicalize().unwrap_or_else(|_| s.device.clone());
        let shown = s.device.display().to_string();
        let open_err =
            |what: &str, e: std::io::Error| CaptureError::Open { path: shown.clone(), message: format!("{what}: {e}") };
        let dev = Device::with_path(&path).map_err(|e| open_err("open", e))?;
        let offered: Vec<[u8; 4]> =
            dev.enum_formats().map_err(|e| open_err("list formats", e))?.iter().map(|d| d.fourcc.repr).collect();
        let fourcc = choose_format(&offered, &s.formats, &shown)?;
        let mut fmt = dev.format().map_err(|e| open_err("get format", e))?;
        fmt.width = s.width;
        fmt.height = s.height;
        fmt.fourcc = FourCC::new(&fourcc);
        let fmt = dev.set_format(&fmt).map_err(|e| open_err("set format", e))?;
        if fmt.fourcc.repr != fourcc || fmt.width % 2 != 0 {
            return Err(CaptureError::Format {
                source_name: shown,
                message: format!(
                    "asked {} but the driver chose {} {}x{}",
                    String::from_utf8_lossy(&fourcc),
                    fmt.fourcc,
                    fmt.width,
                    fmt.height
                ),
            });
        }
        if let Err(e) = dev.set_params(&v4l::video::capture::Parameters::with_fps(s.fps)) {
            log::warn!("{shown}: cannot set {} fps: {e}", s.fps);
        }
        let mut stream =
            Stream::with_buffers(&dev, Type::VideoCapture, BUFFERS).map_err(|e| open_err("map buffers", e))?;
        stream.set_timeout(Duration::from_millis(s.stall_timeout_ms));
        log::info!(
            "{shown}: {} {}x{} (stride {}), {} buffers",
            String::from_utf8_lossy(&fourcc),
            fmt.width,
            fmt.height,
            fmt.stride,
            BUFFERS
        );
        Ok(V4l2Source {
            name: shown,
            fourcc,
            width: fmt.width,
            height: fmt.height,
            stride: fmt.stride as usize,
            stream,
            packed: Vec::new(),
            _device: dev,
        })
    }

    /// `/dev/video*` nodes present on this machine.
    pub fn devices() -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> =
            std::fs::read_dir("/dev").map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        out.retain(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("video")));
        out.sort();
        out
    }
}

impl FrameSource for V4l2Source {
    fn name(&self) -> String {
        format!("v4l2:{}", self.name)
    }

    fn next_frame(&mut self, frame: &mut Frame) -> Result<(), CaptureError> {
        let (buf, meta) = match self.stream.next() {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return Err(CaptureError::Stalled(self.name.clone())),
            Err(e) if e.raw_os_error() == Some(libc_errno::EAGAIN) => return Err(CaptureError::WouldBlock),
            Err(e) if is_gone(&e) => return Err(CaptureError::Disconnected(self.name.clone())),
            Err(e) => return Err(CaptureError::Open { path: self.name.clone(), message: e.to_string() }),
        };
        let data = &buf[..(meta.bytesused as usize).min(buf.len())];
        let format = BufferFormat { fourcc: self.fourcc, width: self.width, height: self.height, stride: self.stride };
        to_rgb(data, &format, &mut self.packed, &mut frame.image)
            .map_err(|message| CaptureError::Format { source_name: self.name.clone(), message })?;
        frame.captured = SystemTime::now();
        frame.seq = meta.sequence as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;
    use v4l::v4l2::vidioc::*;

    /// The request numbers the v4l crate computes from bindgen's structs,
    /// for every ioctl the capture path can issue.
    const OURS: [(&str, _IOC_TYPE); 18] = [
        ("VIDIOC_QUERYCAP", VIDIOC_QUERYCAP),
        ("VIDIOC_ENUM_FMT", VIDIOC_ENUM_FMT),
        ("VIDIOC_G_FMT", VIDIOC_G_FMT),
        ("VIDIOC_S_FMT", VIDIOC_S_FMT),
        ("VIDIOC_REQBUFS", VIDIOC_REQBUFS),
        ("VIDIOC_QUERYBUF", VIDIOC_QUERYBUF),
        ("VIDIOC_QBUF", VIDIOC_QBUF),
        ("VIDIOC_DQBUF", VIDIOC_DQBUF),
        ("VIDIOC_STREAMON", VIDIOC_STREAMON),
        ("VIDIOC_STREAMOFF", VIDIOC_STREAMOFF),
        ("VIDIOC_G_PARM", VIDIOC_G_PARM),
        ("VIDIOC_S_PARM", VIDIOC_S_PARM),
        ("VIDIOC_ENUM_FRAMESIZES", VIDIOC_ENUM_FRAMESIZES),
        ("VIDIOC_ENUM_FRAMEINTERVALS", VIDIOC_ENUM_FRAMEINTERVALS),
        ("VIDIOC_QUERY_EXT_CTRL", VIDIOC_QUERY_EXT_CTRL),
        ("VIDIOC_QUERYMENU", VIDIOC_QUERYMENU),
        ("VIDIOC_G_EXT_CTRLS", VIDIOC_G_EXT_CTRLS),
        ("VIDIOC_S_EXT_CTRLS", VIDIOC_S_EXT_CTRLS),
    ];

    /// The same numbers from the target's C headers: the table in
    /// FUSIOND_V4L2_IOCTLS (tests/cross/run.sh builds the probe with the
    /// target's compiler and runs it under qemu), or, on the build machine,
    /// the probe built with `cc` and run here.
    fn c_headers() -> String {
        if let Some(table) = std::env::var_os("FUSIOND_V4L2_IOCTLS") {
            return std::fs::read_to_string(&table)
                .unwrap_or_else(|e| panic!("FUSIOND_V4L2_IOCTLS={}: {e}", Path::new(&table).display()));
        }
        // cargo's run-time value: a test binary built in another checkout
        // that shares the target directory must read this checkout's probe.
        let root = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
        let probe = Path::new(&root).join("tests/cross/v4l2_ioctls.c");
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("v4l2_ioctls");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let built = Command::new(&cc).arg(&probe).arg("-o").arg(&exe).status();
        assert!(built.is_ok_and(|s| s.success()), "`{cc} {}` failed: install a C compiler", probe.display());
        let out = Command::new(&exe).output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    }

    /// bindgen generates the v4l2 structs for the target it is told: on a
    /// 32-bit board they must have the 32-bit layout (v4l2_format is 204
    /// bytes there, 208 on 64-bit), or the driver answers ENOTTY.
    #[test]
    fn ioctl_numbers_match_the_target_c_headers() {
        let table = c_headers();
        let size = |request: _IOC_TYPE| (request >> 16) & 0x3fff;
        for (name, ours) in OURS {
            let c: _IOC_TYPE = table
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .unwrap_or_else(|| panic!("{name} is missing from the C table:\n{table}"))
                .parse()
                .unwrap();
            assert_eq!(ours, c, "{name}: argument of {} bytes here, {} in the C headers", size(ours), size(c));
        }
        println!("{} V4L2 ioctl numbers match the C headers", OURS.len());
    }
}
