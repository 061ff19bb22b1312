//! A small MQTT 3.1.1 broker for boxes without one: loopback only, no
//! persistence, no authentication. It speaks rumqttc's own packet codec and
//! does what the daemon and a `mosquitto_sub` watcher need: QoS 0/1 (QoS 2
//! is acknowledged and delivered at QoS 1), retained messages, wildcards,
//! last wills and keep-alive.
//!
//! One reader and one writer thread per client; a slow subscriber's queue is
//! bounded and its QoS 0 messages are dropped when full.

use bytes::BytesMut;
use rumqttc::{
    matches, valid_filter, valid_topic, ConnAck, ConnectReturnCode, LastWill, Packet, PubAck, PubComp, PubRec, Publish,
    QoS, SubAck, SubscribeReasonCode, UnsubAck,
};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Largest packet accepted or sent.
const MAX_PACKET: usize = 32 * 1024 * 1024;
/// Messages queued per subscriber before QoS 0 ones are dropped.
const CLIENT_QUEUE: usize = 512;

struct Client {
    client_id: String,
    tx: SyncSender<Packet>,
    subs: Vec<(String, QoS)>,
    stream: TcpStream,
}

#[derive(Default)]
struct State {
    clients: HashMap<u64, Client>,
    retained: HashMap<String, Publish>,
}

struct Shared {
    state: Mutex<State>,
    next_id: AtomicU64,
    stopped: AtomicBool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores (or clears) a retained message and delivers to subscribers.
    fn route(&self, mut publish: Publish) {
        let mut s = self.lock();
        if publish.retain {
            if publish.payload.is_empty() {
                s.retained.remove(&publish.topic);
            } else {
                s.retained.insert(publish.topic.clone(), publish.clone());
            }
        }
        // Live deliveries carry retain = false (MQTT 3.1.1 §3.3.1.3).
        publish.retain = false;
        for client in s.clients.values() {
            if let Some(qos) = granted(&client.subs, &publish.topic) {
                deliver(client, &publish, lower(qos, publish.qos));
            }
        }
    }
}

fn lower(a: QoS, b: QoS) -> QoS {
    if (a as u8) < (b as u8) {
        a
    } else {
        b
    }
}

fn granted(subs: &[(String, QoS)], topic: &str) -> Option<QoS> {
    subs.iter().filter(|(f, _)| matches(topic, f)).map(|(_, q)| *q).max_by_key(|q| *q as u8)
}

fn deliver(client: &Client, publish: &Publish, qos: QoS) {
    let mut p = publish.clone();
    p.qos = if qos == QoS::ExactlyOnce { QoS::AtLeastOnce } else { qos };
    // Packet ids only need to be unique among unacknowledged messages; the
    // broker does not redeliver, so any non-zero id does.
    p.pkid = if p.qos == QoS::AtMostOnce { 0 } else { 1 };
    p.dup = false;
    match client.tx.try_send(Packet::Publish(p)) {
        Ok(()) | Err(TrySendError::Disconnected(_)) => {}
        Err(TrySendError::Full(_)) => log::debug!("broker: client {} is slow; dropped a message", client.client_id),
    }
}

/// The running broker; it stops when dropped.
pub struct Broker {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Broker {
    /// Listens on `addr` (use port 0 for any free port).
    pub fn start(addr: SocketAddr) -> std::io::Result<Broker> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shared =
            Arc::new(Shared { state: Mutex::default(), next_id: AtomicU64::new(1), stopped: AtomicBool::new(false) });
        let s = shared.clone();
        std::thread::Builder::new().name("broker-accept".into()).spawn(move || {
            for stream in listener.incoming() {
                if s.stopped.load(Ordering::Relaxed) {
                    break;
                }
                match stream {
                    Ok(stream) => {
                        let s = s.clone();
                        let _ =
                            std::thread::Builder::new().name("broker-client".into()).spawn(move || serve(&s, stream));
                    }
                    Err(e) => log::warn!("broker: accept failed: {e}"),
                }
            }
        })?;
        Ok(Broker { addr, shared })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::Relaxed);
        // Wake the accept loop, then cut every client.
        let _ = TcpStream::connect(self.addr);
        for c in self.shared.lock().clients.values() {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }
}

/// Reads one packet, buffering partial reads in `buf`.
fn read_packet(stream: &mut TcpStream, buf: &mut BytesMut) -> Result<Packet, String> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match Packet::read(buf, MAX_PACKET) {
            Ok(p) => return Ok(p),
            Err(rumqttc::Error::InsufficientBytes(_)) => {}
            Err(e) => return Err(format!("malformed packet: {e:?}")),
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err("connection closed".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn writer(mut stream: TcpStream, rx: Receiver<Packet>) {
    let mut out = BytesMut::new();
    while let Ok(packet) = rx.recv() {
        out.clear();
        let close = packet == Packet::Disconnect;
        if packet.write(&mut out, MAX_PACKET).is_err() || stream.write_all(&out).is_err() || close {
            break;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

fn serve(shared: &Shared, mut stream: TcpStream) {
    if shared.stopped.load(Ordering::Relaxed) {
        return;
    }
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = BytesMut::new();
    let mut connect = match read_packet(&mut stream, &mut buf) {
        Ok(Packet::Connect(c)) => c,
        _ => return,
    };
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    // An empty client id asks the broker for a unique one (§3.1.3.1);
    // mosquitto_sub and mosquitto_pub send one.
    if connect.client_id.is_empty() {
        connect.client_id = format!("auto-{id}");
    }
    let (tx, rx) = sync_channel(CLIENT_QUEUE);
    let Ok(write_half) = stream.try_clone() else { return };
    let Ok(kill_half) = stream.try_clone() else { return };
    let writer = std::thread::spawn(move || writer(write_half, rx));
    // Keep-alive: the spec allows one and a half periods of silence.
    let keep_alive = Duration::from_millis(connect.keep_alive as u64 * 1500);
    let _ = stream.set_read_timeout((!keep_alive.is_zero()).then_some(keep_alive));
    {
        let mut s = shared.lock();
        // A second connection with the same client id takes over (§3.1.4).
        let taken: Vec<u64> =
            s.clients.iter().filter(|(_, c)| c.client_id == connect.client_id).map(|(k, _)| *k).collect();
        for k in taken {
            if let Some(old) = s.clients.remove(&k) {
                let _ = old.stream.shutdown(Shutdown::Both);
            }
        }
        let client =
            Client { client_id: connect.client_id.clone(), tx: tx.clone(), subs: Vec::new(), stream: kill_half };
        s.clients.insert(id, client);
    }
    let _ = tx.send(Packet::ConnAck(ConnAck::new(ConnectReturnCode::Success, false)));
    log::debug!("broker: client `{}` connected", connect.client_id);
    let clean = session(shared, id, &mut stream, &mut buf, &tx);
    let removed = shared.lock().clients.remove(&id);
    drop(tx);
    // A client that vanished without DISCONNECT gets its last will published,
    // unless another connection took its id over (that one is alive).
    if let (false, Some(will)) = (clean, connect.last_will.clone()) {
        if removed.is_some() {
            shared.route(will_publish(will));
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    let _ = writer.join();
}

fn will_publish(will: LastWill) -> Publish {
    let mut p = Publish::from_bytes(will.topic, will.qos, will.message);
    p.retain = will.retain;
    p
}

/// Serves one connected client; true when it ended with DISCONNECT.
fn session(shared: &Shared, id: u64, stream: &mut TcpStream, buf: &mut BytesMut, tx: &SyncSender<Packet>) -> bool {
    loop {
        let packet = match read_packet(stream, buf) {
            Ok(p) => p,
            Err(_) => return false,
        };
        match packet {
            Packet::Publish(p) => {
                if !valid_topic(&p.topic) {
                    return false;
                }
                match p.qos {
                    QoS::AtMostOnce => {}
                    QoS::AtLeastOnce => {
                        let _ = tx.send(Packet::PubAck(PubAck::new(p.pkid)));
                    }
                    QoS::ExactlyOnce => {
                        let _ = tx.send(Packet::PubRec(PubRec::new(p.pkid)));
                    }
                }
                shared.route(p);
            }
            Packet::PubRel(r) => {
                let _ = tx.send(Packet::PubComp(PubComp::new(r.pkid)));
            }
            Packet::Subscribe(sub) => {
                let mut codes = Vec::with_capacity(sub.filters.len());
                let mut retained = Vec::new();
                {
                    let mut s = shared.lock();
                    for f in &sub.filters {
                        if !valid_filter(&f.path) {
                            codes.push(SubscribeReasonCode::Failure);
                            continue;
                        }
                        let qos = if f.qos == QoS::ExactlyOnce { QoS::AtLeastOnce } else { f.qos };
                        if let Some(c) = s.clients.get_mut(&id) {
                            c.subs.retain(|(p, _)| p != &f.path);
                            c.subs.push((f.path.clone(), qos));
                        }
                        codes.push(SubscribeReasonCode::Success(qos));
                        retained.extend(
                            s.retained.values().filter(|r| matches(&r.topic, &f.path)).map(|r| (r.clone(), qos)),
                        );
                    }
                }
                let _ = tx.send(Packet::SubAck(SubAck::new(sub.pkid, codes)));
                for (mut r, qos) in retained {
                    r.qos = lower(qos, r.qos);
                    r.pkid = if r.qos == QoS::AtMostOnce { 0 } else { 1 };
                    let _ = tx.send(Packet::Publish(r));
                }
            }
            Packet::Unsubscribe(u) => {
                if let Some(c) = shared.lock().clients.get_mut(&id) {
                    c.subs.retain(|(p, _)| !u.topics.contains(p));
                }
                let _ = tx.send(Packet::UnsubAck(UnsubAck::new(u.pkid)));
            }
            Packet::PingReq => {
                let _ = tx.send(Packet::PingResp);
            }
            Packet::Disconnect => return true,
            // Acknowledgements of our deliveries need no bookkeeping.
            Packet::PubAck(_) | Packet::PubRec(_) | Packet::PubComp(_) => {}
            _ => return false,
        }
    }
}
