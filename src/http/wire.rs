//! HTTP/1.1 framing over one connection, with hard limits: the request
//! head must arrive whole within `head_time` and `head_bytes`, a body only
//! with `Content-Length`, at most the caller's limit, within `body_time`.
//! The head is read first ([`read_head`]) so the caller can judge it before
//! any body is read ([`read_body`]).
//! Every answer closes the connection, so there is no keep-alive state for
//! a client to hold open. `httparse` parses; this file only frames.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// The bounds a connection is read under.
#[derive(Debug, Clone)]
pub struct Limits {
    pub head_bytes: usize,
    pub head_time: Duration,
    pub body_time: Duration,
}

impl Limits {
    pub fn new() -> Limits {
        Limits { head_bytes: 8 * 1024, head_time: Duration::from_secs(10), body_time: Duration::from_secs(30) }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::new()
    }
}

/// A request that was read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path and query as sent.
    pub target: String,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Why a request could not be read: the status it is answered with and a
/// reason for the client; `None` when the client went away (nothing to say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub reason: String,
}

fn refuse(status: u16, reason: impl Into<String>) -> Option<Refusal> {
    Some(Refusal { status, reason: reason.into() })
}

/// A request's head, read whole, and the bytes of its body that came with
/// it; [`read_body`] reads the rest once the head has been judged.
#[derive(Debug)]
pub struct Head {
    pub request: Request,
    /// The body's length (`Content-Length`; 0 without one).
    pub length: usize,
    early: Vec<u8>,
}

/// Reads one request head from `conn`. `Err(None)`: the client closed or
/// reset the connection before a whole head arrived.
pub fn read_head(conn: &mut impl Conn, limits: &Limits) -> Result<Head, Option<Refusal>> {
    let deadline = Instant::now() + limits.head_time;
    let mut buf = vec![0u8; limits.head_bytes];
    let mut filled = 0;
    let (head, request) = loop {
        if filled == buf.len() {
            return Err(refuse(431, format!("the request head is over {} bytes", limits.head_bytes)));
        }
        let n = read_until(conn, &mut buf[filled..], deadline, "the request head")?;
        filled += n;
        if let Some(parsed) = parse_head(&buf[..filled])? {
            break parsed;
        }
    };
    let length = body_length(&request)?;
    let early = buf[head..filled.min(head.saturating_add(length))].to_vec();
    Ok(Head { request, length, early })
}

/// Reads `head`'s body, at most `max_body` bytes (else 413, before any of
/// it is read), within `limits.body_time`.
pub fn read_body(
    conn: &mut impl Conn,
    head: Head,
    max_body: usize,
    limits: &Limits,
) -> Result<Request, Option<Refusal>> {
    let Head { mut request, length, early } = head;
    if length > max_body {
        return Err(refuse(413, format!("a body here is at most {max_body} bytes")));
    }
    let mut have = early.len();
    request.body = vec![0; length];
    request.body[..have].copy_from_slice(&early);
    let deadline = Instant::now() + limits.body_time;
    while have < length {
        have += read_until(conn, &mut request.body[have..], deadline, "the body")?;
    }
    Ok(request)
}

/// Reads one whole request, its body up to `max_body` bytes.
pub fn read_request(conn: &mut impl Conn, limits: &Limits, max_body: usize) -> Result<Request, Option<Refusal>> {
    let head = read_head(conn, limits)?;
    read_body(conn, head, max_body, limits)
}

#[cfg(test)]
impl Request {
    /// A request with `headers` and no body, as [`read_head`] would give.
    pub fn new(method: &str, target: &str, headers: &[(&str, &str)]) -> Request {
        let headers = headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        Request { method: method.into(), target: target.into(), headers, body: Vec::new() }
    }
}

/// The head's length and the request, or `None` while it is incomplete.
fn parse_head(bytes: &[u8]) -> Result<Option<(usize, Request)>, Option<Refusal>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut parsed = httparse::Request::new(&mut headers);
    let head = match parsed.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(refuse(431, "more than 32 headers")),
        Err(e) => return Err(refuse(400, format!("malformed request: {e}"))),
    };
    let headers =
        parsed.headers.iter().map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned())).collect();
    let request = Request {
        method: parsed.method.unwrap_or_default().to_string(),
        target: parsed.path.unwrap_or_default().to_string(),
        headers,
        body: Vec::new(),
    };
    Ok(Some((head, request)))
}

fn body_length(request: &Request) -> Result<usize, Option<Refusal>> {
    if request.header("Transfer-Encoding").is_some() {
        return Err(refuse(411, "chunked bodies are not taken; send Content-Length"));
    }
    match request.header("Content-Length") {
        None => Ok(0),
        Some(v) => v.trim().parse().map_err(|_| refuse(400, "Content-Length is not a number")),
    }
}

/// A connection's reads and writes under a timeout: a `TcpStream` here, a
/// scripted client in the tests.
pub trait Conn: Read + Write {
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()>;

    /// The client's address, for the audit log.
    fn peer(&self) -> String {
        "unknown".into()
    }
}

impl Conn for std::net::TcpStream {
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(timeout))?;
        self.set_write_timeout(Some(timeout))
    }

    fn peer(&self) -> String {
        self.peer_addr().map_or_else(|_| "unknown".into(), |a| a.to_string())
    }
}

/// One read that must end by `deadline`; 0 bytes is the client closing.
fn read_until(conn: &mut impl Conn, buf: &mut [u8], deadline: Instant, what: &str) -> Result<usize, Option<Refusal>> {
    let late = || refuse(408, format!("{what} did not arrive in time"));
    let left = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()).ok_or_else(late)?;
    conn.set_timeout(left).map_err(|_| None)?;
    match conn.read(buf) {
        Ok(0) => Err(None),
        Ok(n) => Ok(n),
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Err(late()),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(_) => Err(None),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        403 => "Forbidden",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// A whole answer: status, headers and body (left out for `HEAD`).
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, content_type: &str, body: Vec<u8>) -> Response {
        Response { status, headers: vec![("Content-Type", content_type.to_string())], body }
    }

    pub fn with(mut self, name: &'static str, value: &str) -> Response {
        self.headers.push((name, value.to_string()));
        self
    }

    /// The status line and headers; `length` when the body's size is known.
    pub fn head(&self, length: Option<usize>) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 {} {}\r\nConnection: close\r\n", self.status, reason(self.status));
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(n) = length {
            out.push_str(&format!("Content-Length: {n}\r\n"));
        }
        out.push_str("\r\n");
        out.into_bytes()
    }

    pub fn write(&self, conn: &mut impl Write, head_only: bool) -> io::Result<()> {
        conn.write_all(&self.head(Some(self.body.len())))?;
        if !head_only {
            conn.write_all(&self.body)?;
        }
        conn.flush()
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
