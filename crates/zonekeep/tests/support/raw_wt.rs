//! A WebTransport session driven by hand (the endpoint discovered as the SDK does, the control
//! stream written and read raw), for clients that break the rules.

use zonekeep_client::connection::webtransport::discover;
use zonekeep_protocol::messages::{tag, ClientMessage, Hello, KickCode, ServerMessage};
use zonekeep_protocol::wire::put_varint;

/// A raw WebTransport session to a server's endpoint (discovered as the SDK does) and its
/// control stream, for clients that break the rules.
pub struct RawSession {
    /// The session.
    pub conn: wtransport::Connection,
    /// Its control stream, this end.
    pub send: wtransport::SendStream,
    /// Its control stream, the server's end.
    pub recv: wtransport::RecvStream,
}

impl RawSession {
    /// Opens a session to `zone` at the server at `addr` and sends a Hello with `ticket`.
    pub async fn hello(addr: &str, zone: &str, ticket: String) -> RawSession {
        let versions = vec![zonekeep_protocol::limits::PROTOCOL_VERSION];
        RawSession::hello_of(addr, zone, ticket, versions).await
    }

    /// Opens a session to `zone` at the server at `addr` and sends a Hello with `ticket`,
    /// offering `versions`.
    pub async fn hello_of(
        addr: &str,
        zone: &str,
        ticket: String,
        versions: Vec<u32>,
    ) -> RawSession {
        let found = discover(&format!("ws://{addr}/zones/{zone}"))
            .await
            .unwrap();
        let endpoint = wtransport::Endpoint::client(found.client_config()).unwrap();
        let conn = endpoint
            .connect(format!("{}/zones/{zone}", found.url))
            .await
            .unwrap();
        let (send, recv) = conn.open_bi().await.unwrap().await.unwrap();
        let mut s = RawSession { conn, send, recv };
        s.send_hello(ticket, versions).await;
        s
    }

    /// Sends a Hello with `ticket`, offering `versions`, on the control stream.
    pub async fn send_hello(&mut self, ticket: String, versions: Vec<u32>) {
        let hello = ClientMessage::Hello(Hello {
            versions,
            ticket,
            reconnect_token: vec![],
            content_version: String::new(),
            resume_from: None,
        })
        .to_bytes()
        .unwrap();
        self.write(&hello).await;
    }

    /// Writes one message (its length first) on the control stream.
    pub async fn write(&mut self, message: &[u8]) {
        let mut framed = Vec::new();
        put_varint(&mut framed, message.len() as u64);
        framed.extend_from_slice(message);
        self.send.write_all(&framed).await.unwrap();
    }

    /// The next message on the control stream that reads without a schema (States and Deltas
    /// too large for a datagram are passed over), `None` when it ended.
    pub async fn next(&mut self) -> Option<ServerMessage> {
        loop {
            let mut len = 0u64;
            for i in 0..5 {
                let mut b = [0u8; 1];
                match self.recv.read(&mut b).await {
                    Ok(Some(1)) => {}
                    _ => return None,
                }
                len |= u64::from(b[0] & 0x7f) << (7 * i);
                if b[0] & 0x80 == 0 {
                    break;
                }
            }
            let mut body = vec![0u8; len as usize];
            self.recv.read_exact(&mut body).await.ok()?;
            if matches!(body.first(), Some(&(tag::STATE | tag::DELTA))) {
                continue;
            }
            return Some(ServerMessage::decode(&body, None).unwrap());
        }
    }

    /// The Kick on the control stream before it ended, and the session's application close code.
    pub async fn kicked(&mut self) -> (Option<KickCode>, u64) {
        let kick = loop {
            match self.next().await {
                Some(ServerMessage::Kick(k)) => break Some(k.code),
                Some(_) => continue,
                None => break None,
            }
        };
        let code = match self.conn.closed().await {
            wtransport::error::ConnectionError::ApplicationClosed(c) => c.code().into_inner(),
            other => panic!("the session ended without an application close: {other}"),
        };
        (kick, code)
    }
}
