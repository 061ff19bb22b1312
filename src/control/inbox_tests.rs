use super::*;
use crate::control::Sender;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

fn inbox(capacity: usize) -> (Inbox, Arc<Mutex<Vec<CommandError>>>) {
    let refused = Arc::new(Mutex::new(Vec::new()));
    let r = refused.clone();
    (
        Inbox::new(capacity, Arc::new(PayloadCaps::new(1 << 20)), Box::new(move |e| r.lock().unwrap().push(e.clone()))),
        refused,
    )
}

fn cmd(feature: &str, payload: &str) -> Incoming {
    Incoming {
        feature: feature.into(),
        payload: payload.as_bytes().to_vec().into(),
        reply: None,
        from: Sender { who: "test".into(), authenticated: false },
    }
}

fn drain(inbox: &Inbox) -> Vec<(String, String)> {
    std::iter::from_fn(|| inbox.recv_timeout(Duration::ZERO))
        .map(|c| (c.feature, String::from_utf8_lossy(&c.payload).to_string()))
        .collect()
}

#[test]
fn a_full_queue_refuses_as_busy_and_says_so() {
    let (inbox, refused) = inbox(2);
    for v in ["10", "20", "30"] {
        inbox.submit(cmd("blend", v));
    }
    assert_eq!(drain(&inbox), [("blend".into(), "10".into()), ("blend".into(), "20".into())]);
    let refused = refused.lock().unwrap();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].command, "blend");
    assert!(refused[0].reason.starts_with("busy"), "{:?}", refused[0]);
    assert_eq!(inbox.busy(), 1);
}

#[test]
fn a_flood_of_reloads_and_sources_leaves_room_for_the_cheap_commands_in_order() {
    let (inbox, refused) = inbox(4);
    for i in 0..50 {
        inbox.submit(cmd("reload", "PRESS"));
        inbox.submit(cmd("source", &format!("photo{i}")));
    }
    inbox.submit(cmd("enabled", "OFF"));
    inbox.submit(cmd("blend", "40"));
    let got = drain(&inbox);
    assert_eq!(
        got,
        [
            ("reload".into(), "PRESS".into()),
            ("source".into(), "photo49".into()),
            ("enabled".into(), "OFF".into()),
            ("blend".into(), "40".into())
        ],
        "one reload, the newest source, then the cheap ones, in arrival order"
    );
    let refused = refused.lock().unwrap();
    assert_eq!(refused.len(), 98, "every coalesced command is answered");
    assert_eq!(refused.iter().filter(|e| e.reason.contains("superseded")).count(), 49);
    assert_eq!((inbox.busy(), inbox.coalesced()), (0, 98));
}

#[test]
fn a_refused_http_command_gets_its_reply_and_arrival_order_holds_across_kinds() {
    let (inbox, _) = inbox(4);
    let (tx, rx) = sync_channel(1);
    inbox.submit(Incoming { reply: Some(tx), ..cmd("source", "old") });
    inbox.submit(cmd("blend", "10"));
    inbox.submit(cmd("source", "new"));
    let e = rx.try_recv().expect("answered").unwrap_err();
    assert!(e.reason.contains("superseded"), "{e:?}");
    // The newer source takes its own place in the order, after the blend.
    assert_eq!(drain(&inbox), [("blend".into(), "10".into()), ("source".into(), "new".into())]);
}

#[test]
fn waiting_ends_at_the_timeout_or_when_a_command_comes() {
    let (inbox, _) = inbox(4);
    let inbox = Arc::new(inbox);
    let started = std::time::Instant::now();
    assert!(inbox.recv_timeout(Duration::from_millis(30)).is_none());
    assert!(started.elapsed() >= Duration::from_millis(25));
    let i = inbox.clone();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        i.submit(cmd("blend", "5"));
    });
    assert_eq!(inbox.recv_timeout(Duration::from_secs(5)).map(|c| c.feature).as_deref(), Some("blend"));
    sender.join().unwrap();
}

#[test]
fn payloads_over_their_features_cap_are_refused_at_submit_and_the_cap_follows_the_setting() {
    let (inbox, refused) = inbox(64);
    let long = "7".repeat(PayloadCaps::TEXT + 1);
    assert!(!inbox.submit(cmd("blend", &long)));
    assert!(inbox.submit(cmd("source", &long)), "a source may be larger");
    inbox.caps().set_source(100);
    assert!(!inbox.submit(cmd("source", &long)), "a reload lowered the source cap");
    assert_eq!(drain(&inbox), [("source".into(), long.clone())]);
    let refused = refused.lock().unwrap();
    assert_eq!(refused.len(), 2);
    assert!(refused[0].reason.contains("the limit is 256"), "{:?}", refused[0]);
    assert!(refused[1].reason.contains("the limit is 100 (pipeline.max_source_bytes)"), "{:?}", refused[1]);
}
