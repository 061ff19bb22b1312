//! Secrets named in the config (`mqtt.password_file`, `http.token_file`):
//! a bare file name is looked up in `$CREDENTIALS_DIRECTORY` (systemd's
//! `LoadCredential=`) first, anything else is a path.

use std::path::{Path, PathBuf};

/// The secret in `file`, without its trailing newline; `key` names the
/// config key in the error.
pub fn read(key: &str, file: &str) -> Result<String, String> {
    let bare = !file.contains('/');
    let path = match std::env::var_os("CREDENTIALS_DIRECTORY") {
        Some(dir) if bare && Path::new(&dir).join(file).is_file() => Path::new(&dir).join(file),
        _ => PathBuf::from(file),
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{key} {}: cannot read it ({e}); check the path or LoadCredential=", path.display()))?;
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}
