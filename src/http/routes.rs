//! Which handler a request goes to: plain logic over method and path.

/// A request's destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Health,
    Metrics,
    Snapshot,
    Stream,
    /// A known path asked with a method it does not take.
    MethodNotAllowed(&'static str),
    NotFound,
}

/// The route of `method` on `url` (its query string ignored).
pub fn route(method: &str, url: &str) -> Route {
    let path = url.split(['?', '#']).next().unwrap_or("");
    let (route, allowed) = match path {
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
        assert_eq!(route("POST", "/snapshot.jpg"), Route::MethodNotAllowed("GET"));
        assert_eq!(route("DELETE", "/api/health"), Route::MethodNotAllowed("GET, HEAD"));
        assert_eq!(route("GET", "/../etc/passwd"), Route::NotFound);
        assert_eq!(route("GET", ""), Route::NotFound);
    }
}
