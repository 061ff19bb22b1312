//! The MQTT session: one bounded outbox that producers push into without
//! ever blocking, a publisher thread that owns the rumqttc client, and a
//! connection thread that drives rumqttc's event loop with reconnect backoff.
//!
//! Every retained message is remembered, so on each (re)connect the
//! publisher resubscribes, republishes the retained states and then the
//! availability (`online`, or `starting` while models still warm).

use super::Topics;
use bytes::Bytes;
use rumqttc::{Client, Event, LastWill, MqttOptions, Packet, QoS, TlsConfiguration, Transport};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One message to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub topic: String,
    pub payload: Vec<u8>,
    pub qos: QoS,
    pub retain: bool,
}

impl Message {
    /// QoS 1, not retained: events, errors, stats, faces.
    pub fn event(topic: String, payload: impl Into<Vec<u8>>) -> Message {
        Message { topic, payload: payload.into(), qos: QoS::AtLeastOnce, retain: false }
    }

    /// QoS 0, not retained: per-frame messages that the next one replaces.
    pub fn volatile(topic: String, payload: impl Into<Vec<u8>>) -> Message {
        Message { topic, payload: payload.into(), qos: QoS::AtMostOnce, retain: false }
    }

    /// QoS 1, retained: states and availability.
    pub fn retained(topic: String, payload: impl Into<Vec<u8>>) -> Message {
        Message { topic, payload: payload.into(), qos: QoS::AtLeastOnce, retain: true }
    }
}

enum Next {
    Connected,
    Message(Message),
    Frame(Message),
    Closed,
}

#[derive(Default)]
struct Lanes {
    messages: VecDeque<Message>,
    /// Only the newest frame waits; an older one is dropped.
    frame: Option<Message>,
    connected: bool,
    closed: bool,
}

/// Counters of what the session dropped or did.
#[derive(Debug, Default)]
pub struct LinkCounters {
    pub dropped_frames: AtomicU64,
    pub dropped_messages: AtomicU64,
    pub connects: AtomicU64,
    pub connected: AtomicBool,
}

/// The bounded queue between the daemon and the publisher. Pushing never
/// blocks: a full queue drops the oldest message, and a frame waiting when
/// the next arrives is dropped.
pub struct Outbox {
    lanes: Mutex<Lanes>,
    ready: Condvar,
    capacity: usize,
    pub counters: LinkCounters,
}

impl Outbox {
    pub fn new(capacity: usize) -> Outbox {
        Outbox {
            lanes: Mutex::default(),
            ready: Condvar::new(),
            capacity: capacity.max(1),
            counters: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lanes> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn push(&self, message: Message) {
        let mut l = self.lock();
        if l.messages.len() >= self.capacity {
            l.messages.pop_front();
            self.counters.dropped_messages.fetch_add(1, Ordering::Relaxed);
        }
        l.messages.push_back(message);
        drop(l);
        self.ready.notify_one();
    }

    /// Queues a frame (QoS 0), replacing one still waiting.
    pub fn push_frame(&self, topic: String, jpeg: Vec<u8>) {
        let m = Message::volatile(topic, jpeg);
        if self.lock().frame.replace(m).is_some() {
            self.counters.dropped_frames.fetch_add(1, Ordering::Relaxed);
        }
        self.ready.notify_one();
    }

    /// Makes the publisher resubscribe and republish every retained
    /// message, as after a reconnect.
    pub(super) fn connected(&self) {
        self.lock().connected = true;
        self.ready.notify_one();
    }

    /// Lets the publisher finish what is queued and stop.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Messages queued, frames not counted.
    pub fn len(&self) -> usize {
        self.lock().messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The reconnect marker first, then messages in order, then the frame.
    fn next(&self) -> Next {
        let mut l = self.lock();
        loop {
            if std::mem::take(&mut l.connected) {
                return Next::Connected;
            }
            if let Some(m) = l.messages.pop_front() {
                return Next::Message(m);
            }
            if let Some(f) = l.frame.take() {
                return Next::Frame(f);
            }
            if l.closed {
                return Next::Closed;
            }
            l = self.ready.wait(l).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Connection settings, resolved from the config.
#[derive(Debug, Clone)]
pub struct LinkSettings {
    pub host: String,
    pub port: u16,
    pub client_id: String,
    pub keep_alive: Duration,
    pub credentials: Option<(String, String)>,
    /// TLS trust anchors (PEM); `Some(empty)` uses the system's roots.
    pub tls_ca: Option<Vec<u8>>,
    /// Largest incoming packet (commands carry source images).
    pub max_incoming: usize,
    pub reconnect_max: Duration,
    /// Requests rumqttc itself may hold while disconnected.
    pub client_queue: usize,
    /// Home Assistant's status topic: its `online` republishes every
    /// retained message (the discovery config among them) after a short
    /// random delay, so a restarted Home Assistant sees the device again.
    pub ha_status: Option<String>,
}

/// A running MQTT session.
pub struct Link {
    pub outbox: Arc<Outbox>,
    /// Set when shutting down: errors are expected, nothing reconnects.
    stop: Arc<AtomicBool>,
    publisher: Option<JoinHandle<()>>,
    connection: Option<JoinHandle<()>>,
}

fn tls_config(ca: &[u8]) -> Result<TlsConfiguration, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if ca.is_empty() {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
        return Ok(TlsConfiguration::Rustls(Arc::new(config)));
    }
    Ok(TlsConfiguration::Simple { ca: ca.to_vec(), alpn: None, client_auth: None })
}

impl Link {
    /// Starts the session. `availability` is what `<base>/available` says
    /// until changed by pushing a retained message to it; incoming messages
    /// on `<base>/+/set` go to `on_command(feature, payload)`, which must not
    /// block.
    pub fn start(
        settings: &LinkSettings,
        topics: Topics,
        outbox: Arc<Outbox>,
        on_command: impl Fn(&str, Bytes) + Send + 'static,
    ) -> Result<Link, String> {
        let mut options = MqttOptions::new(&settings.client_id, &settings.host, settings.port);
        options
            .set_keep_alive(settings.keep_alive)
            .set_clean_session(true)
            .set_max_packet_size(settings.max_incoming, 64 * 1024 * 1024)
            .set_last_will(LastWill::new(topics.available(), "offline", QoS::AtLeastOnce, true));
        if let Some((user, pass)) = &settings.credentials {
            options.set_credentials(user, pass);
        }
        if let Some(ca) = &settings.tls_ca {
            options.set_transport(Transport::tls_with_config(tls_config(ca)?));
        }
        let (client, mut connection) = Client::new(options, settings.client_queue.max(8));
        let stop = Arc::new(AtomicBool::new(false));

        let out = outbox.clone();
        let t = topics.clone();
        let ha_status = settings.ha_status.clone();
        let subscriptions: Vec<String> = std::iter::once(topics.set_filter()).chain(ha_status.clone()).collect();
        let publisher = std::thread::Builder::new()
            .name("mqtt-publish".into())
            .spawn(move || publish_loop(&client, &out, &t, &subscriptions))
            .map_err(|e| e.to_string())?;

        let driver = Driver {
            out: outbox.clone(),
            stop: stop.clone(),
            topics,
            ha_status,
            endpoint: format!("{}:{}", settings.host, settings.port),
            reconnect_max: settings.reconnect_max,
        };
        let connection = std::thread::Builder::new()
            .name("mqtt-connection".into())
            .spawn(move || driver.run(&mut connection, on_command))
            .map_err(|e| e.to_string())?;
        Ok(Link { outbox, stop, publisher: Some(publisher), connection: Some(connection) })
    }

    /// Publishes what is queued (a final `stopped`, say), disconnects and
    /// waits up to `grace` for the threads.
    pub fn shutdown(mut self, grace: Duration) {
        // The connection thread keeps driving the session until the
        // DISCONNECT that follows the queued messages has gone out.
        self.stop.store(true, Ordering::Relaxed);
        self.outbox.close();
        let deadline = Instant::now() + grace;
        if let Some(p) = self.publisher.take() {
            join_until(p, deadline);
        }
        if let Some(c) = self.connection.take() {
            join_until(c, deadline);
        }
    }
}

/// The connection thread: drives rumqttc's event loop, hands commands on,
/// and reconnects with doubling backoff after one warning.
struct Driver {
    out: Arc<Outbox>,
    stop: Arc<AtomicBool>,
    topics: Topics,
    ha_status: Option<String>,
    endpoint: String,
    reconnect_max: Duration,
}

impl Driver {
    fn run(&self, connection: &mut rumqttc::Connection, on_command: impl Fn(&str, Bytes)) {
        let mut backoff = Duration::from_secs(1);
        let mut warned = false;
        for event in connection.iter() {
            match event {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    log::info!("mqtt: connected to {}", self.endpoint);
                    (backoff, warned) = (Duration::from_secs(1), false);
                    self.out.counters.connects.fetch_add(1, Ordering::Relaxed);
                    self.out.counters.connected.store(true, Ordering::Relaxed);
                    self.out.connected();
                }
                Ok(Event::Incoming(Packet::Publish(p))) => {
                    if self.ha_status.as_deref() == Some(p.topic.as_str()) && p.payload.trim_ascii() == b"online" {
                        super::discovery::republish_later(self.out.clone());
                    } else if let Some(feature) = self.topics.feature_of(&p.topic) {
                        on_command(feature, p.payload);
                    }
                }
                Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect)) if self.stopping() => break,
                Ok(_) => {}
                Err(e) => {
                    self.out.counters.connected.store(false, Ordering::Relaxed);
                    if self.stopping() {
                        break;
                    }
                    if !std::mem::replace(&mut warned, true) {
                        log::warn!(
                            "no MQTT broker at {} ({e}): install mosquitto or set mqtt.host; \
                             retrying with backoff up to {:?}",
                            self.endpoint,
                            self.reconnect_max
                        );
                    }
                    sleep_unless(&self.stop, backoff);
                    if self.stopping() {
                        break;
                    }
                    backoff = (backoff * 2).min(self.reconnect_max);
                }
            }
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
    }
}

fn join_until(handle: JoinHandle<()>, deadline: Instant) {
    while !handle.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if handle.is_finished() {
        let _ = handle.join();
    }
}

fn publish_loop(client: &Client, outbox: &Outbox, topics: &Topics, subscriptions: &[String]) {
    let available = topics.available();
    let mut availability: Option<Vec<u8>> = None;
    let mut retained: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    loop {
        match outbox.next() {
            Next::Connected => {
                for filter in subscriptions {
                    if let Err(e) = client.subscribe(filter.as_str(), QoS::AtLeastOnce) {
                        log::error!("mqtt: cannot subscribe to {filter}: {e}");
                    }
                }
                for (topic, payload) in &retained {
                    let _ = client.publish(topic.as_str(), QoS::AtLeastOnce, true, payload.clone());
                }
                if let Some(a) = &availability {
                    let _ = client.publish(available.as_str(), QoS::AtLeastOnce, true, a.clone());
                }
            }
            Next::Message(m) => {
                if m.retain {
                    if m.topic == available {
                        availability = Some(m.payload.clone());
                    } else {
                        retained.insert(m.topic.clone(), m.payload.clone());
                    }
                }
                if client.publish(m.topic, m.qos, m.retain, m.payload).is_err() {
                    outbox.counters.dropped_messages.fetch_add(1, Ordering::Relaxed);
                }
            }
            // Frames never wait for a slow broker: rumqttc's queue full means
            // this one is dropped.
            Next::Frame(f) => {
                if client.try_publish(f.topic, f.qos, false, f.payload).is_err() {
                    outbox.counters.dropped_frames.fetch_add(1, Ordering::Relaxed);
                }
            }
            Next::Closed => {
                let _ = client.try_disconnect();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: u8) -> Message {
        Message::event("t".into(), vec![n])
    }

    #[test]
    fn a_full_outbox_drops_the_oldest_message_and_never_blocks() {
        let o = Outbox::new(2);
        for n in 0..5 {
            o.push(msg(n));
        }
        assert_eq!(o.counters.dropped_messages.load(Ordering::Relaxed), 3);
        assert!(matches!(o.next(), Next::Message(m) if m.payload == [3]));
    }

    #[test]
    fn messages_go_before_frames_and_only_the_newest_frame_waits() {
        let o = Outbox::new(8);
        o.push_frame("f".into(), vec![1]);
        o.push_frame("f".into(), vec![2]);
        o.push(msg(9));
        o.connected();
        assert!(matches!(o.next(), Next::Connected));
        assert!(matches!(o.next(), Next::Message(m) if m.payload == [9]));
        assert!(matches!(o.next(), Next::Frame(f) if f.payload == [2]));
        assert_eq!(o.counters.dropped_frames.load(Ordering::Relaxed), 1);
        o.close();
        assert!(matches!(o.next(), Next::Closed));
    }
}
