//! Server-sent event streams read as they arrive: an HTTP/1.1 GET whose body is left open, and
//! its events one at a time.

use serde_json::Value;

/// One server-sent event: its `event:` name (empty without one) and its `data:` lines, joined
/// by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

/// An HTTP/1.1 answer whose body is read as it arrives (a stream of server-sent events), from
/// [`get_streamed`].
pub struct Streamed {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    body: hyper::body::Incoming,
    buf: Vec<u8>,
    /// The event being read: its name and data lines so far (kept here, so a `next_event`
    /// dropped by a timeout loses nothing).
    event: String,
    data: Option<String>,
}

/// GET `path` at `addr` (`HOST:PORT`), bearing `Authorization: Bearer <token>` when given: the
/// answer's status and type, its body left to read.
pub async fn get_streamed(addr: &str, path: &str, token: Option<&str>) -> Streamed {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::get(path).header("host", addr);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let res = send
        .send_request(
            req.body(http_body_util::Empty::<bytes::Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    Streamed {
        status: res.status().as_u16(),
        headers: res.headers().clone(),
        body: res.into_body(),
        buf: Vec::new(),
        event: String::new(),
        data: None,
    }
}

impl Streamed {
    /// The answer's header `name`, empty without one.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The rest of the body as JSON (`null` when it is not JSON): for a short answer, a refusal.
    pub async fn json(mut self) -> Value {
        use http_body_util::BodyExt;
        while let Some(Ok(frame)) = self.body.frame().await {
            if let Ok(d) = frame.into_data() {
                self.buf.extend_from_slice(&d);
            }
        }
        serde_json::from_slice(&self.buf).unwrap_or(Value::Null)
    }

    /// The next event (comments skipped), or `None` once the stream has ended.
    pub async fn next_event(&mut self) -> Option<SseEvent> {
        use http_body_util::BodyExt;
        loop {
            while let Some(end) = self.buf.iter().position(|b| *b == b'\n') {
                let raw: Vec<u8> = self.buf.drain(..=end).collect();
                let line = String::from_utf8(raw).unwrap();
                let line = line.trim_end_matches('\n').trim_end_matches('\r');
                if line.is_empty() {
                    if let Some(data) = self.data.take() {
                        let event = std::mem::take(&mut self.event);
                        return Some(SseEvent { event, data });
                    }
                    self.event.clear();
                    continue;
                }
                if line.starts_with(':') {
                    continue;
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => value.clone_into(&mut self.event),
                    "data" => match &mut self.data {
                        Some(d) => {
                            d.push('\n');
                            d.push_str(value);
                        }
                        None => self.data = Some(value.to_owned()),
                    },
                    _ => {}
                }
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(d) = frame.into_data() {
                        self.buf.extend_from_slice(&d);
                    }
                }
                _ => return None,
            }
        }
    }
}
