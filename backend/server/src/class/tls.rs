//! TLS between a class listener and its followers, without a certificate authority: the
//! instructor's Scalebook makes a self-signed certificate once and keeps it, the class link
//! carries the certificate's SHA-256 fingerprint, and a follower accepts exactly that
//! certificate. Host names are not checked (a login node has many, a laptop none that others
//! resolve): the pinned fingerprint is the whole of the trust.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, ring};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, OtherError, ServerConfig, SignatureScheme};
use scalebook_shared::protocol::{ClassAddress, ClassLink};
use sha2::{Digest, Sha256};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::either::Either;

use crate::Error;
use crate::token::hex;

/// The certificate and key files in the class directory.
const CERTIFICATE: &str = "certificate.der";
const KEY: &str = "key.der";

/// The class listener's certificate and its private key.
pub struct Identity {
    certificate: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Identity {
    /// The certificate kept in `dir`, or a new one made for `names` and kept there (the key
    /// readable by its owner only), so the fingerprint in every class link handed out stays
    /// good across restarts.
    pub fn load_or_make(dir: &Path, names: Vec<String>) -> Result<Identity, Error> {
        let (certificate_path, key_path) = (dir.join(CERTIFICATE), dir.join(KEY));
        if certificate_path.exists() && key_path.exists() {
            let certificate = CertificateDer::from(std::fs::read(&certificate_path)?);
            let key = PrivatePkcs8KeyDer::from(std::fs::read(&key_path)?);
            return Ok(Identity { certificate, key });
        }
        let made = rcgen::generate_simple_self_signed(names).map_err(|e| Error::Class(format!("cannot make a certificate: {e}")))?;
        let certificate = made.cert.der().clone();
        let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
        write_private(&key_path, key.secret_pkcs8_der())?;
        write_private(&certificate_path, &certificate)?;
        tracing::info!(dir = %dir.display(), "made the class listener's certificate");
        Ok(Identity { certificate, key })
    }

    /// The certificate's SHA-256 fingerprint, as the class link carries it.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.certificate)
    }

    /// The TLS settings of the class listener.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, Error> {
        let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .and_then(|builder| {
                builder.with_no_client_auth().with_single_cert(vec![self.certificate.clone()], PrivateKeyDer::Pkcs8(self.key.clone_key()))
            })
            .map_err(|e| Error::Class(format!("the class listener's certificate is unusable: {e}")))?;
        Ok(Arc::new(config))
    }
}

/// The SHA-256 fingerprint of a certificate, in lowercase hex.
pub fn fingerprint(certificate: &[u8]) -> String {
    hex(&Sha256::digest(certificate))
}

/// Writes `bytes` to `path` readable by its owner only, from the start. The file aside is
/// made anew, never opened through a link: a link planted in its place (`x.partial` ->
/// another file) would otherwise have that file overwritten with a secret, and given away.
/// One a crash left behind is removed first (the link itself, not what it names).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    let partial = PathBuf::from(format!("{}.partial", path.display()));
    if let Err(e) = std::fs::remove_file(&partial)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(e.into());
    }
    let no_follow = nix::fcntl::OFlag::O_NOFOLLOW.bits();
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).custom_flags(no_follow).mode(0o600).open(&partial)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(partial, path)?;
    Ok(())
}

/// The TLS settings of a follower: only the certificate whose fingerprint is `expected`.
pub fn pinned_client(expected: &str) -> Arc<ClientConfig> {
    let provider = Arc::new(ring::default_provider());
    let verifier = Arc::new(PinnedCertificate { expected: expected.to_owned(), provider: provider.clone() });
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|builder| builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth());
    // The ring provider supports the safe default versions; nothing else can fail here.
    Arc::new(config.unwrap_or_else(|_| unreachable!("ring supports TLS 1.2 and 1.3")))
}

/// The certificate a server presented is not the one the class link names.
#[derive(Debug, thiserror::Error)]
#[error("the class server's certificate has fingerprint {seen}, but the class link says {expected}")]
pub struct FingerprintMismatch {
    pub seen: String,
    pub expected: String,
}

/// Whether `error` (from a TLS connection) is a [`FingerprintMismatch`], and which.
pub fn mismatch_in(error: &std::io::Error) -> Option<&FingerprintMismatch> {
    match error.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(inner))) => inner.downcast_ref::<FingerprintMismatch>(),
        _ => None,
    }
}

#[derive(Debug)]
struct PinnedCertificate {
    expected: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = fingerprint(end_entity);
        if seen == self.expected {
            return Ok(ServerCertVerified::assertion());
        }
        let mismatch = FingerprintMismatch { seen, expected: self.expected.clone() };
        Err(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(mismatch)))))
    }

    // The handshake's signatures are checked as usual: they prove the server holds the key of
    // the pinned certificate.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// How long reaching the class listener may take, TCP and TLS each.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the class listener of a link could not be reached.
pub enum Unreached {
    /// Not worth trying again: the reason, for the learner.
    Refused(String),
    /// Away for now: what happened.
    Away(String),
}

/// A connection to a class listener: its TCP port, or its Unix socket on this host.
pub type Wire = Either<TcpStream, UnixStream>;

/// A connection to the class listener at `address`, before TLS.
pub async fn connect(address: &ClassAddress) -> std::io::Result<Wire> {
    match address {
        ClassAddress::Tcp { host, port } => TcpStream::connect((host.as_str(), *port)).await.map(Either::Left),
        ClassAddress::Unix(path) => UnixStream::connect(path).await.map(Either::Right),
    }
}

/// A TLS connection to the class listener of `link`, its certificate pinned (over a Unix
/// socket too: the link's secrets then cross nothing but the kernel, and the pin still tells
/// the instructor's listener from a socket someone else made).
pub async fn reach(link: &ClassLink) -> Result<TlsStream<Wire>, Unreached> {
    let address = link.address();
    let connected = tokio::time::timeout(CONNECT_TIMEOUT, connect(&link.address)).await;
    let wire = connected
        .map_err(|_| Unreached::Away(format!("{address} did not answer within {} s", CONNECT_TIMEOUT.as_secs())))?
        .map_err(|e| Unreached::Away(format!("cannot reach {address}: {e}")))?;
    let name = ServerName::try_from(link.host_name().to_owned())
        .map_err(|e| Unreached::Refused(format!("the class link's host is unusable: {e}")))?;
    tokio::time::timeout(CONNECT_TIMEOUT, TlsConnector::from(pinned_client(&link.fingerprint)).connect(name, wire))
        .await
        .map_err(|_| Unreached::Away(format!("{address} did not finish the TLS handshake")))?
        .map_err(|e| match mismatch_in(&e) {
            // Someone else may hold the class port while the instructor's Scalebook is down:
            // the pinned certificate keeps them out, and the instructor's comes back to it.
            Some(mismatch) => Unreached::Away(format!(
                "{mismatch}: what answers at {address} is not the instructor's class listener (another program holds the port, or the link is wrong); trying again (if it lasts, ask your instructor for the class link again)"
            )),
            None => Unreached::Away(format!("TLS with {address} failed: {e}")),
        })
}

/// The `Authorization` header that presents the link's follower token.
pub fn bearer(link: &ClassLink) -> Result<axum::http::HeaderValue, Error> {
    let unusable = |_| Error::ClassRule { field: "token", rule: "the class link's token is unusable".into() };
    format!("Bearer {}", link.bearer()).parse().map_err(unusable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_made_once_and_kept_with_a_private_key() {
        use std::os::unix::fs::PermissionsExt;

        let dir = tempfile::tempdir().unwrap();
        let made = Identity::load_or_make(dir.path(), vec!["localhost".into()]).unwrap();
        let again = Identity::load_or_make(dir.path(), vec!["other".into()]).unwrap();
        assert_eq!(made.fingerprint(), again.fingerprint(), "a restart keeps the certificate");
        assert_eq!(made.fingerprint().len(), 64);
        let mode = std::fs::metadata(dir.path().join(KEY)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(made.server_config().is_ok());
    }

    #[test]
    fn a_link_planted_where_a_secret_is_written_aside_is_not_followed() {
        use std::os::unix::fs::PermissionsExt;

        let dir = tempfile::tempdir().unwrap();
        let (secret, elsewhere) = (dir.path().join(".class-link"), dir.path().join("elsewhere"));
        std::fs::write(&elsewhere, "theirs").unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(".class-link.partial")).unwrap();
        write_private(&secret, b"token").unwrap();
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "theirs", "the link's target was written");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "token");
        let meta = std::fs::symlink_metadata(&secret).unwrap();
        assert!(meta.is_file() && meta.permissions().mode() & 0o777 == 0o600, "{meta:?}");
    }
}
