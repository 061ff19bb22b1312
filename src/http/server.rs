//! The accept loop. Each connection is served on its own thread, at most
//! `http.max_clients` at once (stream clients count); one more is answered
//! 503 straight away and closed. A connection holds its slot only as long
//! as [`wire::Limits`] allow a request to take, or as long as a stream
//! client keeps reading, so slow or idle clients free their slots.

use super::guard::Guard;
use super::handlers::{self, Access};
use super::wire::{self, Limits, Response};
use super::{route, HttpState, Route};
use crate::control::Sender;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Server {
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    pub addr: SocketAddr,
}

/// What every connection is served with.
struct Shared {
    state: Arc<HttpState>,
    access: Access,
    limits: Limits,
    max_clients: usize,
    active: AtomicUsize,
}

/// How the server serves.
#[derive(Debug, Clone)]
pub struct Options {
    /// Connections served at once (`http.max_clients`).
    pub max_clients: usize,
    /// The bearer token state-changing requests need.
    pub token: Option<String>,
    pub limits: Limits,
    /// The box's hostname, which `Host` may name (also with `.local`).
    pub hostname: String,
    /// Other names `Host` may give (`http.allowed_hosts`).
    pub allowed_hosts: Vec<String>,
    /// Other origins commands are taken from (`http.allowed_origins`).
    pub allowed_origins: Vec<String>,
}

impl Server {
    /// Listens on `listen` and serves `state` until dropped.
    pub fn start(listen: SocketAddr, options: Options, state: Arc<HttpState>) -> Result<Server, String> {
        let listener = TcpListener::bind(listen)
            .map_err(|e| format!("http: cannot listen on {listen}: {e}; free the port or change http.listen"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            state,
            access: Access::new(
                options.token,
                Guard::new(addr.ip(), &options.hostname, &options.allowed_hosts, &options.allowed_origins),
            ),
            limits: options.limits,
            max_clients: options.max_clients,
            active: AtomicUsize::new(0),
        });
        let st = stop.clone();
        let accept = std::thread::Builder::new()
            .name("http".into())
            .spawn(move || accept_loop(&listener, &st, &shared))
            .map_err(|e| e.to_string())?;
        log::info!("http: live page, API, health, metrics and MJPEG stream on http://{addr}/");
        Ok(Server { stop, accept: Some(accept), addr })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the blocking accept; an unspecified address is reached on
        // loopback.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
    }
}

/// Frees a connection's slot however its thread ends.
struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

fn accept_loop(listener: &TcpListener, stop: &AtomicBool, shared: &Arc<Shared>) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let conn = match conn {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors, say: wait rather than spin.
                log::warn!("http: accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if shared.active.fetch_add(1, Ordering::Relaxed) >= shared.max_clients {
            shared.active.fetch_sub(1, Ordering::Relaxed);
            busy(conn, shared.max_clients);
            continue;
        }
        let slot = Slot(shared.clone());
        let spawned = std::thread::Builder::new().name("http-conn".into()).spawn(move || serve(conn, &slot.0));
        if let Err(e) = spawned {
            log::warn!("http: cannot start a connection thread: {e}");
        }
    }
}

/// 503 without reading the request: the answer fits the socket buffer, so
/// a non-blocking write never holds up the accept loop.
fn busy(mut conn: TcpStream, max_clients: usize) {
    let reason = format!("more than {max_clients} clients at once (http.max_clients); try again");
    let answer = handlers::error(503, &reason).with("Retry-After", "1");
    let _ = conn.set_nonblocking(true);
    let _ = conn.write_all(&answer.head(Some(answer.body.len())));
    let _ = conn.write_all(&answer.body);
}

/// Reads and drops what the client still sends (a refused body) for a
/// moment after the answer, so that closing does not reset the connection
/// before the client has read the answer.
fn linger(conn: &mut TcpStream) {
    let _ = conn.shutdown(std::net::Shutdown::Write);
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    let (mut sink, mut left) = ([0u8; 4096], 256 * 1024usize);
    while let Some(wait) = deadline.checked_duration_since(std::time::Instant::now()).filter(|w| !w.is_zero()) {
        if left == 0 || conn.set_read_timeout(Some(wait)).is_err() {
            break;
        }
        match conn.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

fn serve(mut conn: TcpStream, shared: &Shared) {
    if respond(&mut conn, &shared.limits, &shared.state, &shared.access) == Answered::Refused {
        linger(&mut conn);
    }
}

/// How [`respond`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// A request was read and handled.
    Handled,
    /// The request could not be read (too big, too slow, malformed) and
    /// was answered with the reason.
    Refused,
    /// The client went away before a whole request arrived.
    Gone,
}

/// Reads one request from `conn` within `limits` and answers it: the whole
/// life of a connection but the socket's own handling. The head is judged
/// ([`Access::admit`]) before any body is read, and only a command's body
/// is read, up to its feature's payload cap.
pub fn respond(conn: &mut impl wire::Conn, limits: &Limits, state: &Arc<HttpState>, access: &Access) -> Answered {
    let head = match wire::read_head(conn, limits) {
        Ok(h) => h,
        Err(refusal) => return refuse(conn, refusal),
    };
    let route = route(&head.request.method, &head.request.target);
    if let Err(answer) = access.admit(&head.request, route) {
        return answer_refusal(conn, &answer);
    }
    let unread = head.length > 0;
    let request = match route {
        Route::Command(feature) => match wire::read_body(conn, head, state.max_body(feature), limits) {
            Ok(r) => r,
            Err(refusal) => return refuse(conn, refusal),
        },
        _ => head.request,
    };
    // A client that stops reading (a stalled stream) is dropped after this.
    let _ = conn.set_timeout(Duration::from_secs(10));
    let from =
        Sender { who: format!("http peer {}, {}", conn.peer(), access.token_id()), authenticated: access.has_token() };
    if let Err(e) = handlers::handle(&request, route, state, &from, conn) {
        log::debug!("http: {} {}: {e}", request.method, request.target);
    }
    match unread && !matches!(route, Route::Command(_)) {
        // A body no route reads is left to `linger`.
        true => Answered::Refused,
        false => Answered::Handled,
    }
}

/// Answers a request that could not be read (`None`: the client is gone).
fn refuse(conn: &mut impl wire::Conn, refusal: Option<wire::Refusal>) -> Answered {
    match refusal {
        Some(r) => answer_refusal(conn, &handlers::error(r.status, &r.reason)),
        None => Answered::Gone,
    }
}

fn answer_refusal(conn: &mut impl wire::Conn, answer: &Response) -> Answered {
    let _ = conn.set_timeout(Duration::from_secs(5));
    let _ = answer.write(conn, false);
    Answered::Refused
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
