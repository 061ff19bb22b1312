//! What each route answers, and who may ask ([`Access`]: the [`Guard`]'s
//! Host, Origin and Content-Type checks, then the bearer token a command
//! needs when `http.token_file` sets one), judged on the head alone.

use super::feed::Item;
use super::guard::Guard;
use super::wire::{Refusal, Request, Response};
use super::{CommandOutcome, HttpState, Route};
use crate::control::Sender;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

const BOUNDARY: &str = "fusiondframe";
const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

/// Who may read and who may change state.
pub struct Access {
    token: Option<String>,
    guard: Guard,
}

impl Access {
    pub fn new(token: Option<String>, guard: Guard) -> Access {
        Access { token, guard }
    }

    /// Whether `request` (its head) may go to `route`: the answer to give
    /// instead when not. Commands pass the guard's origin and content-type
    /// checks and then the token; every request passes the Host check.
    pub fn admit(&self, request: &Request, route: Route) -> Result<(), Response> {
        let refused = |r: Refusal| error(r.status, &r.reason);
        self.guard.host(request).map_err(refused)?;
        if !matches!(route, Route::Command(_)) {
            return Ok(());
        }
        self.guard.command(request).map_err(refused)?;
        if !self.allows(request.header("Authorization")) {
            let reason = "this request changes state: send Authorization: Bearer <the token in http.token_file>";
            return Err(error(401, reason).with("WWW-Authenticate", "Bearer realm=\"fusiond\""));
        }
        Ok(())
    }

    /// Whether commands need the token (so a sender is authenticated).
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// The token's id for the audit log: the first 8 hex digits of its
    /// SHA-256 (never the token), or `no token`.
    pub fn token_id(&self) -> String {
        match &self.token {
            Some(t) => format!("token {}", &crate::catalog::sha256_hex(t.as_bytes())[..8]),
            None => "no token".into(),
        }
    }

    /// Whether `authorization` (the header's value) carries the token; any
    /// request does when there is none. The comparison takes as long
    /// whatever the bytes, so timing does not reveal a prefix.
    pub fn allows(&self, authorization: Option<&str>) -> bool {
        let Some(token) = &self.token else { return true };
        let offered = authorization.and_then(|a| a.strip_prefix("Bearer ")).unwrap_or("").trim();
        constant_time_eq(offered.as_bytes(), token.as_bytes())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, y) in b.iter().enumerate() {
        let x = a.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

fn json(status: u16, value: &impl serde::Serialize) -> Response {
    Response::new(status, "application/json", serde_json::to_vec(value).unwrap_or_default())
}

/// `{"error": message}` with `status`.
pub fn error(status: u16, message: &str) -> Response {
    json(status, &serde_json::json!({ "error": message }))
}

/// Answers `request` on `route`, once [`Access::admit`] let it through.
/// `from` says who sent it (the audit log).
pub fn handle(
    request: &Request,
    route: Route,
    state: &Arc<HttpState>,
    from: &Sender,
    conn: &mut impl Write,
) -> io::Result<()> {
    let head_only = request.method == "HEAD";
    let answer = match route {
        Route::Page => Response::new(200, "text/html; charset=utf-8", PAGE.as_bytes().to_vec())
            .with("Cache-Control", "no-store")
            // blob: only for the chosen photo's preview, made in the page.
            .with("Content-Security-Policy", "default-src 'self'; img-src 'self' blob:"),
        Route::Script => Response::new(200, "text/javascript; charset=utf-8", SCRIPT.as_bytes().to_vec())
            .with("Cache-Control", "no-store"),
        Route::Style => {
            Response::new(200, "text/css; charset=utf-8", STYLE.as_bytes().to_vec()).with("Cache-Control", "no-store")
        }
        Route::Health => {
            let (ok, health) = state.health();
            json(if ok { 200 } else { 503 }, &health)
        }
        Route::Metrics => Response::new(200, "text/plain; version=0.0.4; charset=utf-8", state.metrics().into_bytes()),
        Route::Snapshot => snapshot(state),
        Route::Thumbnail => thumbnail(request, state),
        Route::Stream => return stream(state, conn),
        Route::Events => return events(state, conn),
        Route::State => json(200, &state.state()),
        Route::Command(feature) => command(request, feature, state, from),
        Route::MethodNotAllowed(allowed) => {
            let refusal = error(405, &format!("{} is not allowed here; use {allowed}", request.method));
            refusal.with("Allow", allowed)
        }
        Route::NotFound => error(404, "no such path; the API is described on /"),
    };
    answer.write(conn, head_only)
}

/// `POST /api/<feature>`: the body is the command's payload, as on MQTT.
fn command(request: &Request, feature: &str, state: &HttpState, from: &Sender) -> Response {
    match state.command(feature, request.body.clone(), from.clone(), Duration::from_secs(30)) {
        CommandOutcome::Taken => json(200, &serde_json::json!({ "ok": true })),
        CommandOutcome::Refused(e) => json(400, &e),
        CommandOutcome::Busy => error(503, "the control loop is busy; try again"),
    }
}

/// `GET /api/bank/<name>.jpg`: the face a bank name was saved from.
fn thumbnail(request: &Request, state: &HttpState) -> Response {
    let path = request.target.split(['?', '#']).next().unwrap_or("");
    let name = path.strip_prefix("/api/bank/").and_then(|n| n.strip_suffix(".jpg")).unwrap_or("");
    let file = state
        .bank_dir()
        .filter(|_| crate::mqtt::command::identity_name(name))
        .map(|dir| dir.join(format!("{name}.jpg")));
    match file.and_then(|f| std::fs::read(f).ok()) {
        Some(jpeg) => Response::new(200, "image/jpeg", jpeg).with("Cache-Control", "no-store"),
        None => error(404, "no thumbnail for that face bank name"),
    }
}

fn snapshot(state: &HttpState) -> Response {
    match state.hub.snapshot(Duration::from_secs(5), Duration::from_secs(10)) {
        Some(jpeg) => Response::new(200, "image/jpeg", jpeg.to_vec()).with("Cache-Control", "no-store"),
        None => error(503, "no fused frame in the last 10 s; is the camera streaming?"),
    }
}

/// One multipart part per new frame, for as long as the client reads and
/// the daemon runs; a client that stops reading hits the write timeout.
fn stream(state: &Arc<HttpState>, conn: &mut impl Write) -> io::Result<()> {
    let _watching = state.hub.watch();
    let kind = format!("multipart/x-mixed-replace; boundary={BOUNDARY}");
    let head = Response::new(200, &kind, Vec::new()).with("Cache-Control", "no-store");
    conn.write_all(&head.head(None))?;
    conn.flush()?;
    let mut seq = 0;
    while !state.hub.is_closed() {
        let Some((next, jpeg)) = state.hub.next_after(seq, Duration::from_secs(1)) else { continue };
        seq = next;
        write!(conn, "--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {}\r\n\r\n", jpeg.len())?;
        conn.write_all(&jpeg)?;
        conn.write_all(b"\r\n")?;
        conn.flush()?;
    }
    Ok(())
}

/// Server-sent events for as long as the client reads and the daemon
/// runs: `faces` (the newest `faces` message), `event` and `error` (each
/// with its time), and a comment every 15 s of quiet so that proxies keep
/// the connection.
fn events(state: &Arc<HttpState>, conn: &mut impl Write) -> io::Result<()> {
    let head = Response::new(200, "text/event-stream", Vec::new()).with("Cache-Control", "no-store");
    conn.write_all(&head.head(None))?;
    conn.flush()?;
    let mut at = state.feed.now();
    let mut quiet = std::time::Instant::now();
    while !state.hub.is_closed() {
        match state.feed.next(&mut at, Duration::from_secs(1)) {
            Some(Item::Faces(json)) => write!(conn, "event: faces\ndata: {json}\n\n")?,
            Some(Item::Logged(l)) => {
                let data = serde_json::to_string(&l).unwrap_or_default();
                write!(conn, "event: {}\ndata: {data}\n\n", l.kind)?;
            }
            None if quiet.elapsed() >= Duration::from_secs(15) => conn.write_all(b": quiet\n\n")?,
            None => continue,
        }
        conn.flush()?;
        quiet = std::time::Instant::now();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_needed_whole_and_only_when_set() {
        let guard = || Guard::new([127, 0, 0, 1].into(), "box", &[], &[]);
        assert!(Access::new(None, guard()).allows(None));
        let a = Access::new(Some("s3cret-token-0123456789".into()), guard());
        assert!(a.allows(Some("Bearer s3cret-token-0123456789")));
        for bad in [None, Some(""), Some("Bearer "), Some("Bearer s3cret"), Some("s3cret-token-0123456789")] {
            assert!(!a.allows(bad), "{bad:?}");
        }
        assert!(!a.allows(Some("Bearer s3cret-token-01234567890")), "a longer token");
        assert!(!constant_time_eq(b"", b"x") && constant_time_eq(b"", b""));
    }
}
