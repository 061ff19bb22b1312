//! A flood of slow and cheap commands over MQTT: every one is applied or
//! answered on `error`, none is lost, and the slow ones (reload, source)
//! coalesce instead of pushing the cheap ones out.

use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Watcher, T};
use crate::util::shared;
use std::time::{Duration, Instant};

const ROUNDS: usize = 20;

#[test]
fn a_flood_of_commands_loses_none_and_the_slow_ones_coalesce() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), broker.port, "flood", "");
    let w = Watcher::start(broker.port, "fusiond/flood");
    let d = Daemon::spawn(&config);
    online(&w);
    let from = w.count();
    let photo = std::fs::read(shared("images/fr_obama2.jpg")).unwrap();
    for i in 1..=ROUNDS {
        w.send("reload", "PRESS");
        w.send("source", photo.clone());
        w.send("blend", format!("{i}"));
        w.send("blend", "500");
    }
    // Each command ends as an applied state or event, or an error naming it.
    let answers = |feature: &str| {
        let msgs = w.all()[from..].to_vec();
        let errors = msgs
            .iter()
            .filter(|m| m.topic.ends_with("/error") && m.json()["command"] == feature)
            .map(|m| m.json()["reason"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>();
        let applied = match feature {
            "blend" => msgs.iter().filter(|m| m.topic.ends_with("/blend/state")).count(),
            "reload" => msgs.iter().filter(|m| m.topic.ends_with("/events") && m.json()["event"] == "reloaded").count(),
            _ => msgs.iter().filter(|m| m.topic.ends_with("/events") && m.json()["event"] == "source_set").count(),
        };
        (applied, errors)
    };
    let deadline = Instant::now() + *T * 2;
    loop {
        let done = [("blend", 2 * ROUNDS), ("reload", ROUNDS), ("source", ROUNDS)]
            .iter()
            .all(|(f, n)| answers(f).0 + answers(f).1.len() >= *n);
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "unanswered commands: blend {:?}, reload {:?}, source {:?}\n{}",
            answers("blend"),
            answers("reload"),
            answers("source"),
            d.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (blends, blend_errors) = answers("blend");
    let (reloads, reload_errors) = answers("reload");
    let (sources, source_errors) = answers("source");
    eprintln!(
        "flood: blend {blends} applied + {} refused, reload {reloads} ran + {} coalesced, source {sources} set + {} superseded",
        blend_errors.len(),
        reload_errors.len(),
        source_errors.len()
    );
    assert_eq!(blends + blend_errors.len(), 2 * ROUNDS, "{blend_errors:?}");
    // Every `blend 500` is refused by the validator, and every valid blend is
    // applied or refused as busy: never the other way round.
    let outside = blend_errors.iter().filter(|r| r.contains("outside")).count();
    let busy = blend_errors.iter().filter(|r| r.starts_with("busy")).count();
    assert_eq!((outside, outside + busy), (ROUNDS, blend_errors.len()), "{blend_errors:?}");
    assert_eq!(blends + busy, ROUNDS, "each valid blend applied or refused as busy: {blend_errors:?}");
    let states: Vec<String> =
        w.all()[from..].iter().filter(|m| m.topic.ends_with("/blend/state")).map(|m| m.text()).collect();
    assert!(
        states.iter().all(|v| v.parse::<usize>().is_ok_and(|v| (1..=ROUNDS).contains(&v))),
        "a blend outside the commands sent was applied: {states:?}"
    );
    assert_eq!(reloads + reload_errors.len(), ROUNDS, "{reload_errors:?}");
    assert!(reloads < ROUNDS, "waiting reloads coalesce: {reloads} of {ROUNDS} ran");
    assert_eq!(sources + source_errors.len(), ROUNDS, "{source_errors:?}");
    assert!(source_errors.iter().all(|r| r.contains("superseded")), "{source_errors:?}");
    assert!(sources < ROUNDS, "waiting sources coalesce: {sources} of {ROUNDS} ran");
    // The last cheap command was not pushed out by the slow ones, and the
    // retained state a new subscriber gets holds it.
    let state = w.wait("blend/state", *T, |m| m.text() == ROUNDS.to_string());
    assert_eq!(state.text(), ROUNDS.to_string());
    let retained = Watcher::start(broker.port, "fusiond/flood");
    let last = retained.wait("blend/state", *T, |m| m.retained);
    assert_eq!(last.text(), ROUNDS.to_string(), "the final blend state is the last valid command");
    let stats = w.wait_from(w.count(), "stats", *T, |_| true).json();
    let counted = stats["dropped_commands"].as_u64().unwrap() + stats["coalesced_commands"].as_u64().unwrap();
    let answered =
        blend_errors.iter().filter(|r| r.starts_with("busy")).count() + reload_errors.len() + source_errors.len();
    assert_eq!(counted as usize, answered, "stats count what error answered: {stats}");
}
