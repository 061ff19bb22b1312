//! The MQTT session: a publisher thread that owns the rumqttc client and
//! drains the [`Outbox`], and a connection thread that drives rumqttc's
//! event loop with reconnect backoff.
//!
//! Every retained message is remembered, so on each (re)connect the
//! publisher resubscribes, republishes the retained states and then the
//! availability (`online`, or `starting` while models still warm).

use super::outbox::{Next, Outbox};
use super::tls::{client_config, TlsSettings};
use super::{PayloadCaps, Topics};
use bytes::Bytes;
use rumqttc::{Client, Event, LastWill, MqttOptions, Packet, QoS, TlsConfiguration, Transport};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The largest packet published (frames and snapshots are JPEGs).
const MAX_OUTGOING: usize = 64 * 1024 * 1024;

/// Connection settings, resolved from the config. Its `Debug` leaves the
/// password out.
#[derive(Clone)]
pub struct LinkSettings {
    pub host: String,
    pub port: u16,
    pub client_id: String,
    pub keep_alive: Duration,
    pub credentials: Option<(String, String)>,
    /// TLS (trust anchors, and a client certificate for mutual TLS).
    pub tls: Option<TlsSettings>,
    /// The payload limits; the largest incoming packet is
    /// [`PayloadCaps::packet`] (commands carry source images), and a change
    /// (a reload) reconnects with the new limit.
    pub caps: Arc<PayloadCaps>,
    pub reconnect_max: Duration,
    /// Requests rumqttc itself may hold while disconnected.
    pub client_queue: usize,
    /// Home Assistant's status topic: its `online` republishes every
    /// retained message (the discovery config among them) after a short
    /// random delay, so a restarted Home Assistant sees the device again.
    pub ha_status: Option<String>,
}

impl std::fmt::Debug for LinkSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("client_id", &self.client_id)
            .field("keep_alive", &self.keep_alive)
            .field("credentials", &self.credentials.as_ref().map(|(user, _)| (user, "<password>")))
            .field("tls", &self.tls)
            .field("caps", &self.caps)
            .field("reconnect_max", &self.reconnect_max)
            .field("client_queue", &self.client_queue)
            .field("ha_status", &self.ha_status)
            .finish()
    }
}

/// A running MQTT session.
pub struct Link {
    pub outbox: Arc<Outbox>,
    /// Set when shutting down: errors are expected, nothing reconnects.
    stop: Arc<AtomicBool>,
    publisher: Option<JoinHandle<()>>,
    connection: Option<JoinHandle<()>>,
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
            .set_max_packet_size(settings.caps.packet(), MAX_OUTGOING)
            .set_last_will(LastWill::new(topics.available(), "offline", QoS::AtLeastOnce, true));
        if let Some((user, pass)) = &settings.credentials {
            options.set_credentials(user, pass);
        }
        if let Some(tls) = &settings.tls {
            let config = client_config(tls).map_err(|e| e.to_string())?;
            options.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(config)));
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
            tls: settings.tls.is_some(),
            caps: settings.caps.clone(),
        };
        let connection = std::thread::Builder::new()
            .name("mqtt-connection".into())
            .spawn(move || driver.run(&mut connection, on_command))
            .map_err(|e| e.to_string())?;
        Ok(Link { outbox, stop, publisher: Some(publisher), connection: Some(connection) })
    }

    /// Publishes what is queued (a final `stopped`, say), disconnects and
    /// waits up to `grace` for the threads. False when the DISCONNECT did
    /// not go out in time: the broker then publishes the will (`offline`)
    /// once the process exits.
    #[must_use = "a session that did not end in time leaves the will to the broker"]
    pub fn shutdown(mut self, grace: Duration) -> bool {
        // The connection thread keeps driving the session until the
        // DISCONNECT that follows the queued messages has gone out.
        self.stop.store(true, Ordering::Relaxed);
        self.outbox.close();
        let deadline = Instant::now() + grace;
        let published = self.publisher.take().is_none_or(|p| join_until(p, deadline));
        let disconnected = self.connection.take().is_none_or(|c| join_until(c, deadline));
        published && disconnected
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
    /// The session runs over TLS (its failures point at the TLS files).
    tls: bool,
    caps: Arc<PayloadCaps>,
}

impl Driver {
    fn run(&self, connection: &mut rumqttc::Connection, on_command: impl Fn(&str, Bytes)) {
        let mut backoff = Duration::from_secs(1);
        let mut warned = false;
        let mut packet = self.caps.packet();
        while let Ok(event) = connection.recv() {
            if self.caps.packet() != packet {
                packet = self.caps.packet();
                log::info!("mqtt: the largest command packet is now {packet} bytes; reconnecting to apply it");
                connection.eventloop.mqtt_options.set_max_packet_size(packet, MAX_OUTGOING);
                connection.eventloop.clean();
            }
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
                // After the DISCONNECT the session reads on until the
                // broker closes it: closed with acknowledgements still
                // unread, the socket would be reset, the broker would drop
                // what it had not read yet (a final `stopped` among it) and
                // publish the will.
                Ok(_) => {}
                Err(e) => {
                    self.out.counters.connected.store(false, Ordering::Relaxed);
                    if self.stopping() {
                        break;
                    }
                    if !std::mem::replace(&mut warned, true) {
                        let what = describe(&e, &self.endpoint, self.tls);
                        log::warn!("{what}; retrying with backoff up to {:?}", self.reconnect_max);
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

/// What a failed connection means and what to do about it. A broker that
/// refuses the box's certificate shows up as a TLS alert or a reset right
/// after the handshake, so with TLS on those point at the TLS files.
fn describe(e: &rumqttc::ConnectionError, endpoint: &str, tls: bool) -> String {
    use rumqttc::ConnectionError as E;
    let text = e.to_string();
    let tls_trouble = tls
        && (matches!(e, E::Tls(_))
            || ["alert", "certificate", "handshake", "reset", "closed"]
                .iter()
                .any(|w| text.to_lowercase().contains(w)));
    match e {
        E::ConnectionRefused(code) => format!(
            "the MQTT broker at {endpoint} refused the connection ({code:?}): check mqtt.username and \
             mqtt.password_file"
        ),
        _ if tls_trouble => format!(
            "the TLS session with the MQTT broker at {endpoint} failed ({e}): check mqtt.ca_file against the \
             broker's certificate, and mqtt.cert_file and mqtt.key_file against the CA the broker requires"
        ),
        E::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("no MQTT broker at {endpoint} ({e}): install mosquitto or set mqtt.host")
        }
        _ => format!("the MQTT connection to {endpoint} failed ({e})"),
    }
}

fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
    }
}

/// Whether the thread ended by `deadline`.
fn join_until(handle: JoinHandle<()>, deadline: Instant) -> bool {
    while !handle.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let finished = handle.is_finished();
    if finished {
        let _ = handle.join();
    }
    finished
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
            // The DISCONNECT waits for room behind what is queued: dropped
            // on a full queue, the process would exit without it and the
            // broker would publish the will (`offline`) after `stopped`. It
            // cannot hang: the connection thread, which drains the queue,
            // drops it when it ends, and `Link::shutdown` waits no longer
            // than its grace.
            Next::Closed => {
                let _ = client.disconnect();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_connection_says_what_to_check() {
        use rumqttc::ConnectionError as E;
        let io = |kind, text: &str| E::Io(std::io::Error::new(kind, text.to_string()));
        let refused = io(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(describe(&refused, "127.0.0.1:1883", false).starts_with("no MQTT broker at 127.0.0.1:1883"));
        let alert = io(std::io::ErrorKind::InvalidData, "received fatal alert: UnknownCA");
        let hint = describe(&alert, "b:8883", true);
        assert!(hint.contains("TLS") && hint.contains("mqtt.cert_file"), "{hint}");
        let auth = E::ConnectionRefused(rumqttc::ConnectReturnCode::NotAuthorized);
        assert!(describe(&auth, "b:1883", false).contains("mqtt.password_file"));
    }

    #[test]
    fn debug_shows_the_user_and_never_the_password() {
        let settings = LinkSettings {
            host: "broker".into(),
            port: 1883,
            client_id: "box".into(),
            keep_alive: Duration::from_secs(5),
            credentials: Some(("fusiond".into(), "s3cret-passw0rd".into())),
            tls: None,
            caps: Arc::new(PayloadCaps::new(1 << 20)),
            reconnect_max: Duration::from_secs(2),
            client_queue: 8,
            ha_status: None,
        };
        let shown = format!("{settings:?} {settings:#?}");
        assert!(shown.contains("fusiond") && !shown.contains("s3cret"), "{shown}");
    }
}
