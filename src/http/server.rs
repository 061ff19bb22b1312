//! The accept loop and the handlers. One thread takes requests; each is
//! answered on its own short-lived thread, at most `http.max_clients` at
//! once (the rest get 503 at once), so a stream client or a slow reader
//! never holds up another request.

use super::{route, CommandOutcome, HttpState, Route};
use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tiny_http::{Header, Request, Response, StatusCode};

const BOUNDARY: &str = "fusiondframe";

pub struct Server {
    server: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    pub addr: SocketAddr,
}

impl Server {
    /// Listens on `listen` and serves `state` until dropped.
    pub fn start(listen: SocketAddr, max_clients: usize, state: Arc<HttpState>) -> Result<Server, String> {
        let server = tiny_http::Server::http(listen)
            .map_err(|e| format!("http: cannot listen on {listen}: {e}; free the port or change http.listen"))?;
        let server = Arc::new(server);
        let addr = server.server_addr().to_ip().unwrap_or(listen);
        let stop = Arc::new(AtomicBool::new(false));
        let (srv, st) = (server.clone(), stop.clone());
        let accept = std::thread::Builder::new()
            .name("http".into())
            .spawn(move || accept_loop(&srv, &st, max_clients, &state))
            .map_err(|e| e.to_string())?;
        log::info!("http: health, metrics, snapshot and MJPEG stream on http://{addr}/");
        Ok(Server { server, stop, accept: Some(accept), addr })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.server.unblock();
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
    }
}

fn accept_loop(server: &tiny_http::Server, stop: &AtomicBool, max_clients: usize, state: &Arc<HttpState>) {
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let request = match server.recv_timeout(Duration::from_millis(250)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                log::warn!("http: {e}");
                continue;
            }
        };
        if active.load(Ordering::Relaxed) >= max_clients {
            let busy = error(503, &format!("more than {max_clients} clients (http.max_clients)"));
            let _ = request.respond(busy);
            continue;
        }
        active.fetch_add(1, Ordering::Relaxed);
        let (a, s) = (active.clone(), state.clone());
        let spawned = std::thread::Builder::new().name("http-request".into()).spawn(move || {
            handle(request, &s);
            a.fetch_sub(1, Ordering::Relaxed);
        });
        if let Err(e) = spawned {
            active.fetch_sub(1, Ordering::Relaxed);
            log::warn!("http: cannot start a request thread: {e}");
        }
    }
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .unwrap_or_else(|_| Header::from_bytes(&b"X-Invalid"[..], &b"1"[..]).expect("a constant header is valid"))
}

type Body = Response<std::io::Cursor<Vec<u8>>>;

fn json(code: u16, value: &impl serde::Serialize) -> Body {
    let body = serde_json::to_string(value).unwrap_or_default();
    Response::from_string(body).with_status_code(code).with_header(header("Content-Type", "application/json"))
}

/// `{"error": message}` with `code`.
fn error(code: u16, message: &str) -> Body {
    json(code, &serde_json::json!({ "error": message }))
}

/// `POST /api/<feature>`: the body is the command's payload, as on MQTT.
fn command(mut request: Request, feature: &str, state: &HttpState) -> std::io::Result<()> {
    let limit = state.max_body;
    let too_big = || error(413, &format!("a command body is at most {limit} bytes"));
    if request.body_length().is_some_and(|n| n > limit) {
        return request.respond(too_big());
    }
    let mut body = Vec::new();
    let read = request.as_reader().take(limit as u64 + 1).read_to_end(&mut body);
    if read.is_err() || body.len() > limit {
        return request.respond(too_big());
    }
    match state.command(feature, body, Duration::from_secs(30)) {
        CommandOutcome::Taken => request.respond(json(200, &serde_json::json!({ "ok": true }))),
        CommandOutcome::Refused(e) => request.respond(json(400, &e)),
        CommandOutcome::Busy => request.respond(error(503, "the control loop is busy; try again")),
    }
}

fn snapshot(request: Request, state: &HttpState) -> std::io::Result<()> {
    match state.hub.snapshot(Duration::from_secs(5), Duration::from_secs(10)) {
        Some(jpeg) => {
            request.respond(Response::from_data(jpeg.as_slice()).with_header(header("Content-Type", "image/jpeg")))
        }
        None => request.respond(error(503, "no fused frame in the last 10 s; is the camera streaming?")),
    }
}

fn stream(request: Request, state: &HttpState) -> std::io::Result<()> {
    let reader = Mjpeg { _watching: state.hub.watch(), hub: state.hub.clone(), seq: 0, part: Vec::new(), at: 0 };
    let headers = vec![
        header("Content-Type", &format!("multipart/x-mixed-replace; boundary={BOUNDARY}")),
        header("Cache-Control", "no-store"),
    ];
    request.respond(Response::new(StatusCode(200), headers, reader, None, None))
}

fn handle(request: Request, state: &HttpState) {
    let method = request.method().as_str().to_string();
    let result = match route(&method, request.url()) {
        Route::Health => {
            let (ok, health) = state.health();
            request.respond(json(if ok { 200 } else { 503 }, &health))
        }
        Route::Metrics => {
            let kind = header("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
            request.respond(Response::from_string(state.metrics()).with_header(kind))
        }
        Route::Snapshot => snapshot(request, state),
        Route::Stream => stream(request, state),
        Route::State => request.respond(json(200, &state.state())),
        Route::Command(feature) => command(request, feature, state),
        Route::MethodNotAllowed(allowed) => {
            let refusal = error(405, &format!("{method} is not allowed here; use {allowed}"));
            request.respond(refusal.with_header(header("Allow", allowed)))
        }
        Route::NotFound => request.respond(error(404, "no such path")),
    };
    // A client that went away mid-answer is normal for a stream.
    if let Err(e) = result {
        log::debug!("http: {e}");
    }
}

/// The MJPEG body: one multipart part per new frame, for as long as the
/// client reads and the daemon runs.
struct Mjpeg {
    hub: Arc<super::FrameHub>,
    /// Counts this client as watching for as long as the body lives.
    _watching: super::hub::Watching,
    seq: u64,
    part: Vec<u8>,
    at: usize,
}

impl Read for Mjpeg {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.part.len() {
            match self.hub.next_after(self.seq, Duration::from_secs(1)) {
                Some((seq, jpeg)) => {
                    self.seq = seq;
                    self.part.clear();
                    let head =
                        format!("--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {}\r\n\r\n", jpeg.len());
                    self.part.extend_from_slice(head.as_bytes());
                    self.part.extend_from_slice(&jpeg);
                    self.part.extend_from_slice(b"\r\n");
                    self.at = 0;
                }
                None if self.hub.is_closed() => return Ok(0),
                None => {}
            }
        }
        let n = buf.len().min(self.part.len() - self.at);
        buf[..n].copy_from_slice(&self.part[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
