use super::*;

/// A client that sends `chunks` one read at a time, waiting `pause` before
/// each; past the end it times out (or closes, with `closes`).
struct Script {
    chunks: Vec<Vec<u8>>,
    pause: Duration,
    closes: bool,
    timeout: Duration,
    written: Vec<u8>,
}

fn script(chunks: &[&[u8]]) -> Script {
    let chunks = chunks.iter().map(|c| c.to_vec()).collect();
    Script { chunks, pause: Duration::ZERO, closes: false, timeout: Duration::ZERO, written: Vec::new() }
}

impl Read for Script {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.chunks.is_empty() {
            return match self.closes {
                true => Ok(0),
                false => Err(io::Error::new(io::ErrorKind::WouldBlock, "timed out")),
            };
        }
        if self.pause > self.timeout {
            std::thread::sleep(self.timeout);
            return Err(io::Error::new(io::ErrorKind::WouldBlock, "timed out"));
        }
        std::thread::sleep(self.pause);
        let chunk = &mut self.chunks[0];
        let n = buf.len().min(chunk.len());
        buf[..n].copy_from_slice(&chunk[..n]);
        chunk.drain(..n);
        if chunk.is_empty() {
            self.chunks.remove(0);
        }
        Ok(n)
    }
}

impl Write for Script {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Conn for Script {
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.timeout = timeout;
        Ok(())
    }
}

fn limits() -> Limits {
    Limits::new()
}

fn status(r: Result<Request, Option<Refusal>>) -> Option<u16> {
    r.err().flatten().map(|r| r.status)
}

#[test]
fn a_request_in_pieces_with_its_body() {
    let mut c = script(&[b"POST /api/blend?x HTTP/1.1\r\nHost: a\r\nconTent-length: 5\r\n", b"\r\n12", b"345"]);
    let r = read_request(&mut c, &limits(), 16).unwrap();
    assert_eq!((r.method.as_str(), r.target.as_str()), ("POST", "/api/blend?x"));
    assert_eq!(r.header("content-length"), Some("5"));
    assert_eq!(r.body, b"12345");
}

#[test]
fn oversized_heads_and_bodies_and_chunked_ones_are_refused_before_the_body_is_read() {
    let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(9000));
    assert_eq!(status(read_request(&mut script(&[big.as_bytes()]), &limits(), 16)), Some(431));
    let many: String = (0..40).map(|i| format!("X{i}: 1\r\n")).collect();
    let many = format!("GET / HTTP/1.1\r\n{many}\r\n");
    assert_eq!(status(read_request(&mut script(&[many.as_bytes()]), &limits(), 16)), Some(431));
    let long = b"POST /api/source HTTP/1.1\r\nContent-Length: 17\r\n\r\n";
    assert_eq!(status(read_request(&mut script(&[long]), &limits(), 16)), Some(413));
    let chunked = b"POST /api/source HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    assert_eq!(status(read_request(&mut script(&[chunked]), &limits(), 16)), Some(411));
    let nan = b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n";
    assert_eq!(status(read_request(&mut script(&[nan]), &limits(), 16)), Some(400));
}

#[test]
fn garbage_is_a_bad_request_and_a_client_that_leaves_gets_nothing() {
    assert_eq!(status(read_request(&mut script(&[b"\x16\x03\x01\x02\x00 hello\r\n\r\n"]), &limits(), 16)), Some(400));
    let mut gone = script(&[b"GET / HT"]);
    gone.closes = true;
    assert_eq!(read_request(&mut gone, &limits(), 16), Err(None));
}

#[test]
fn a_slow_client_gets_408_when_the_head_deadline_passes_however_it_trickles() {
    let limits = Limits { head_time: Duration::from_millis(80), ..limits() };
    let trickle: Vec<&[u8]> = b"GET / HTTP/1.1\r\nX-Slow: 1\r\n\r\n".chunks(1).collect();
    let mut slow = script(&trickle);
    slow.pause = Duration::from_millis(10);
    let started = Instant::now();
    assert_eq!(status(read_request(&mut slow, &limits, 16)), Some(408));
    assert!(started.elapsed() < Duration::from_millis(400), "refused at the deadline");
    let mut silent = script(&[b"GET / HTTP/1.1\r\n"]);
    assert_eq!(status(read_request(&mut silent, &limits, 16)), Some(408));
    let body_time = Limits { body_time: Duration::from_millis(30), ..limits.clone() };
    let mut stalled = script(&[b"POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\n12"]);
    assert_eq!(status(read_request(&mut stalled, &body_time, 16)), Some(408));
}

#[test]
fn responses_close_and_give_their_length() {
    let r = Response::new(404, "application/json", b"{}".to_vec()).with("Allow", "GET");
    let mut out = Vec::new();
    r.write(&mut out, false).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("HTTP/1.1 404 Not Found\r\nConnection: close\r\n"), "{text}");
    assert!(text.contains("Allow: GET\r\n") && text.ends_with("Content-Length: 2\r\n\r\n{}"), "{text}");
    let mut head = Vec::new();
    r.write(&mut head, true).unwrap();
    assert!(String::from_utf8(head).unwrap().ends_with("\r\n\r\n"));
}
