use super::{CaptureError, Frame, FrameSource};
use std::collections::VecDeque;

/// A fault to inject before the wrapped source's next frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// The device disappears (ENODEV).
    Disconnect,
    /// No frame yet (EAGAIN).
    WouldBlock,
    /// A frame in a format that cannot be converted.
    WrongFormat,
    /// No frame within the deadline.
    Stall,
}

/// Wraps a real source and injects scripted faults, one per call, before
/// passing calls through: the hardware fake for capture tests.
pub struct FaultySource<S> {
    inner: S,
    faults: VecDeque<Option<Fault>>,
}

impl<S: FrameSource> FaultySource<S> {
    /// `script[i]` is what call `i` does: `None` passes through.
    pub fn new(inner: S, script: impl IntoIterator<Item = Option<Fault>>) -> Self {
        FaultySource { inner, faults: script.into_iter().collect() }
    }
}

impl<S: FrameSource> FrameSource for FaultySource<S> {
    fn name(&self) -> String {
        format!("faulty:{}", self.inner.name())
    }

    fn next_frame(&mut self, frame: &mut Frame) -> Result<(), CaptureError> {
        match self.faults.pop_front().flatten() {
            None => self.inner.next_frame(frame),
            Some(Fault::Disconnect) => Err(CaptureError::Disconnected(self.name())),
            Some(Fault::WouldBlock) => Err(CaptureError::WouldBlock),
            Some(Fault::WrongFormat) => Err(CaptureError::Format {
                source_name: self.name(),
                message: "pixel format RGGB is not supported".into(),
            }),
            Some(Fault::Stall) => Err(CaptureError::Stalled(self.name())),
        }
    }
}
