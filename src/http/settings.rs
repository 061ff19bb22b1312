//! The `[http]` section: where the server listens and how much it serves.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSettings {
    /// Serve health, metrics, snapshots and the MJPEG stream.
    pub enabled: bool,
    /// Address and port. Another address than loopback needs `token_file`
    /// (or `allow_unauthenticated`).
    pub listen: String,
    /// Most frames per second on `/stream.mjpeg`.
    pub stream_fps: f32,
    /// Requests answered at once (stream clients count); more get 503.
    pub max_clients: usize,
    /// The bearer token that state-changing requests must carry
    /// (`Authorization: Bearer ...`): a file, looked up in
    /// `$CREDENTIALS_DIRECTORY` first when it is a bare name.
    pub token_file: Option<String>,
    /// Allows a non-loopback `listen` without a token.
    pub allow_unauthenticated: bool,
    /// Host names besides the listen address, loopback, `localhost` and
    /// the box's hostname (also `<hostname>.local`) that requests may name
    /// in `Host` (a reverse proxy's name, say); others get 421.
    pub allowed_hosts: Vec<String>,
    /// Origins besides the page's own that commands are taken from
    /// (`http://homeassistant.local:8123`, say); others get 403.
    pub allowed_origins: Vec<String>,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            enabled: true,
            listen: "127.0.0.1:8080".into(),
            stream_fps: 15.0,
            max_clients: 8,
            token_file: None,
            allow_unauthenticated: false,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        }
    }
}

impl HttpSettings {
    pub fn addr(&self) -> Result<SocketAddr, String> {
        self.listen
            .parse()
            .map_err(|_| format!("http.listen `{}` is not an address:port like 127.0.0.1:8080", self.listen))
    }

    /// The live page's address as other machines reach it (Home
    /// Assistant's `configuration_url`): `None` when HTTP is off or bound to
    /// loopback; an unspecified address (`0.0.0.0`) is named by `hostname`.
    pub fn page_url(&self, hostname: &str) -> Option<String> {
        let addr = self.addr().ok().filter(|a| self.enabled && !a.ip().is_loopback())?;
        let host = match addr.ip() {
            ip if ip.is_unspecified() => hostname.to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        Some(format!("http://{host}:{}/", addr.port()))
    }

    /// The bearer token from `token_file`, when one is set.
    pub fn token(&self) -> Result<Option<String>, String> {
        let Some(file) = &self.token_file else { return Ok(None) };
        let token = crate::credential::read("http.token_file", file)?;
        if token.trim().len() < 16 {
            return Err(format!("http.token_file {file}: the token is shorter than 16 characters; use a longer one"));
        }
        Ok(Some(token.trim().to_string()))
    }

    pub fn validate(&self) -> Result<(), String> {
        let addr = self.addr()?;
        if !addr.ip().is_loopback() && self.token_file.is_none() && !self.allow_unauthenticated {
            return Err(format!(
                "http.listen {addr} is reachable from other machines: set http.token_file to a bearer token \
                 (LoadCredential=), listen on 127.0.0.1, or set http.allow_unauthenticated = true"
            ));
        }
        if let Some(bad) = self.allowed_hosts.iter().find(|h| !super::guard::is_host_name(h)) {
            return Err(format!("http.allowed_hosts: `{bad}` is not a host name or address (no scheme, no port)"));
        }
        if let Some(bad) = self.allowed_origins.iter().find(|o| !origin(o)) {
            return Err(format!("http.allowed_origins: `{bad}` is not an origin like http://host:8123"));
        }
        if self.token_file.as_deref() == Some("") {
            return Err("http.token_file may not be empty; leave it out for no token".into());
        }
        if !(self.stream_fps > 0.0 && self.stream_fps <= 60.0) || self.max_clients == 0 || self.max_clients > 256 {
            return Err("http: need 0 < stream_fps <= 60 and 1 <= max_clients <= 256".into());
        }
        Ok(())
    }
}

/// `http://` or `https://`, a host and an optional port, nothing after.
fn origin(o: &str) -> bool {
    let rest = o.strip_prefix("http://").or_else(|| o.strip_prefix("https://"));
    rest.is_some_and(|r| !r.is_empty() && !r.contains('/') && r.chars().all(|c| c.is_ascii_graphic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_by_default_and_other_addresses_only_when_allowed() {
        assert!(HttpSettings::default().validate().is_ok());
        let open = HttpSettings { listen: "0.0.0.0:8080".into(), ..HttpSettings::default() };
        assert!(open.validate().unwrap_err().contains("token_file"));
        let token = HttpSettings { token_file: Some("http-token".into()), ..open.clone() };
        assert!(token.validate().is_ok());
        assert!(HttpSettings { allow_unauthenticated: true, ..open }.validate().is_ok());
        assert_eq!(HttpSettings::default().page_url("box"), None, "loopback is not reachable");
        assert_eq!(token.page_url("box").as_deref(), Some("http://box:8080/"));
        let lan = HttpSettings { listen: "192.168.1.20:80".into(), ..token.clone() };
        assert_eq!(lan.page_url("box").as_deref(), Some("http://192.168.1.20:80/"));
        assert_eq!(HttpSettings { enabled: false, ..lan }.page_url("box"), None);
        let bad = HttpSettings { listen: "localhost".into(), ..HttpSettings::default() };
        assert!(bad.validate().unwrap_err().contains("not an address"));
        let hosts = |h: &str| HttpSettings { allowed_hosts: vec![h.into()], ..HttpSettings::default() };
        assert!(hosts("proxy.example").validate().is_ok());
        assert!(hosts("http://proxy").validate().unwrap_err().contains("allowed_hosts"));
        let origins = |o: &str| HttpSettings { allowed_origins: vec![o.into()], ..HttpSettings::default() };
        assert!(origins("http://homeassistant.local:8123").validate().is_ok());
        for bad in ["homeassistant.local", "http://ha/path", "http://"] {
            assert!(origins(bad).validate().unwrap_err().contains("allowed_origins"), "{bad}");
        }
    }
}
