//! An export's spool: the database snapshot is read to its end as fast as
//! the database gives it, ahead of the client, so no transaction waits on a
//! client that reads slowly or not at all (SPEC §8). Messages are kept in
//! memory up to a bound, then in a temporary file, and handed to the
//! client in order.

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::{Arc, Mutex, PoisonError};

use prost::Message;
use tidemark_proto::v1 as pb;
use tokio::sync::Notify;

/// Bytes of encoded messages kept in memory before the spool spills to a
/// temporary file.
pub(crate) const MEMORY_BOUND: usize = 8 * 1024 * 1024;

/// The spool shared by its writer (the database side) and its reader (the
/// client side). Dropping the reader tells the writer to stop.
pub(crate) struct Spool {
    state: Mutex<State>,
    changed: Notify,
    memory_bound: usize,
}

#[derive(Default)]
struct State {
    memory: VecDeque<Vec<u8>>,
    memory_bytes: usize,
    /// Once spilled, every later message goes to the file, so the order
    /// holds: memory first, then the file.
    file: Option<tempfile::NamedTempFile>,
    /// Records written to the file and not yet read.
    file_records: usize,
    read_at: u64,
    write_at: u64,
    /// How the writer ended: `Ok` after the last message, or the error
    /// that ends the stream.
    finished: Option<Result<(), tonic::Status>>,
    reader_gone: bool,
}

impl Spool {
    /// A spool keeping up to `memory_bound` bytes in memory.
    pub(crate) fn new(memory_bound: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            memory_bound,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends `message`; `Ok(false)` when the reader has gone (stop
    /// producing), an error when the temporary file cannot be written.
    pub(crate) fn push(&self, message: &pb::ExportStateResponse) -> std::io::Result<bool> {
        let bytes = message.encode_to_vec();
        let mut state = self.state();
        if state.reader_gone {
            return Ok(false);
        }
        if state.file.is_none() && state.memory_bytes + bytes.len() <= self.memory_bound {
            state.memory_bytes += bytes.len();
            state.memory.push_back(bytes);
        } else {
            if state.file.is_none() {
                state.file = Some(tempfile::Builder::new().prefix("tidemark-export-").tempfile()?);
            }
            let at = state.write_at;
            let file = state.file.as_mut().expect("just created").as_file_mut();
            file.seek(SeekFrom::Start(at))?;
            let len = u32::try_from(bytes.len()).map_err(std::io::Error::other)?;
            file.write_all(&len.to_le_bytes())?;
            file.write_all(&bytes)?;
            state.write_at = at + 4 + u64::from(len);
            state.file_records += 1;
        }
        drop(state);
        self.changed.notify_one();
        Ok(true)
    }

    /// The writer is done: `Ok` after its last message, or the error that
    /// ends the stream.
    pub(crate) fn finish(&self, outcome: Result<(), tonic::Status>) {
        self.state().finished = Some(outcome);
        self.changed.notify_one();
    }

    /// The reader gives up (the client went away or stalled): the writer
    /// stops at its next message, and what was spooled is freed.
    pub(crate) fn abandon(&self) {
        let mut state = self.state();
        state.reader_gone = true;
        state.memory.clear();
        state.memory_bytes = 0;
        state.file = None;
    }

    /// The next message in order; `None` after the last one when the
    /// writer finished well, the writer's error when it did not.
    pub(crate) async fn next(&self) -> Option<Result<pb::ExportStateResponse, tonic::Status>> {
        loop {
            let notified = self.changed.notified();
            {
                let mut state = self.state();
                if let Some(bytes) = state.memory.pop_front() {
                    state.memory_bytes -= bytes.len();
                    return Some(decode(&bytes));
                }
                if state.file_records > 0 {
                    return Some(read_record(&mut state));
                }
                match &state.finished {
                    Some(Ok(())) => return None,
                    Some(Err(status)) => return Some(Err(status.clone())),
                    None => {}
                }
            }
            notified.await;
        }
    }
}

fn decode(bytes: &[u8]) -> Result<pb::ExportStateResponse, tonic::Status> {
    pb::ExportStateResponse::decode(bytes)
        .map_err(|e| tonic::Status::internal(format!("the export spool is damaged: {e}")))
}

fn read_record(state: &mut State) -> Result<pb::ExportStateResponse, tonic::Status> {
    let spool_error =
        |e: std::io::Error| tonic::Status::unavailable(format!("cannot read the export's spool file: {e}"));
    let at = state.read_at;
    let file = state
        .file
        .as_mut()
        .ok_or_else(|| tonic::Status::internal("the export spool lost its file"))?
        .as_file_mut();
    file.seek(SeekFrom::Start(at)).map_err(spool_error)?;
    let mut len = [0u8; 4];
    file.read_exact(&mut len).map_err(spool_error)?;
    let len = u32::from_le_bytes(len);
    let mut bytes = vec![0; len as usize];
    file.read_exact(&mut bytes).map_err(spool_error)?;
    state.read_at = at + 4 + u64::from(len);
    state.file_records -= 1;
    decode(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(i: usize) -> pb::ExportStateResponse {
        pb::ExportStateResponse {
            lines: vec![format!("line {i} {}", "x".repeat(100))],
        }
    }

    #[tokio::test]
    async fn messages_come_back_in_order_across_memory_and_the_file() {
        // A bound of three messages: the rest go to the file.
        let spool = Spool::new(3 * message(0).encoded_len());
        for i in 0..10 {
            assert!(spool.push(&message(i)).unwrap());
        }
        assert!(spool.state().file.is_some(), "spilled to a file");
        assert_eq!(spool.state().memory.len(), 3);
        spool.finish(Ok(()));
        for i in 0..10 {
            assert_eq!(spool.next().await.unwrap().unwrap(), message(i));
        }
        assert!(spool.next().await.is_none());
    }

    #[tokio::test]
    async fn a_reader_waits_for_the_writer_and_sees_its_error_last() {
        let spool = Spool::new(MEMORY_BOUND);
        let reader = {
            let spool = Arc::clone(&spool);
            tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    match spool.next().await {
                        None => break,
                        Some(Ok(m)) => got.push(Ok(m)),
                        Some(Err(s)) => {
                            got.push(Err(s.code()));
                            break;
                        }
                    }
                }
                got
            })
        };
        tokio::task::yield_now().await;
        spool.push(&message(1)).unwrap();
        spool.finish(Err(tonic::Status::unavailable("database gone")));
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), reader)
            .await
            .expect("the reader is woken")
            .unwrap();
        assert_eq!(got, [Ok(message(1)), Err(tonic::Code::Unavailable)]);
    }

    #[test]
    fn an_abandoned_spool_frees_what_it_held_and_stops_the_writer() {
        let spool = Spool::new(message(0).encoded_len());
        for i in 0..5 {
            spool.push(&message(i)).unwrap();
        }
        let path = spool.state().file.as_ref().unwrap().path().to_owned();
        assert!(path.exists());
        spool.abandon();
        assert!(!path.exists(), "the temporary file is removed");
        assert!(!spool.push(&message(6)).unwrap(), "the writer is told to stop");
    }
}
