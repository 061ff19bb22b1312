//! The signed C2PA manifest on published JPEGs (`[output.c2pa]`): a
//! `c2pa.created` action whose `digitalSourceType` says whether a face was
//! pasted into the frame (`trainedAlgorithmicMedia`) or not
//! (`digitalCapture`), signed with the box's key and certificate chain.
//!
//! [`C2paSettings`] is the config section, in every build; [`C2paSigner`]
//! needs the `c2pa` feature, and without it a config that enables the
//! manifest is refused at start.

use serde::{Deserialize, Serialize};

/// IPTC's digital source type of media made by a trained model.
pub const TRAINED_ALGORITHMIC_MEDIA: &str = "http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia";
/// IPTC's digital source type of media captured by a camera.
pub const DIGITAL_CAPTURE: &str = "http://cv.iptc.org/newscodes/digitalsourcetype/digitalCapture";

/// The algorithms `output.c2pa.algorithm` takes (C2PA's own names).
pub const ALGORITHMS: &[&str] = &["es256", "es384", "es512", "ps256", "ps384", "ps512", "ed25519"];

/// `[output.c2pa]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct C2paSettings {
    /// Sign published JPEGs with a C2PA manifest.
    pub enabled: bool,
    /// The signing certificate chain (PEM, the box's certificate first, up
    /// to but not including the root); a bare file name is looked up in
    /// `$CREDENTIALS_DIRECTORY` first.
    pub certificate: String,
    /// The certificate's private key (PEM, PKCS#8); a bare file name is
    /// looked up in `$CREDENTIALS_DIRECTORY` first. It is never logged.
    pub key: String,
    /// The signature algorithm, matching the key: one of [`ALGORITHMS`].
    pub algorithm: String,
    /// Sign snapshots (`<base>/snapshot` and `/snapshot.jpg`).
    pub snapshots: bool,
    /// Sign the frames on `<base>/frame`.
    pub frames: bool,
    /// Sign every frame of `/stream.mjpeg`.
    pub stream: bool,
}

impl Default for C2paSettings {
    fn default() -> Self {
        C2paSettings {
            enabled: false,
            certificate: String::new(),
            key: String::new(),
            algorithm: "es256".into(),
            snapshots: true,
            frames: true,
            stream: true,
        }
    }
}

impl C2paSettings {
    pub fn validate(&self) -> Result<(), String> {
        if !ALGORITHMS.contains(&self.algorithm.as_str()) {
            return Err(format!("output.c2pa.algorithm `{}` is not one of {}", self.algorithm, ALGORITHMS.join(", ")));
        }
        if self.enabled && (self.certificate.is_empty() || self.key.is_empty()) {
            return Err("output.c2pa is enabled without a certificate and a key: set output.c2pa.certificate and \
                 output.c2pa.key, or set output.c2pa.enabled = false"
                .into());
        }
        if self.enabled && !cfg!(feature = "c2pa") {
            return Err("output.c2pa is enabled, but this build of fusiond has no C2PA support (the `c2pa` cargo \
                 feature): install a build with it, or set output.c2pa.enabled = false"
                .into());
        }
        Ok(())
    }
}

/// Which outputs carry the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SignedOutputs {
    pub snapshots: bool,
    pub frames: bool,
    pub stream: bool,
}

impl SignedOutputs {
    pub fn any(&self) -> bool {
        self.snapshots || self.frames || self.stream
    }
}

#[cfg(feature = "c2pa")]
pub use signer::C2paSigner;
#[cfg(not(feature = "c2pa"))]
pub use unsupported::C2paSigner;

/// Without the `c2pa` feature there is no signer: [`C2paSettings::validate`]
/// refuses an enabled manifest, so `load` only ever returns `None`.
#[cfg(not(feature = "c2pa"))]
mod unsupported {
    use super::{C2paSettings, SignedOutputs};

    #[derive(Debug)]
    pub enum C2paSigner {}

    impl C2paSigner {
        pub fn load(settings: &C2paSettings) -> Result<Option<C2paSigner>, String> {
            settings.validate().map(|()| None)
        }

        pub fn outputs(&self) -> SignedOutputs {
            match *self {}
        }

        pub fn sign_jpeg(&self, _jpeg: &[u8], _synthetic: bool) -> Result<Vec<u8>, String> {
            match *self {}
        }
    }
}

#[cfg(feature = "c2pa")]
mod signer {
    use super::{C2paSettings, SignedOutputs, DIGITAL_CAPTURE, TRAINED_ALGORITHMIC_MEDIA};
    use std::io::Cursor;
    use std::sync::Arc;

    /// Signs JPEGs with the box's key: one per daemon, used by the worker.
    pub struct C2paSigner {
        signer: ::c2pa::BoxedSigner,
        context: Arc<::c2pa::Context>,
        outputs: SignedOutputs,
        /// The manifest definitions (JSON), built once: a camera frame's
        /// and a synthetic frame's.
        definitions: [String; 2],
    }

    impl std::fmt::Debug for C2paSigner {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("C2paSigner").field("outputs", &self.outputs).finish_non_exhaustive()
        }
    }

    impl C2paSigner {
        /// The signer `settings` name, or `None` when the manifest is off.
        /// The error names the file or key that failed, never the key's text.
        pub fn load(settings: &C2paSettings) -> Result<Option<C2paSigner>, String> {
            if !settings.enabled {
                return Ok(None);
            }
            settings.validate()?;
            let cert = crate::credential::read("output.c2pa.certificate", &settings.certificate)?;
            let key = crate::credential::read("output.c2pa.key", &settings.key)?;
            let alg: ::c2pa::SigningAlg = settings.algorithm.parse().map_err(|_| {
                format!("output.c2pa.algorithm `{}` is not a C2PA signing algorithm", settings.algorithm)
            })?;
            let signer = ::c2pa::create_signer::from_keys(cert.as_bytes(), key.as_bytes(), alg, None).map_err(|e| {
                format!(
                    "output.c2pa: cannot sign with the key in {} and the certificate in {} ({}): check that \
                     the key is PKCS#8 PEM, matches the certificate and output.c2pa.algorithm `{}`",
                    settings.key,
                    settings.certificate,
                    scrub(&e.to_string()),
                    settings.algorithm
                )
            })?;
            let context = ::c2pa::Context::new()
                .with_settings(
                    r#"{"verify": {"verify_after_sign": false}, "builder": {"thumbnail": {"enabled": false}}}"#,
                )
                .map_err(|e| format!("output.c2pa: {e}"))?;
            let outputs =
                SignedOutputs { snapshots: settings.snapshots, frames: settings.frames, stream: settings.stream };
            let definitions = [definition(DIGITAL_CAPTURE), definition(TRAINED_ALGORITHMIC_MEDIA)];
            let s = C2paSigner { signer, context: Arc::new(context), outputs, definitions };
            s.check(settings)?;
            Ok(Some(s))
        }

        /// Signs a small frame and reads it back, at start rather than on
        /// the first published frame: C2PA must accept the chain, and the
        /// signature must validate (a key that does not match the
        /// certificate signs without an error, but nothing validates).
        fn check(&self, settings: &C2paSettings) -> Result<(), String> {
            let files = format!("the key in {} and the certificate in {}", settings.key, settings.certificate);
            let probe = crate::vision::encode_jpeg(&image::RgbImage::new(16, 16), 50)?;
            let signed = self.sign_jpeg(&probe, false).map_err(|e| format!("output.c2pa: {files} cannot sign: {e}"))?;
            let reader = ::c2pa::Reader::from_shared_context(&self.context)
                .with_stream("image/jpeg", Cursor::new(signed))
                .map_err(|e| format!("output.c2pa: {files}: the signed probe cannot be read back ({e})"))?;
            if reader.validation_state() != ::c2pa::ValidationState::Invalid {
                return Ok(());
            }
            let failed: Vec<&str> = (reader.validation_status().unwrap_or_default().iter())
                .map(|s| s.code())
                .filter(|code| *code != ::c2pa::validation_status::SIGNING_CREDENTIAL_UNTRUSTED)
                .collect();
            Err(format!(
                "output.c2pa: {files} sign manifests that do not validate ({}): check that the key is the \
                 certificate's",
                failed.join(", ")
            ))
        }

        pub fn outputs(&self) -> SignedOutputs {
            self.outputs
        }

        /// `jpeg` with a signed manifest in it; `synthetic` says a face was
        /// pasted into the frame.
        pub fn sign_jpeg(&self, jpeg: &[u8], synthetic: bool) -> Result<Vec<u8>, String> {
            let mut builder = ::c2pa::Builder::from_shared_context(&self.context)
                .with_definition(self.definitions[usize::from(synthetic)].as_str())
                .map_err(|e| format!("C2PA manifest: {e}"))?;
            let mut out = Cursor::new(Vec::with_capacity(jpeg.len() + 16 * 1024));
            builder
                .sign(self.signer.as_ref(), "image/jpeg", &mut Cursor::new(jpeg), &mut out)
                .map_err(|e| format!("C2PA signing: {}", scrub(&e.to_string())))?;
            Ok(out.into_inner())
        }
    }

    /// The manifest definition of a frame of `source_type`.
    fn definition(source_type: &str) -> String {
        serde_json::json!({
            "claim_generator_info": [{"name": "fusiond", "version": env!("CARGO_PKG_VERSION")}],
            "title": "fusiond frame",
            "assertions": [{
                "label": "c2pa.actions",
                "data": {"actions": [{
                    "action": "c2pa.created",
                    "digitalSourceType": source_type,
                    "softwareAgent": {"name": "fusiond", "version": env!("CARGO_PKG_VERSION")},
                }]},
            }],
        })
        .to_string()
    }

    /// An error's text with anything that looks like PEM cut off, so that
    /// no key material can reach a log.
    fn scrub(text: &str) -> String {
        match text.find("-----BEGIN") {
            Some(at) => format!("{}[PEM removed]", &text[..at]),
            None => text.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_refuse_an_unknown_algorithm_and_an_enabled_manifest_without_files() {
        assert!(C2paSettings::default().validate().is_ok());
        let bad = C2paSettings { algorithm: "md5".into(), ..Default::default() };
        assert!(bad.validate().unwrap_err().contains("es256"));
        let no_files = C2paSettings { enabled: true, ..Default::default() };
        assert!(no_files.validate().unwrap_err().contains("output.c2pa.key"));
    }
}
