//! Who may talk to the server, decided from a request's head alone (plain
//! logic, no IO), before any body is read:
//!
//! - **Host**, on every request: the listen address, a loopback address,
//!   `localhost`, the box's hostname (also with `.local`), any address of
//!   the box when it listens on all of them, or a name in
//!   `http.allowed_hosts`. Anything else is a DNS-rebinding page or a
//!   misdirected request: `421`.
//! - **Origin**, on commands: a browser's request must come from the page's
//!   own origin (`http://` and the request's `Host`) or one in
//!   `http.allowed_origins`: else `403`. Requests without `Origin` (curl,
//!   Home Assistant) pass, unless `Sec-Fetch-Site` says another site sent it.
//! - **Content-Type**, on commands: present and not one a cross-site form
//!   or a `no-cors` fetch may send (`text/plain`, `multipart/form-data`,
//!   `application/x-www-form-urlencoded`): else `415`. So a browser sends a
//!   command to another origin only after a CORS preflight, which fusiond
//!   never grants.

use super::wire::{Refusal, Request};
use std::net::IpAddr;

/// The media types a browser sends cross-origin without a preflight.
const SIMPLE_TYPES: [&str; 3] = ["text/plain", "multipart/form-data", "application/x-www-form-urlencoded"];

/// The names and origins a server accepts.
#[derive(Debug, Clone)]
pub struct Guard {
    listen: IpAddr,
    /// Lower-case host names taken besides addresses: `localhost`, the
    /// hostname, `<hostname>.local` and `http.allowed_hosts`.
    names: Vec<String>,
    /// `http.allowed_origins`, lower case, without a trailing `/`.
    origins: Vec<String>,
}

impl Guard {
    pub fn new(listen: IpAddr, hostname: &str, allowed_hosts: &[String], allowed_origins: &[String]) -> Guard {
        let hostname = hostname.trim().trim_end_matches('.').to_ascii_lowercase();
        let mut names = vec!["localhost".to_string()];
        if !hostname.is_empty() {
            names.push(format!("{hostname}.local"));
            names.push(hostname);
        }
        names.extend(allowed_hosts.iter().map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase()));
        let origins = allowed_origins.iter().map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase()).collect();
        Guard { listen, names, origins }
    }

    /// Whether the request's `Host` names this box (every request).
    pub fn host(&self, request: &Request) -> Result<(), Refusal> {
        let Some(host) = request.header("Host") else {
            return Err(refusal(400, "send a Host header (HTTP/1.1 requires it)"));
        };
        let name = host_name(host).ok_or_else(|| refusal(400, format!("`{host}` is not a host[:port]")))?;
        let taken = match name.parse::<IpAddr>() {
            Ok(ip) => ip == self.listen || ip.is_loopback() || self.listen.is_unspecified(),
            Err(_) => self.names.contains(&name),
        };
        match taken {
            true => Ok(()),
            false => Err(refusal(
                421,
                format!(
                    "this box does not answer to `{name}`: use its address or hostname, or add the name to \
                     http.allowed_hosts"
                ),
            )),
        }
    }

    /// Whether a command may be taken from this request's sender: its
    /// origin and its content type (after [`Guard::host`]).
    pub fn command(&self, request: &Request) -> Result<(), Refusal> {
        let origin = request.header("Origin").map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase());
        let served = request.header("Host").map(|h| format!("http://{}", h.trim().to_ascii_lowercase()));
        let foreign = || {
            refusal(
                403,
                "commands are taken only from the live page's own origin; add another origin to \
                 http.allowed_origins",
            )
        };
        match origin {
            Some(o) if Some(&o) == served.as_ref() || self.origins.contains(&o) => {}
            Some(_) => return Err(foreign()),
            None if matches!(request.header("Sec-Fetch-Site"), Some("cross-site" | "same-site")) => {
                return Err(foreign())
            }
            None => {}
        }
        let kind =
            request.header("Content-Type").map(|t| t.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
        match kind {
            Some(k) if !k.is_empty() && !SIMPLE_TYPES.contains(&k.as_str()) => Ok(()),
            _ => Err(refusal(
                415,
                "a command needs a Content-Type a web form cannot send: the payload's own \
                 (application/json, image/jpeg, image/png) or application/octet-stream",
            )),
        }
    }
}

fn refusal(status: u16, reason: impl Into<String>) -> Refusal {
    Refusal { status, reason: reason.into() }
}

/// The name or address in a `Host` value, lower case, without the port,
/// the brackets of an IPv6 address or a trailing dot; `None` when it is
/// not one.
fn host_name(host: &str) -> Option<String> {
    let host = host.trim();
    let name = match host.strip_prefix('[') {
        Some(v6) => {
            let (addr, rest) = v6.split_once(']')?;
            (rest.is_empty() || rest.strip_prefix(':')?.parse::<u16>().is_ok()).then_some(addr)?
        }
        None => match host.rsplit_once(':') {
            Some((name, port)) => port.parse::<u16>().is_ok().then_some(name)?,
            None => host,
        },
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    is_host_name(&name).then_some(name)
}

/// Letters, digits, `-`, `.`, `_` and `:` (an IPv6 address) only: a name
/// or address, with no scheme, port or path.
pub fn is_host_name(h: &str) -> bool {
    !h.is_empty() && h.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':' | '_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(listen: [u8; 4]) -> Guard {
        let hosts = ["proxy.example".to_string()];
        Guard::new(listen.into(), "Box1", &hosts, &["http://ha.local:8123/".to_string()])
    }

    fn get(host: &str) -> Request {
        Request::new("GET", "/api/state", &[("Host", host)])
    }

    fn status(r: Result<(), Refusal>) -> Option<u16> {
        r.err().map(|r| r.status)
    }

    #[test]
    fn host_must_name_this_box() {
        let g = guard([192, 168, 1, 20]);
        for ok in [
            "192.168.1.20:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "localhost",
            "LOCALHOST:80",
            "box1",
            "box1.local:8080",
            "box1.",
            "proxy.example",
        ] {
            assert_eq!(status(g.host(&get(ok))), None, "{ok}");
        }
        for rebound in ["evil.example:8080", "box1.evil.example", "192.168.1.21:8080", "10.0.0.1", "[fe80::1]:8080"] {
            assert_eq!(status(g.host(&get(rebound))), Some(421), "{rebound}");
        }
        for bad in ["", "a b", "box1:port", "[::1", "box1/x"] {
            assert_eq!(status(g.host(&get(bad))), Some(400), "{bad:?}");
        }
        assert_eq!(status(g.host(&Request::new("GET", "/", &[]))), Some(400), "no Host");
        let any = guard([0, 0, 0, 0]);
        assert_eq!(status(any.host(&get("10.0.0.1:8080"))), None, "any address of a box that listens on all");
        assert_eq!(status(any.host(&get("evil.example"))), Some(421));
    }

    #[test]
    fn commands_come_only_from_the_page_or_an_allowed_origin_and_never_as_a_simple_request() {
        let g = guard([127, 0, 0, 1]);
        let post = |headers: &[(&str, &str)]| {
            let mut all = vec![("Host", "127.0.0.1:8080")];
            all.extend_from_slice(headers);
            status(g.command(&Request::new("POST", "/api/blend", &all)))
        };
        let json = ("Content-Type", "application/json");
        assert_eq!(post(&[json]), None, "curl, Home Assistant: no Origin");
        assert_eq!(post(&[("Origin", "http://127.0.0.1:8080"), json, ("Sec-Fetch-Site", "same-origin")]), None);
        assert_eq!(post(&[("Origin", "http://ha.local:8123"), ("Content-Type", "image/jpeg")]), None);
        for foreign in ["http://evil.example", "http://127.0.0.1:9000", "https://127.0.0.1:8080", "null"] {
            assert_eq!(post(&[("Origin", foreign), json]), Some(403), "{foreign}");
        }
        assert_eq!(post(&[("Sec-Fetch-Site", "cross-site"), json]), Some(403), "a browser that hid the origin");
        for simple in
            ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]
        {
            let kind = ("Content-Type", simple);
            assert_eq!(post(&[("Origin", "http://127.0.0.1:8080"), kind]), Some(415), "{simple}");
        }
        assert_eq!(post(&[]), Some(415), "no Content-Type");
    }
}
