#![deny(unsafe_code)]
use clap::Parser;
use fusiond::cli::{self, Cli};
use std::process::ExitCode;

/// The logger: plain lines on stderr, or journald under systemd; the level
/// comes from -v.
struct Log {
    level: log::LevelFilter,
    journal: bool,
}

impl log::Log for Log {
    /// `-v` shows fusiond's own debug records; other crates' (rumqttc's
    /// packets, tract's planning) only from `-vv`. The engine's own info
    /// lines (CPU feature detection) are noise at the default level.
    fn enabled(&self, m: &log::Metadata) -> bool {
        let ours = m.target().starts_with("fusiond");
        let engine_detail = m.target().starts_with("tract") && m.level() > log::Level::Warn;
        let quiet = if ours || self.level >= log::LevelFilter::Trace {
            false
        } else if self.level <= log::LevelFilter::Info {
            engine_detail
        } else {
            m.level() > log::Level::Info
        };
        m.level() <= self.level && !quiet
    }
    fn log(&self, r: &log::Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        if !self.journal || systemd::journal::log_record(r).is_err() {
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
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let _ = log::set_boxed_logger(Box::new(Log { level, journal }));
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

#[cfg(test)]
mod tests {
    use super::Log;
    use log::{Level, LevelFilter, Log as _, Metadata};

    fn shown(level: LevelFilter, target: &str, at: Level) -> bool {
        Log { level, journal: false }.enabled(&Metadata::builder().target(target).level(at).build())
    }

    #[test]
    fn v_shows_fusiond_debug_but_not_other_crates_until_vv() {
        assert!(shown(LevelFilter::Debug, "fusiond::daemon", Level::Debug));
        assert!(!shown(LevelFilter::Debug, "rumqttc::state", Level::Debug), "rumqttc's packets at -v");
        assert!(shown(LevelFilter::Debug, "rumqttc::eventloop", Level::Warn));
        assert!(shown(LevelFilter::Trace, "rumqttc::state", Level::Debug));
        assert!(!shown(LevelFilter::Info, "tract_linalg::arm64", Level::Info), "tract's CPU lines by default");
        assert!(shown(LevelFilter::Info, "fusiond", Level::Info));
        assert!(!shown(LevelFilter::Info, "fusiond", Level::Debug));
    }
}
