//! An OpenFlow connection's byte stream: the management socket's Unix
//! stream, a `tcp:`/`ptcp:` controller's TCP, or an `ssl:`/`pssl:`
//! controller's TLS over TCP (rustls).
//!
//! TLS is set up as OVS's stream-ssl sets it up: both ends show a
//! certificate, and each must carry the signature of the CA in the
//! `[ssl]` table; a controller without one is refused. As in OVS, the
//! names in a certificate are not checked: a controller is reached by
//! the address in the configuration, and trusted for its CA's signature.
//! TLS 1.2 and 1.3 are offered, with rustls's default cipher suites
//! (ECDHE key exchange, AES-GCM or ChaCha20-Poly1305).

use crate::config::SslFiles;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, ServerConfig,
    ServerConnection, SignatureScheme, StreamOwned,
};
use std::io::{Error, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

/// A connection's byte stream.
pub(super) enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
    TlsServer(Box<StreamOwned<ServerConnection, TcpStream>>),
    TlsClient(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    /// The TCP socket under a controller's stream; `None` for the
    /// management socket's.
    pub(super) fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Stream::Unix(_) => None,
            Stream::Tcp(s) => Some(s),
            Stream::TlsServer(s) => Some(&s.sock),
            Stream::TlsClient(s) => Some(&s.sock),
        }
    }

    pub(super) fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Unix(s) => s.as_fd(),
            Stream::Tcp(s) => s.as_fd(),
            Stream::TlsServer(s) => s.sock.as_fd(),
            Stream::TlsClient(s) => s.sock.as_fd(),
        }
    }

    pub(super) fn set_nonblocking(&self, on: bool) -> std::io::Result<()> {
        match (self, self.tcp()) {
            (Stream::Unix(s), _) => s.set_nonblocking(on),
            (_, Some(t)) => t.set_nonblocking(on),
            (_, None) => Ok(()),
        }
    }

    /// Bound how long a blocking write, or the TLS handshake's reads and
    /// writes, may wait.
    pub(super) fn set_timeouts(&self, t: Option<Duration>) -> std::io::Result<()> {
        match (self, self.tcp()) {
            (Stream::Unix(s), _) => s.set_write_timeout(t),
            (_, Some(s)) => {
                s.set_write_timeout(t)?;
                s.set_read_timeout(t)
            }
            (_, None) => Ok(()),
        }
    }

    /// Plain bytes in; a TLS stream moves its handshake on first (and
    /// says `WouldBlock` until the peer's records come).
    pub(super) fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
            Stream::TlsServer(s) => s.read(buf),
            Stream::TlsClient(s) => s.read(buf),
        }
    }

    /// Write a whole message, and with TLS its records, out to the socket.
    pub(super) fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.write_all(buf),
            Stream::Tcp(s) => s.write_all(buf),
            Stream::TlsServer(s) => s.write_all(buf).and_then(|()| s.flush()),
            Stream::TlsClient(s) => s.write_all(buf).and_then(|()| s.flush()),
        }
    }

    /// A TLS stream whose handshake has not finished: nothing may be
    /// sent on it yet.
    pub(super) fn handshaking(&self) -> bool {
        match self {
            Stream::TlsServer(s) => s.conn.is_handshaking(),
            Stream::TlsClient(s) => s.conn.is_handshaking(),
            _ => false,
        }
    }
}

/// The TLS settings from the `[ssl]` table, read once at the start.
#[derive(Clone)]
pub(super) struct Tls {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl Tls {
    /// Read the key and certificates; the error names the file and what
    /// is wrong with it.
    pub(super) fn load(files: &SslFiles) -> std::io::Result<Tls> {
        let bad = |file: &str, what: String| {
            Error::new(ErrorKind::InvalidInput, format!("[ssl] {file}: {what}"))
        };
        let certs = |path: &str| -> std::io::Result<Vec<CertificateDer<'static>>> {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| bad(path, e.to_string()))?;
            if certs.is_empty() {
                return Err(bad(path, "no CERTIFICATE in it".into()));
            }
            Ok(certs)
        };
        let chain = certs(&files.certificate)?;
        let key = PrivateKeyDer::from_pem_file(&files.private_key)
            .map_err(|e| bad(&files.private_key, e.to_string()))?;
        let mut roots = RootCertStore::empty();
        for c in certs(&files.ca_cert)? {
            roots
                .add(c)
                .map_err(|e| bad(&files.ca_cert, format!("not a CA certificate: {e}")))?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = |e: rustls::Error| Error::new(ErrorKind::InvalidInput, format!("[ssl]: {e}"));
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(|e| bad(&files.ca_cert, e.to_string()))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(tls)?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| bad(&files.certificate, format!("does not go with the key: {e}")))?;
        let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| bad(&files.ca_cert, e.to_string()))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SignedByCa(server_verifier)))
            .with_client_auth_cert(chain, key)
            .map_err(|e| bad(&files.certificate, format!("does not go with the key: {e}")))?;
        Ok(Tls {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// The server side of an accepted `pssl:` connection; its handshake
    /// goes on as its records come.
    pub(super) fn accept(&self, sock: TcpStream) -> std::io::Result<Stream> {
        let conn = ServerConnection::new(self.server.clone()).map_err(Error::other)?;
        Ok(Stream::TlsServer(Box::new(StreamOwned::new(conn, sock))))
    }

    /// The client side of an `ssl:` connection: its ClientHello is sent
    /// now, the rest of the handshake as the controller's records come.
    pub(super) fn connect(&self, sock: TcpStream, to: SocketAddr) -> std::io::Result<Stream> {
        let name = ServerName::IpAddress(to.ip().into());
        let conn = ClientConnection::new(self.client.clone(), name).map_err(Error::other)?;
        let mut s = StreamOwned::new(conn, sock);
        match s.conn.complete_io(&mut s.sock) {
            Err(e) if e.kind() != ErrorKind::WouldBlock => return Err(e),
            _ => {}
        }
        Ok(Stream::TlsClient(Box::new(s)))
    }
}

/// A controller's certificate is checked as webpki checks it (chain to
/// the CA, validity, signatures), except for its names: OVS does not
/// check them either, and a controller is configured by address.
#[derive(Debug)]
struct SignedByCa(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for SignedByCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error as E};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(E::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
