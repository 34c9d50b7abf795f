//! A tidemark replica under test: its process, how to restart it, its clock.

use std::path::{Path, PathBuf};

use tidemark_testkit::process::ServerProcess;

use crate::proxy::Proxy;

/// A replica: its process, arguments (to restart it identically) and the
/// proxy in front of it.
pub(crate) struct Replica {
    pub(crate) name: String,
    pub(crate) process: Option<ServerProcess>,
    pub(crate) args: Vec<String>,
    /// Its environment (libfaketime's, for the replica whose clock jumps).
    pub(crate) env: Vec<(String, String)>,
    pub(crate) proxy: Proxy,
}

impl Replica {
    pub(crate) fn restart(&mut self, binary: &Path, dir: &Path) -> anyhow::Result<()> {
        self.process = Some(ServerProcess::start_with_env(
            binary, &self.args, &self.env, dir, &self.name,
        )?);
        Ok(())
    }
}

/// The file libfaketime reads the second replica's clock offset from.
pub(crate) fn clock_file(dir: &Path) -> PathBuf {
    dir.join("replica-1.clock")
}

/// Sets the second replica's clock offset (libfaketime's format: `+30`,
/// `-30`, seconds); libfaketime rereads it within a second.
pub(crate) fn set_replica_clock(dir: &Path, offset: &str) -> anyhow::Result<()> {
    std::fs::write(clock_file(dir), format!("{offset}\n"))?;
    Ok(())
}
