//! The CLI pointed at one of tidemark's HTTP ports (the console's or the
//! metrics') instead of its gRPC port. The call then fails with a transport
//! error that says nothing of the kind (`CANCELLED: operation was
//! canceled` against the console, `UNKNOWN: transport error` against the
//! metrics). Only after such a failure, the address is asked over HTTP/1.1
//! once: when it answers HTTP, the error says which port that is and which
//! one is gRPC.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{CallFailed, Connection};

/// A gRPC call sent to an HTTP port (exit code 5: no gRPC server was
/// reached).
#[derive(Debug, thiserror::Error)]
#[error(
    "{server} answers HTTP/1.1, not gRPC: it is {what}. The CLI needs tidemark's gRPC port, the one `tidemark serve \
     --listen` names (127.0.0.1:50051 by default): give it with --server or TIDEMARK_SERVER"
)]
pub(crate) struct NotGrpc {
    server: String,
    what: &'static str,
}

/// `result`, with a failure that came from talking gRPC to an HTTP port
/// said as such.
pub(crate) async fn explained<T>(result: anyhow::Result<T>, connection: &Connection) -> anyhow::Result<T> {
    let error = match result {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    let transport = error.downcast_ref::<CallFailed>().is_some_and(|f| f.transport);
    if !transport {
        return Err(error);
    }
    match http_answer(&connection.server).await {
        Some(answer) => Err(anyhow::Error::new(NotGrpc {
            server: connection.server.clone(),
            what: what_answers(&answer),
        })),
        None => Err(error),
    }
}

/// Which of tidemark's HTTP ports answered so.
fn what_answers(answer: &str) -> &'static str {
    let lower = answer.to_ascii_lowercase();
    if lower.contains("content-security-policy") {
        "tidemark's console (--console-listen)"
    } else if lower.contains("text/plain") || lower.contains("openmetrics") || lower.contains("# type") {
        "a metrics port (--metrics-listen)"
    } else {
        "an HTTP server (tidemark's console or metrics port, or something else)"
    }
}

/// The start of the answer to `GET /` at `server`, if it speaks HTTP/1.
async fn http_answer(server: &str) -> Option<String> {
    let address = server
        .split_once("://")
        .map_or(server, |(_, rest)| rest)
        .trim_end_matches('/');
    let limit = Duration::from_secs(2);
    let asked = async {
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        let request = format!("GET / HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        while answer.len() < 16 * 1024 {
            let n = stream.read(&mut buffer).await.ok()?;
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buffer[..n]);
        }
        Some(String::from_utf8_lossy(&answer).into_owned())
    };
    let answer = tokio::time::timeout(limit, asked).await.ok()??;
    answer.starts_with("HTTP/1.").then_some(answer)
}

#[cfg(test)]
mod tests {
    use super::what_answers;

    #[test]
    fn the_ports_are_told_apart() {
        let console = "HTTP/1.1 303 See Other\r\ncontent-security-policy: default-src 'none'\r\n\r\n";
        assert!(what_answers(console).contains("console"));
        let metrics = "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\r\n# TYPE x counter\n";
        assert!(what_answers(metrics).contains("metrics"));
        assert!(what_answers("HTTP/1.1 404 Not Found\r\n\r\n").contains("something else"));
    }
}
