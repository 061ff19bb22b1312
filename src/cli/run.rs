#![allow(unsafe_code)] // one of the daemon's named unsafe files: it installs the signal handlers (sigaction).
use super::store::ConfigArgs;
use crate::daemon::{self, Signals};
use anyhow::{Context, Result};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: nix::libc::c_int) {
    // Only async-signal-safe work here: set a flag the control loop polls.
    if signal == Signal::SIGHUP as i32 {
        RELOAD.store(true, Ordering::Relaxed);
    } else {
        STOP.store(true, Ordering::Relaxed);
    }
}

fn install_handlers() -> Result<()> {
    let action = SigAction::new(SigHandler::Handler(on_signal), SaFlags::SA_RESTART, SigSet::empty());
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: the handler only stores to atomics.
        unsafe { sigaction(s, &action) }.with_context(|| format!("cannot install the {s} handler"))?;
    }
    Ok(())
}

pub fn run(args: ConfigArgs) -> Result<()> {
    install_handlers()?;
    daemon::run(&args.config, None, &Signals { stop: &STOP, reload: &RELOAD })
        .with_context(|| format!("fusiond run --config {}", args.config.display()))
}
