//! A minimal HTTP/1.1 client for `affinity bench http`: one keep-alive
//! connection per simulated client, requests written as bytes, answers
//! read by `Content-Length` (or chunked). The load generator shares the
//! server's two cores, so it should cost as little as a tool like `wrk`;
//! a general client library spends several times the server's own work
//! per small request.

use std::future::Future;
use std::sync::Arc;

use affinity_http::Workers;
use anyhow::{bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Headers larger than this are refused.
const MAX_HEAD: usize = 64 * 1024;

/// A server's address and the headers every request carries.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// `host:port`.
    pub authority: String,
    /// Extra header lines, each ending in `\r\n`.
    pub headers: String,
    /// The in-process server's connection threads, which the clients'
    /// tasks share (see [`Endpoint::spawn`]).
    workers: Option<Arc<Workers>>,
}

impl Endpoint {
    /// From a base URL `http://host:port` (a trailing `/` allowed).
    pub fn parse(base: &str) -> anyhow::Result<Endpoint> {
        let Some(rest) = base.strip_prefix("http://") else {
            bail!("{base:?}: only plain http:// URLs are supported");
        };
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            bail!("{base:?}: expected http://HOST:PORT");
        }
        Ok(Endpoint {
            authority: authority.to_string(),
            headers: String::new(),
            workers: None,
        })
    }

    /// The same endpoint with one more header on every request.
    pub fn with_header(mut self, name: &str, value: &str) -> Endpoint {
        self.headers.push_str(name);
        self.headers.push_str(": ");
        self.headers.push_str(value);
        self.headers.push_str("\r\n");
        self
    }

    /// The same endpoint, its clients run on `workers`' threads.
    pub fn with_workers(mut self, workers: Option<Arc<Workers>>) -> Endpoint {
        self.workers = workers;
        self
    }

    /// Run client `i`'s task: on the in-process server's connection
    /// thread `i` (modulo their number) when it has them, as a client on
    /// another machine would take no core of the server's and a client
    /// task on a thread of its own would preempt the server's threads;
    /// otherwise on this runtime.
    pub fn spawn<F>(&self, i: usize, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.workers {
            Some(workers) => workers.handle(i).spawn(task),
            None => tokio::spawn(task),
        }
    }

    pub async fn connect(&self) -> anyhow::Result<Conn> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("connecting to {}", self.authority))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            endpoint: self.clone(),
            buf: Vec::with_capacity(16 * 1024),
            request: Vec::with_capacity(1024),
        })
    }
}

/// An answer: status and body.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// One keep-alive connection.
pub struct Conn {
    stream: TcpStream,
    endpoint: Endpoint,
    /// Bytes read past the end of the last answer.
    buf: Vec<u8>,
    request: Vec<u8>,
}

impl Conn {
    /// Send one request and read its answer.
    pub async fn send(&mut self, method: &str, path: &str, body: &[u8]) -> anyhow::Result<Answer> {
        self.request.clear();
        let r = &mut self.request;
        r.extend_from_slice(method.as_bytes());
        r.push(b' ');
        r.extend_from_slice(path.as_bytes());
        r.extend_from_slice(b" HTTP/1.1\r\nhost: ");
        r.extend_from_slice(self.endpoint.authority.as_bytes());
        r.extend_from_slice(b"\r\n");
        r.extend_from_slice(self.endpoint.headers.as_bytes());
        if !body.is_empty() || method == "POST" {
            r.extend_from_slice(b"content-type: application/json\r\ncontent-length: ");
            r.extend_from_slice(body.len().to_string().as_bytes());
            r.extend_from_slice(b"\r\n");
        }
        r.extend_from_slice(b"\r\n");
        if body.len() <= 16 * 1024 {
            r.extend_from_slice(body);
            self.stream.write_all(&self.request).await?;
        } else {
            self.stream.write_all(&self.request).await?;
            self.stream.write_all(body).await?;
        }
        self.read_answer().await
    }

    async fn fill(&mut self) -> anyhow::Result<()> {
        // Into the buffer's spare room: no bytes zeroed or copied.
        self.buf.reserve(16 * 1024);
        let n = self.stream.read_buf(&mut self.buf).await?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        Ok(())
    }

    async fn read_answer(&mut self) -> anyhow::Result<Answer> {
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            if self.buf.len() > MAX_HEAD {
                bail!("answer headers over {MAX_HEAD} bytes");
            }
            self.fill().await?;
        };
        let head = std::str::from_utf8(&self.buf[..head_end]).context("answer headers")?;
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad status line in {head:?}"))?;
        let (mut length, mut chunked) = (None, false);
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse::<usize>().context("content-length")?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            }
        }
        self.buf.drain(..head_end);
        let body = match (length, chunked) {
            (_, true) => self.read_chunked().await?,
            (Some(n), false) => {
                while self.buf.len() < n {
                    self.fill().await?;
                }
                let body = self.buf[..n].to_vec();
                self.buf.drain(..n);
                body
            }
            (None, false) => bail!("an answer without content-length"),
        };
        Ok(Answer { status, body })
    }

    async fn read_chunked(&mut self) -> anyhow::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = find(&self.buf, b"\r\n") {
                    break i;
                }
                self.fill().await?;
            };
            let size_text = std::str::from_utf8(&self.buf[..line_end]).context("chunk size")?;
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .with_context(|| format!("chunk size {size_text:?}"))?;
            while self.buf.len() < line_end + 2 + size + 2 {
                self.fill().await?;
            }
            body.extend_from_slice(&self.buf[line_end + 2..line_end + 2 + size]);
            self.buf.drain(..line_end + 2 + size + 2);
            if size == 0 {
                return Ok(body);
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn endpoints_parse_plain_http_only() {
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:8080/").unwrap().authority,
            "127.0.0.1:8080"
        );
        assert!(Endpoint::parse("https://x:1").is_err());
        assert!(Endpoint::parse("http://x:1/path").is_err());
    }

    #[test]
    fn reads_sized_and_chunked_answers_on_one_connection() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = tokio::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut seen = Vec::new();
                let mut chunk = [0u8; 4096];
                while find(&seen, b"\r\n\r\n").is_none() {
                    let n = s.read(&mut chunk).await.unwrap();
                    seen.extend_from_slice(&chunk[..n]);
                }
                // The answer comes in two writes.
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel")
                    .await
                    .unwrap();
                s.write_all(b"lo").await.unwrap();
                while !seen.ends_with(b"{}") {
                    let n = s.read(&mut chunk).await.unwrap();
                    seen.extend_from_slice(&chunk[..n]);
                }
                s.write_all(
                    b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n\
                      3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
                )
                .await
                .unwrap();
                String::from_utf8(seen).unwrap()
            });
            let endpoint = Endpoint::parse(&format!("http://{addr}"))
                .unwrap()
                .with_header("x-algolia-api-key", "k");
            let mut conn = endpoint.connect().await.unwrap();
            let a = conn.send("GET", "/health", b"").await.unwrap();
            assert_eq!((a.status, a.body.as_slice()), (200, b"hello".as_slice()));
            let b = conn.send("POST", "/1/events", b"{}").await.unwrap();
            assert_eq!((b.status, b.body.as_slice()), (404, b"abcde".as_slice()));
            let seen = server.await.unwrap();
            assert!(seen.starts_with("GET /health HTTP/1.1\r\nhost: "), "{seen}");
            assert!(seen.contains("x-algolia-api-key: k\r\n"), "{seen}");
            assert!(seen.contains("content-length: 2\r\n\r\n{}"), "{seen}");
        });
    }
}
