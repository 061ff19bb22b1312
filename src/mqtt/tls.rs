//! TLS for the MQTT session: the trust anchors (a CA bundle, or the
//! system's roots) and, for fleets that authenticate devices by X.509
//! client certificates (AWS IoT Core, Azure IoT Hub, EMQX, HiveMQ, a
//! mosquitto with `require_certificate`), the box's certificate and key.
//! Everything is checked here, before the first connection, so a bad file
//! is an error that names it; the key never reaches a log or `Debug`.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// The box's identity for mutual TLS.
#[derive(Clone)]
pub struct ClientIdentity {
    /// PEM: the certificate, then any intermediates.
    pub chain: Vec<u8>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: Vec<u8>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity").field("chain_bytes", &self.chain.len()).field("key", &"<redacted>").finish()
    }
}

#[derive(Debug, Clone, Default)]
pub struct TlsSettings {
    /// PEM CA bundle; `None` trusts the system's roots.
    pub ca: Option<Vec<u8>>,
    pub client: Option<ClientIdentity>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("mqtt.ca_file holds no PEM certificate; give the CA bundle that signed the broker's certificate")]
    NoCa,
    #[error("mqtt.cert_file: {0}; give the box's certificate in PEM (BEGIN CERTIFICATE)")]
    Cert(String),
    #[error("mqtt.key_file: {0}; give the certificate's private key in PEM (BEGIN PRIVATE KEY)")]
    Key(String),
}

fn roots(ca: Option<&[u8]>) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(pem) => {
            let certs = CertificateDer::pem_slice_iter(pem).filter_map(Result::ok).collect::<Vec<_>>();
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(TlsError::NoCa);
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    Ok(roots)
}

/// The client configuration `settings` describe.
pub fn client_config(settings: &TlsSettings) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots(settings.ca.as_deref())?);
    let config = match &settings.client {
        None => builder.with_no_client_auth(),
        Some(id) => {
            let chain = CertificateDer::pem_slice_iter(&id.chain)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| TlsError::Cert(format!("not PEM ({e})")))?;
            if chain.is_empty() {
                return Err(TlsError::Cert("no certificate in it".into()));
            }
            // The parser's error would quote nothing of the key, but say
            // only what kind of problem it is all the same.
            let key =
                PrivateKeyDer::from_pem_slice(&id.key).map_err(|_| TlsError::Key("no private key in it".into()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::Key(format!("does not fit the certificate ({e})")))?
        }
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_are_named_and_the_key_is_never_shown() {
        let empty = TlsSettings { ca: Some(b"not a certificate".to_vec()), client: None };
        assert_eq!(client_config(&empty).unwrap_err(), TlsError::NoCa);
        let id = ClientIdentity { chain: b"-----BEGIN CERTIFICATE-----\n".to_vec(), key: b"SECRET-KEY".to_vec() };
        assert!(format!("{id:?}").contains("<redacted>") && !format!("{id:?}").contains("SECRET"));
        let no_chain = ClientIdentity { chain: Vec::new(), key: b"SECRET-KEY".to_vec() };
        let e = client_config(&TlsSettings { ca: None, client: Some(no_chain) }).unwrap_err();
        assert!(matches!(e, TlsError::Cert(_)) && e.to_string().contains("mqtt.cert_file"), "{e}");
    }
}
