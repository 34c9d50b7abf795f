//! The binary's tests start `tidemark serve` through the testkit's one
//! process harness; this names the binary Cargo built for them.

pub(crate) mod worker;

use std::path::Path;

use tidemark_testkit::process::ServerProcess;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_tidemark");

/// A running `tidemark serve` on a free loopback port (the testkit's
/// process harness), without a metrics port unless the test asks for one.
pub(crate) struct Served(ServerProcess);

impl std::ops::Deref for Served {
    type Target = ServerProcess;
    fn deref(&self) -> &ServerProcess {
        &self.0
    }
}

impl std::ops::DerefMut for Served {
    fn deref_mut(&mut self) -> &mut ServerProcess {
        &mut self.0
    }
}

impl Served {
    pub(crate) fn start(args: &[&str], cwd: &Path) -> Self {
        // Tests run in parallel: no metrics port unless the test asks for one.
        let metrics_off: &[&str] = if args.contains(&"--metrics-listen") {
            &[]
        } else {
            &["--metrics-listen", "off"]
        };
        let args: Vec<String> = ["--listen", "127.0.0.1:0"]
            .iter()
            .chain(metrics_off)
            .chain(args)
            .map(|a| (*a).to_owned())
            .collect();
        match ServerProcess::start(Path::new(BIN), &args, cwd, "tidemark") {
            Ok(process) => Self(process),
            Err(e) => panic!("tidemark did not start: {e}"),
        }
    }
}
