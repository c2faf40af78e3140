//! A QUIC client driven by hand, for tests of a WebTransport endpoint under hostile traffic:
//! Initials from addresses that never answer, handshakes that stall after proving their address.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::net::UdpSocket;

/// A QUIC client driven by hand: it writes real Initials (quinn-proto, ALPN h3) from its own UDP
/// socket and answers only as far as a test says, like a source that forges its address or a
/// client that stalls.
pub struct Prober {
    endpoint: quinn_proto::Endpoint,
    config: quinn_proto::ClientConfig,
    conns: HashMap<quinn_proto::ConnectionHandle, quinn_proto::Connection>,
    socket: UdpSocket,
    host: SocketAddr,
    /// Bytes sent so far.
    pub sent: usize,
}

impl Prober {
    pub async fn new(host: SocketAddr) -> Prober {
        let provider = Arc::new(wtransport::tls::rustls::crypto::ring::default_provider());
        let mut tls = wtransport::tls::rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&wtransport::tls::rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(wtransport::tls::rustls::RootCertStore::empty())
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"h3".to_vec()];
        let crypto = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        Prober {
            endpoint: quinn_proto::Endpoint::new(Default::default(), None, false, None),
            config: quinn_proto::ClientConfig::new(Arc::new(crypto)),
            conns: HashMap::new(),
            socket: UdpSocket::bind("127.0.0.1:0").await.unwrap(),
            host,
            sent: 0,
        }
    }

    /// Sends what connection `ch` has to send now; the bytes sent.
    pub async fn flush(&mut self, ch: quinn_proto::ConnectionHandle) -> usize {
        let mut total = 0;
        let mut buf = Vec::new();
        let conn = self.conns.get_mut(&ch).unwrap();
        while let Some(t) = conn.poll_transmit(Instant::now(), 1, &mut buf) {
            self.socket
                .send_to(&buf[..t.size], self.host)
                .await
                .unwrap();
            total += t.size;
            buf.clear();
        }
        self.sent += total;
        total
    }

    /// Opens a connection and sends its first Initial (padded to 1,200 bytes, as every client
    /// Initial is).
    pub async fn initial(&mut self) {
        let (ch, conn) = self
            .endpoint
            .connect(Instant::now(), self.config.clone(), self.host, "localhost")
            .unwrap();
        self.conns.insert(ch, conn);
        assert!(self.flush(ch).await >= 1200);
    }

    /// The next datagram from the host within `within`.
    pub async fn receive(&self, within: Duration) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 65_536];
        match tokio::time::timeout(within, self.socket.recv_from(&mut buf)).await {
            Ok(Ok((n, _))) => Some(buf[..n].to_vec()),
            _ => None,
        }
    }

    /// The next Retry from the host within `within`, skipping the packets of handshakes the host
    /// went on with.
    pub async fn receive_retry(&self, within: Duration) -> Option<Vec<u8>> {
        let until = Instant::now() + within;
        loop {
            let d = self
                .receive(until.saturating_duration_since(Instant::now()))
                .await?;
            if is_retry(&d) {
                return Some(d);
            }
        }
    }

    /// Hands a datagram from the host to the connection it is for, then sends that connection's
    /// answer (for a Retry: its Initial again, now with the token that proves its address).
    pub async fn answer(&mut self, datagram: Vec<u8>) {
        let mut buf = Vec::new();
        let event = self.endpoint.handle(
            Instant::now(),
            self.host,
            None,
            None,
            BytesMut::from(&datagram[..]),
            &mut buf,
        );
        if let Some(quinn_proto::DatagramEvent::ConnectionEvent(ch, event)) = event {
            self.conns.get_mut(&ch).unwrap().handle_event(event);
            self.flush(ch).await;
        }
    }
}

/// Whether a datagram is a QUIC version 1 Retry (long header, packet type 3; RFC 9000 §17.2.5).
pub fn is_retry(datagram: &[u8]) -> bool {
    datagram.first().is_some_and(|b| b & 0xf0 == 0xf0)
}
