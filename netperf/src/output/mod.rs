//! Everything the client prints. Figures are computed once, in
//! [`crate::report::Figures`], from both sides' counters; each format only
//! lays them out.

pub mod asked;
pub mod classic;
pub mod json;
pub mod json_types;
pub mod selectors;
pub mod units;

use std::{
    io::{self, IsTerminal, Write},
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use crate::output::asked::Asked;

/// The addresses the banner names.
#[derive(Clone, Debug)]
pub struct Endpoints {
    /// `-L` name or the wildcard netperf shows ("0.0.0.0", "::0").
    pub local_name: String,
    pub local_addr: String,
    pub remote_name: String,
    pub remote_addr: String,
    pub ipv6: bool,
}

impl Endpoints {
    pub fn new(asked: &Asked, peer: SocketAddr) -> Endpoints {
        let ipv6 = peer.is_ipv6();
        let (local_name, local_addr) = match (&asked.local_host, ipv6) {
            (Some(h), _) => (h.clone(), h.clone()),
            (None, false) => ("0.0.0.0".into(), "0.0.0.0".into()),
            (None, true) => ("::0".into(), "::".into()),
        };
        Endpoints {
            local_name,
            local_addr,
            remote_name: asked.host_name().to_string(),
            remote_addr: peer.ip().to_string(),
            ipv6,
        }
    }

    pub fn family(&self) -> &'static str {
        if self.ipv6 { "AF_INET6" } else { "AF_INET" }
    }
}

/// Where a run's output goes: stdout, or a buffer (a test's); shared by
/// the run and the threads that print as it goes (interim lines, the JSON
/// stream), one piece at a time.
#[derive(Clone)]
pub struct Out {
    w: Arc<Mutex<dyn Write + Send>>,
    terminal: bool,
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Out {{ terminal: {} }}", self.terminal)
    }
}

impl Out {
    pub fn stdout() -> Out {
        Out {
            w: Arc::new(Mutex::new(io::stdout())),
            terminal: io::stdout().is_terminal(),
        }
    }

    /// Output into `w`, which is no terminal.
    pub fn to(w: impl Write + Send + 'static) -> Out {
        Out {
            w: Arc::new(Mutex::new(w)),
            terminal: false,
        }
    }

    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// Write and flush; a closed stdout is [`StdoutClosed`], not an I/O
    /// error of the test.
    pub fn emit(&self, bytes: &[u8]) -> anyhow::Result<()> {
        let mut w = self.w.lock().map_err(|_| StdoutClosed)?;
        w.write_all(bytes).map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => anyhow::Error::new(StdoutClosed),
            _ => anyhow::Error::new(e),
        })?;
        w.flush().map_err(|_| StdoutClosed.into())
    }

    /// Write what is printed as the run goes; a failure is left to the
    /// run's own output to report.
    pub fn quietly(&self, bytes: &[u8]) {
        let _ = self.emit(bytes);
    }
}

/// stdout was closed under us (`netperf | head`).
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct StdoutClosed;

/// Test helpers shared by the formats' tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::asked::Asked;

    /// What the output would be told for these words of a command line,
    /// and what each side asked (which a run's measurement carries).
    pub(crate) struct Words {
        pub asked: Asked,
        pub local: proto::SideSpec,
        pub remote: proto::SideSpec,
    }

    impl std::ops::Deref for Words {
        type Target = Asked;
        fn deref(&self) -> &Asked {
            &self.asked
        }
    }

    pub(crate) fn asked(words: &[&str]) -> Words {
        let plan = crate::cli::test_plan(words);
        Words {
            asked: Asked::of(&plan),
            local: plan.local.clone(),
            remote: plan.remote.clone(),
        }
    }
}
