//! Which source faces may be used (`pipeline.sources`), plain logic:
//!
//! - `any`: every valid source (the default);
//! - `enrolled`: only faces in the bank, and a face enters the bank only by
//!   an authenticated command (HTTP with `http.token_file`, or MQTT with
//!   `mqtt.username`, which the broker checks);
//! - `allowlist`: only images whose SHA-256 is listed in
//!   `pipeline.sources_allowlist` (and bank faces, which entered the same way).

use crate::mqtt::SourceCommand;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SourcePolicy {
    #[default]
    Any,
    Enrolled,
    Allowlist,
}

/// The policy in force, its allowlist and whether the command being
/// applied came from an authenticated sender.
#[derive(Debug, Clone, Default)]
pub struct SourceGate {
    pub policy: SourcePolicy,
    pub allowed: HashSet<String>,
    pub sender_authenticated: bool,
}

impl SourceGate {
    pub fn admit(&self, src: &SourceCommand) -> Result<(), String> {
        admit(self.policy, &self.allowed, src, self.sender_authenticated)
    }
}

/// Whether `src` may be used, sent by a sender that is `authenticated`;
/// the refusal says what to do.
pub fn admit(
    policy: SourcePolicy,
    allowed: &HashSet<String>,
    src: &SourceCommand,
    authenticated: bool,
) -> Result<(), String> {
    let SourceCommand::Image { name, bytes, .. } = src else { return Ok(()) };
    match policy {
        SourcePolicy::Any => Ok(()),
        SourcePolicy::Enrolled if name.is_some() && authenticated => Ok(()),
        SourcePolicy::Enrolled if name.is_some() => {
            Err("pipeline.sources = enrolled: a face enters the bank only by an authenticated command (HTTP with \
             http.token_file, or MQTT with mqtt.username)"
                .into())
        }
        SourcePolicy::Enrolled => {
            Err("pipeline.sources = enrolled: send a face bank name, or enroll the face first with an authenticated \
             `name\\n<image>` command"
                .into())
        }
        SourcePolicy::Allowlist => {
            let digest = crate::catalog::sha256_hex(bytes);
            match allowed.contains(&digest) {
                true => Ok(()),
                false => Err(format!(
                    "pipeline.sources = allowlist: this image (sha256 {digest}) is not in pipeline.sources_allowlist"
                )),
            }
        }
    }
}

/// The SHA-256 digests in an allowlist file's text: one hex digest a line
/// (anything after it, `sha256sum`'s file name say, is ignored; `#` starts
/// a comment).
pub fn parse_allowlist(text: &str) -> Result<HashSet<String>, String> {
    let mut out = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let Some(word) = line.split('#').next().and_then(|l| l.split_whitespace().next()) else { continue };
        let hex = word.to_ascii_lowercase();
        if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("line {}: `{word}` is not a SHA-256 in hex (sha256sum prints them)", i + 1));
        }
        out.insert(hex);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(name: Option<&str>) -> SourceCommand {
        SourceCommand::Image { name: name.map(String::from), bytes: b"pixels".to_vec(), width: 1, height: 1 }
    }

    #[test]
    fn each_policy_takes_what_it_says() {
        let none = HashSet::new();
        let named = SourceCommand::Named("alice".into());
        for src in [image(None), image(Some("a")), named.clone()] {
            assert!(admit(SourcePolicy::Any, &none, &src, false).is_ok());
        }
        assert!(admit(SourcePolicy::Enrolled, &none, &named, false).is_ok());
        assert!(admit(SourcePolicy::Enrolled, &none, &image(Some("a")), true).is_ok());
        assert!(admit(SourcePolicy::Enrolled, &none, &image(Some("a")), false).unwrap_err().contains("authenticated"));
        assert!(admit(SourcePolicy::Enrolled, &none, &image(None), true).unwrap_err().contains("bank name"));
        let digest = crate::catalog::sha256_hex(b"pixels");
        let list = parse_allowlist(&format!("# faces\n{}  alice.jpg\n\n", digest.to_uppercase())).unwrap();
        assert!(admit(SourcePolicy::Allowlist, &list, &image(None), false).is_ok());
        assert!(admit(SourcePolicy::Allowlist, &none, &image(None), true).unwrap_err().contains("sources_allowlist"));
        assert!(parse_allowlist("abc\n").unwrap_err().contains("line 1"));
    }
}
