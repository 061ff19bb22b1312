//! The V4L2 output's memory-mapped buffers, filled in turn.
//!
//! v4l2loopback publishes an output buffer when it is queued and hands the
//! buffer just queued straight back on dequeue, so a writer that fills
//! whichever buffer dequeue returns (as the `v4l` crate's stream does)
//! writes one buffer forever: a reader still copying it is overwritten
//! mid-frame, and the others are never filled. Here each frame goes to the
//! next buffer in turn, so a reader has the other buffers' time to finish;
//! the first frame fills every buffer, so a new reader never gets one
//! nothing was written to.
#![allow(unsafe_code)] // one of the daemon's named unsafe files: V4L2 buffer ioctls and the buffers' mappings (memmap2).

use memmap2::{MmapMut, MmapOptions};
use std::io;
use std::os::fd::RawFd;
use v4l::v4l2::{self, vidioc};
use v4l::v4l_sys::{v4l2_buffer, v4l2_requestbuffers};

/// `V4L2_BUF_TYPE_VIDEO_OUTPUT`, `V4L2_MEMORY_MMAP`, `V4L2_FIELD_NONE`.
const VIDEO_OUTPUT: u32 = 2;
const MEMORY_MMAP: u32 = 1;
const FIELD_NONE: u32 = 1;

/// Streaming output buffers of one open device; streams from creation and
/// stops (`VIDIOC_STREAMOFF`) when dropped. The device's descriptor must
/// outlive it.
pub struct Ring {
    fd: RawFd,
    maps: Vec<MmapMut>,
    next: usize,
    primed: bool,
}

fn ioctl<T>(fd: RawFd, request: vidioc::_IOC_TYPE, arg: &mut T) -> io::Result<()> {
    // SAFETY: each request below is passed the struct the kernel's V4L2
    // ABI defines for it, borrowed mutably for the call only.
    unsafe { v4l2::ioctl(fd, request, arg as *mut T as *mut std::os::raw::c_void) }
}

fn buffer(index: u32) -> v4l2_buffer {
    // SAFETY: v4l2_buffer is a plain C struct; all zeroes is its empty value.
    v4l2_buffer { index, type_: VIDEO_OUTPUT, memory: MEMORY_MMAP, ..unsafe { std::mem::zeroed() } }
}

impl Ring {
    /// Asks `fd` for `count` output buffers (a driver may grant fewer),
    /// maps them and starts streaming.
    pub fn new(fd: RawFd, count: u32) -> io::Result<Ring> {
        // SAFETY: as in `buffer`.
        let mut req =
            v4l2_requestbuffers { count, type_: VIDEO_OUTPUT, memory: MEMORY_MMAP, ..unsafe { std::mem::zeroed() } };
        ioctl(fd, vidioc::VIDIOC_REQBUFS, &mut req)?;
        if req.count == 0 {
            return Err(io::Error::other("the device granted no output buffers"));
        }
        let mut maps = Vec::with_capacity(req.count as usize);
        for index in 0..req.count {
            let mut b = buffer(index);
            ioctl(fd, vidioc::VIDIOC_QUERYBUF, &mut b)?;
            // SAFETY: the kernel hands out this offset and length for
            // buffer `index` of `fd`; only this ring writes through the map,
            // and the map is dropped before the device is closed.
            let offset = unsafe { b.m.offset };
            let map = unsafe { MmapOptions::new().offset(offset.into()).len(b.length as usize).map_mut(fd)? };
            maps.push(map);
        }
        let mut kind = VIDEO_OUTPUT;
        ioctl(fd, vidioc::VIDIOC_STREAMON, &mut kind)?;
        Ok(Ring { fd, maps, next: 0, primed: false })
    }

    /// How many buffers the device granted.
    pub fn len(&self) -> usize {
        self.maps.len()
    }

    /// The largest frame a buffer takes.
    pub fn room(&self) -> usize {
        self.maps.iter().map(|m| m.len()).min().unwrap_or(0)
    }

    /// Copies `frame` into the next buffer in turn and queues it; the first
    /// frame goes into every buffer.
    pub fn write(&mut self, frame: &[u8]) -> io::Result<()> {
        if frame.len() > self.room() {
            let (n, room) = (frame.len(), self.room());
            return Err(io::Error::other(format!("a frame of {n} bytes does not fit its buffer of {room}")));
        }
        let copies = if self.primed { 1 } else { self.maps.len() };
        for _ in 0..copies {
            self.queue(frame)?;
        }
        self.primed = true;
        Ok(())
    }

    fn queue(&mut self, frame: &[u8]) -> io::Result<()> {
        let index = self.next;
        self.maps[index][..frame.len()].copy_from_slice(frame);
        let mut b = buffer(index as u32);
        b.bytesused = frame.len() as u32;
        b.field = FIELD_NONE;
        ioctl(self.fd, vidioc::VIDIOC_QBUF, &mut b)?;
        // The queued buffer comes straight back from v4l2loopback; a driver
        // that holds it longer says EAGAIN, and the ring moves on.
        let mut done = buffer(0);
        match ioctl(self.fd, vidioc::VIDIOC_DQBUF, &mut done) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
            _ => {}
        }
        self.next = (index + 1) % self.maps.len();
        Ok(())
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let mut kind = VIDEO_OUTPUT;
        if let Err(e) = ioctl(self.fd, vidioc::VIDIOC_STREAMOFF, &mut kind) {
            log::debug!("v4l2 output: stream off: {e}");
        }
    }
}
