//! Which handler a request goes to: plain logic over method and path.

use crate::mqtt::topics::FEATURES;

/// A request's destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /`: the live page.
    Page,
    /// `GET /page.js` and `/page.css`: its script and style.
    Script,
    Style,
    Health,
    Metrics,
    Snapshot,
    Stream,
    /// `GET /api/events`: `faces`, events and errors as server-sent events.
    Events,
    /// `GET /api/bank/<name>.jpg`: a face bank name's thumbnail.
    Thumbnail,
    /// `GET /api/state`.
    State,
    /// `POST /api/<feature>`: the command of MQTT's `<base>/<feature>/set`.
    Command(&'static str),
    /// A known path asked with a method it does not take.
    MethodNotAllowed(&'static str),
    NotFound,
}

/// The route of `method` on `url` (its query string ignored).
pub fn route(method: &str, url: &str) -> Route {
    let path = url.split(['?', '#']).next().unwrap_or("");
    if let Some(feature) = path.strip_prefix("/api/").and_then(|f| FEATURES.iter().find(|k| **k == f)) {
        return if method == "POST" { Route::Command(feature) } else { Route::MethodNotAllowed("POST") };
    }
    let thumbnail = path.strip_prefix("/api/bank/").is_some_and(|n| n.ends_with(".jpg"));
    let (route, allowed) = match path {
        _ if thumbnail => (Route::Thumbnail, "GET"),
        "/" | "/index.html" => (Route::Page, "GET, HEAD"),
        "/page.js" => (Route::Script, "GET, HEAD"),
        "/page.css" => (Route::Style, "GET, HEAD"),
        "/api/state" => (Route::State, "GET, HEAD"),
        "/api/events" => (Route::Events, "GET"),
        "/api/health" => (Route::Health, "GET, HEAD"),
        "/metrics" => (Route::Metrics, "GET, HEAD"),
        "/snapshot.jpg" => (Route::Snapshot, "GET"),
        "/stream.mjpeg" => (Route::Stream, "GET"),
        _ => return Route::NotFound,
    };
    match (method, allowed) {
        ("GET", _) => route,
        ("HEAD", "GET, HEAD") => route,
        _ => Route::MethodNotAllowed(allowed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_methods_and_queries() {
        assert_eq!(route("GET", "/api/health"), Route::Health);
        assert_eq!(route("HEAD", "/metrics"), Route::Metrics);
        assert_eq!(route("GET", "/stream.mjpeg?t=1"), Route::Stream);
        assert_eq!(route("GET", "/api/events"), Route::Events);
        assert_eq!(route("GET", "/api/bank/alice.jpg?t=2"), Route::Thumbnail);
        assert_eq!(route("POST", "/api/bank/alice.jpg"), Route::MethodNotAllowed("GET"));
        assert_eq!(route("POST", "/snapshot.jpg"), Route::MethodNotAllowed("GET"));
        assert_eq!(route("DELETE", "/api/health"), Route::MethodNotAllowed("GET, HEAD"));
        assert_eq!(route("GET", "/../etc/passwd"), Route::NotFound);
        assert_eq!(route("GET", ""), Route::NotFound);
        assert_eq!(route("POST", "/api/blend"), Route::Command("blend"));
        assert_eq!(route("GET", "/api/blend"), Route::MethodNotAllowed("POST"));
        assert_eq!(route("POST", "/api/nosuch"), Route::NotFound);
        assert_eq!(route("GET", "/api/state"), Route::State);
        assert_eq!(route("GET", "/?x=1"), Route::Page);
        assert_eq!((route("GET", "/page.js"), route("HEAD", "/page.css")), (Route::Script, Route::Style));
        assert_eq!(route("POST", "/"), Route::MethodNotAllowed("GET, HEAD"));
    }
}
