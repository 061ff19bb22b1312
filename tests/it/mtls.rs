//! Mutual TLS against a real mosquitto with `require_certificate true` and a
//! throwaway CA made by openssl: the box's certificate is accepted, one from
//! another CA is refused with an error that says what to check, a missing key
//! stops the start naming the key, and no key ever reaches the log.

use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Watcher, T};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const OPENSSL_CNF: &str = "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = fusiond-test\n\
    [ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n\
    [server]\nbasicConstraints = CA:FALSE\nsubjectAltName = IP:127.0.0.1\nextendedKeyUsage = serverAuth\n\
    [client]\nbasicConstraints = CA:FALSE\nextendedKeyUsage = clientAuth\n";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").current_dir(dir).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run openssl ({e}): tests/setup.sh installs it (apt install openssl)");
    });
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `<name>.pem` and `<name>.key`: a CA when `issuer` is `None`, else a leaf
/// with the `[ext]` extensions signed by `issuer`.
fn cert(dir: &Path, name: &str, issuer: Option<&str>, ext: &str) {
    let (key, pem, csr) = (format!("{name}.key"), format!("{name}.pem"), format!("{name}.csr"));
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", &key];
    let subj = format!("/CN={name}");
    match issuer {
        None => {
            let args = [&["req", "-x509", "-new", "-config", "openssl.cnf", "-extensions", ext][..], &ec[..]].concat();
            openssl(dir, &[&args[..], &["-out", &pem, "-days", "2", "-subj", &subj]].concat());
        }
        Some(ca) => {
            let args =
                [&["req", "-new", "-config", "openssl.cnf"][..], &ec[..], &["-out", &csr, "-subj", &subj]].concat();
            openssl(dir, &args);
            let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
            openssl(
                dir,
                &["x509", "-req", "-in", &csr, "-CA", &ca_pem, "-CAkey", &ca_key, "-set_serial", "7", "-out", &pem]
                    .into_iter()
                    .chain(["-days", "2", "-extfile", "openssl.cnf", "-extensions", ext])
                    .collect::<Vec<_>>(),
            );
        }
    }
}

fn pki(dir: &Path) {
    std::fs::write(dir.join("openssl.cnf"), OPENSSL_CNF).unwrap();
    cert(dir, "ca", None, "ca");
    cert(dir, "server", Some("ca"), "server");
    cert(dir, "box", Some("ca"), "client");
    cert(dir, "rogue-ca", None, "ca");
    cert(dir, "rogue", Some("rogue-ca"), "client");
}

fn tls_config(dir: &Path, broker: u16, tls_port: u16, device: &str, client: &str) -> std::path::PathBuf {
    let extra = format!(
        "\n[mqtt]\ntls = true\nca_file = \"{d}/ca.pem\"\ncert_file = \"{d}/{client}.pem\"\nkey_file = \"{client}.key\"\n",
        d = dir.display()
    );
    let config = write_config(dir, broker, device, "");
    // The plain listener's port is replaced by the TLS one in a drop-in.
    let dropin = dir.join("conf.d");
    std::fs::create_dir_all(&dropin).unwrap();
    std::fs::write(dropin.join("50-tls.toml"), format!("{extra}port = {tls_port}\n")).unwrap();
    config
}

#[test]
fn mutual_tls_takes_the_box_certificate_refuses_another_ca_and_never_logs_the_key() {
    let _s = serial();
    let dir = tempfile::tempdir().unwrap();
    pki(dir.path());
    let (port, tls_port) = (free_port(), free_port());
    let d = dir.path().display();
    let listener = format!(
        "allow_anonymous true\nlistener {tls_port} 127.0.0.1\ncafile {d}/ca.pem\ncertfile {d}/server.pem\n\
         keyfile {d}/server.key\nrequire_certificate true\n"
    );
    let broker = Mosquitto::start_with(port, &listener);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", tls_port)).is_err() {
        assert!(Instant::now() < deadline, "mosquitto did not listen for TLS on {tls_port}");
        std::thread::sleep(Duration::from_millis(20));
    }

    // The key comes from $CREDENTIALS_DIRECTORY, as LoadCredential= gives it.
    let good = tls_config(dir.path(), broker.port, tls_port, "mtls", "box");
    let w = Watcher::start(broker.port, "fusiond/mtls");
    let daemon = Daemon::spawn_env(&good, &[("CREDENTIALS_DIRECTORY", dir.path())]);
    online(&w);
    drop(daemon);
    let key = std::fs::read_to_string(dir.path().join("box.key")).unwrap();
    let secret = key.lines().nth(1).unwrap().to_string();

    let rogue_dir = tempfile::tempdir().unwrap();
    for f in ["ca.pem", "rogue.pem", "rogue.key"] {
        std::fs::copy(dir.path().join(f), rogue_dir.path().join(f)).unwrap();
    }
    let rogue = tls_config(rogue_dir.path(), broker.port, tls_port, "rogue", "rogue");
    let w = Watcher::start(broker.port, "fusiond/rogue");
    let daemon = Daemon::spawn_env(&rogue, &[("CREDENTIALS_DIRECTORY", rogue_dir.path())]);
    let deadline = Instant::now() + *T;
    while !daemon.log().contains("TLS session") {
        assert!(Instant::now() < deadline, "no TLS error in the log:\n{}", daemon.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = daemon.log();
    assert!(log.contains("mqtt.cert_file and mqtt.key_file"), "{log}");
    eprintln!("mtls: {}", log.lines().find(|l| l.contains("TLS session")).unwrap_or_default());
    assert!(!w.all().iter().any(|m| m.topic.ends_with("/available") && m.payload == b"online"), "rogue went online");
    let rogue_secret = std::fs::read_to_string(rogue_dir.path().join("rogue.key")).unwrap();
    for (name, secret) in [("box", &secret), ("rogue", &rogue_secret.lines().nth(1).unwrap().to_string())] {
        assert!(!log.contains(secret.as_str()), "the {name} key is in the log");
    }
    drop(daemon);

    std::fs::remove_file(rogue_dir.path().join("rogue.key")).unwrap();
    let out = crate::util::fusiond_command().args(["run", "--config"]).arg(&rogue).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("mqtt.key_file rogue.key"), "{stderr}");
}
