//! The server on a real loopback socket, under hostile clients.

use super::*;
use crate::control::Inbox;
use crate::mqtt::PayloadCaps;
use std::io::Read;
use std::time::Instant;

fn server(max_clients: usize, token: Option<&str>) -> (Server, Arc<HttpState>) {
    let state = Arc::new(HttpState::new(10.0));
    let limits = Limits { head_time: Duration::from_millis(400), ..Limits::new() };
    let options = Options {
        max_clients,
        token: token.map(String::from),
        limits,
        hostname: "box".into(),
        allowed_hosts: Vec::new(),
        allowed_origins: Vec::new(),
    };
    let server = Server::start("127.0.0.1:0".parse().unwrap(), options, state.clone()).unwrap();
    (server, state)
}

/// Sends `raw` (the rest of the body may never come) and reads the answer:
/// its status and body.
fn ask(addr: SocketAddr, raw: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(raw);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

#[test]
fn slow_clients_hold_their_slots_only_until_the_head_deadline_and_extra_ones_get_503() {
    let (server, _state) = server(2, None);
    let started = Instant::now();
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let addr = server.addr;
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
                s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                // One header line every 50 ms, never the end of the head,
                // until an answer comes.
                let mut answer = Vec::new();
                for _ in 0..60 {
                    let mut buf = [0u8; 512];
                    match s.read(&mut buf) {
                        Ok(n) if n > 0 => {
                            answer.extend_from_slice(&buf[..n]);
                            break;
                        }
                        _ => {}
                    }
                    if s.write_all(b"X-Slow: 1\r\n").is_err() {
                        break;
                    }
                }
                String::from_utf8_lossy(&answer).to_string()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(150));
    let (status, body) = ask(server.addr, b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("http.max_clients"), "{body}");
    for s in slow {
        let answer = s.join().unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    }
    assert!(started.elapsed() < Duration::from_millis(1500), "refused at the deadline: {:?}", started.elapsed());
    // The slow clients have gone; their threads end within a moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    while ask(server.addr, b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").0 != 200 {
        assert!(Instant::now() < deadline, "the slots are not free again");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn oversized_malformed_and_misdirected_requests_get_an_answer_and_reach_nothing() {
    let (server, state) = server(4, None);
    let inbox = Arc::new(Inbox::new(4, Arc::new(PayloadCaps::new(64)), Box::new(|_| {})));
    state.set_commands(inbox.clone());
    let before = state.state();
    let huge = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {}\r\n\r\n", "a".repeat(9000));
    let cases: [(&[u8], u16); 7] = [
        (b"POST /api/blend HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n50", 413),
        (huge.as_bytes(), 431),
        (b"POST /api/source HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n50\r\n0\r\n\r\n", 411),
        (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", 400),
        (b"GET /../../etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
        (b"DELETE /api/blend HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405),
        (b"PUT /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", 405),
    ];
    for (raw, want) in cases {
        let (status, body) = ask(server.addr, raw);
        assert_eq!(status, want, "{}: {body}", String::from_utf8_lossy(&raw[..raw.len().min(40)]));
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("JSON: {body}"));
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{body}");
    }
    assert!(inbox.recv_timeout(Duration::ZERO).is_none(), "no command reached the control loop");
    assert_eq!(state.state(), before);
}

#[test]
fn with_a_token_a_command_needs_it_and_reads_do_not() {
    let token = "0123456789abcdef-token";
    let (server, state) = server(4, Some(token));
    let inbox = Arc::new(Inbox::new(4, Arc::new(PayloadCaps::new(64)), Box::new(|_| {})));
    state.set_commands(inbox.clone());
    // The control loop's side: takes the first command that arrives.
    let i = inbox.clone();
    let control = std::thread::spawn(move || {
        let c = i.recv_timeout(Duration::from_secs(30)).expect("a command");
        let _ = c.reply.as_ref().map(|r| r.send(Ok(())));
        (c.feature, c.payload.to_vec())
    });
    let post = |auth: &str| {
        let raw = format!("POST /api/enabled HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/x-command\r\n{auth}Content-Length: 3\r\n\r\nOFF");
        ask(server.addr, raw.as_bytes())
    };
    for bad in ["", "Authorization: Bearer wrong\r\n", "Authorization: Basic MDEyMzQ1\r\n"] {
        let (status, body) = post(bad);
        assert_eq!(status, 401, "{bad}: {body}");
        assert!(body.contains("http.token_file"), "{body}");
    }
    assert_eq!(ask(server.addr, b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").0, 200);
    let (status, body) = post(&format!("Authorization: Bearer {token}\r\n"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(control.join().unwrap(), ("enabled".to_string(), b"OFF".to_vec()), "the authorised one");
    assert!(inbox.recv_timeout(Duration::ZERO).is_none(), "and no other");
}
