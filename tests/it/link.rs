//! The MQTT session against a real mosquitto: a stop with rumqttc's queue
//! full still ends with a DISCONNECT, so the broker keeps `stopped` and
//! never publishes the will.

use crate::harness::{free_port, serial, Mosquitto, Watcher, T};
use fusiond::mqtt::{Link, LinkSettings, Message, Outbox, PayloadCaps, Topics};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_stop_behind_a_full_queue_disconnects_cleanly() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let topics = Topics::new("fusiond", "queue").unwrap();
    let w = Watcher::start(broker.port, "fusiond/queue");
    let settings = LinkSettings {
        host: "127.0.0.1".into(),
        port: broker.port,
        client_id: "fusiond-queue".into(),
        keep_alive: Duration::from_secs(30),
        credentials: None,
        tls: None,
        caps: Arc::new(PayloadCaps::new(1 << 19)),
        reconnect_max: Duration::from_secs(2),
        client_queue: 8,
        ha_status: None,
    };
    let outbox = Arc::new(Outbox::new(4096));
    let link = Link::start(&settings, topics.clone(), outbox.clone(), |_, _| {}).unwrap();
    outbox.push(Message::retained(topics.available(), "online"));
    w.wait("available", *T, |m| m.payload == b"online");
    // Far more than rumqttc's queue holds: the publisher is still blocked
    // on it when the final `stopped` and the close arrive. They go to a
    // topic the watcher does not read, so that mosquitto's queue for the
    // watcher cannot drop `stopped`.
    let event = vec![b'x'; 8 * 1024];
    for _ in 0..500 {
        outbox.push(Message::event("flood/queue".into(), event.clone()));
    }
    outbox.push(Message::retained(topics.available(), "stopped"));
    let started = Instant::now();
    let clean = link.shutdown(*T);
    let took = started.elapsed();
    assert!(clean, "the session did not end within {:?}", *T);
    w.wait("available", *T, |m| m.payload == b"stopped");
    // mosquitto publishes a will as soon as the socket closes without one.
    std::thread::sleep(Duration::from_millis(500));
    let available: Vec<String> = w.all().iter().filter(|m| m.topic.ends_with("/available")).map(|m| m.text()).collect();
    assert_eq!(available.last().map(String::as_str), Some("stopped"), "availability: {available:?}");
    eprintln!("link: 500 queued events and `stopped` drained and disconnected in {took:?}");
}
