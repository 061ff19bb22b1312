#![deny(unsafe_code)]
use clap::Parser;
use fusiond::cli::{self, Cli};
use std::process::ExitCode;

/// Plain stderr logger; the level comes from -v.
struct StderrLog(log::LevelFilter);

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata) -> bool {
        // The engine's own info lines (CPU feature detection) are noise at
        // the default level.
        let engine_detail = m.target().starts_with("tract") && m.level() > log::Level::Warn;
        m.level() <= self.0 && !(engine_detail && self.0 <= log::LevelFilter::Info)
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            eprintln!("{}: {}", r.level().as_str().to_lowercase(), r.args());
        }
    }
    fn flush(&self) {}
}

fn main() -> ExitCode {
    // Before any thread starts (daemon::memory says why).
    fusiond::procmem::tune_allocator();
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => log::LevelFilter::Info,
        1 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    // Under systemd (JOURNAL_STREAM set) log straight to journald, with the
    // level as PRIORITY and no timestamps; elsewhere plain lines on stderr.
    let journal = std::env::var_os("JOURNAL_STREAM").is_some() && systemd::journal::JournalLog::init().is_ok();
    if !journal {
        let _ = log::set_boxed_logger(Box::new(StderrLog(level)));
    }
    log::set_max_level(level);
    if journal {
        // Release builds abort on a panic (Cargo.toml) and systemd restarts
        // the daemon; the journal gets the reason at error priority, with
        // the thread it happened on.
        std::panic::set_hook(Box::new(|info| {
            let thread = std::thread::current();
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
            // One line, so the journal's MESSAGE holds all of it.
            log::error!("thread '{}' panicked{at}: {message}", thread.name().unwrap_or("unnamed"));
        }));
    }
    match cli::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
