//! The outputs' seam. Figures are computed once, in
//! [`crate::report::Figures`], from both sides' counters; each output
//! only lays them out, and each implements [`Reporter`]. The results
//! document (`--json`) is here, as a netserver answers a third-party test
//! with it; netperf 2.7's tables and selectors, and the picture, are the
//! netperf program's (`run::set_tables`, `run::set_plotter`).
//!
//! # Layout
//! - [`run_info`]: what the outputs know of a run ([`Test`]: what only the
//!   command line knows, and the request).
//! - [`json`]: `--json` (its types in [`json_types`]); [`units`]: C's `%g`.
//! - this file: the [`Reporter`] trait, the [`Results`] every output
//!   reads, where output goes ([`Out`]), the banner's addresses, and the
//!   receiving end's words.
//!
//! The JSON stream is a reporter too (`events`).

pub mod json;
pub mod json_types;
pub mod run_info;
pub mod units;

use std::{
    io::{self, IsTerminal, Write},
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use proto::TestKind;

use crate::{
    confidence::Verdict,
    report::{Figures, Measurement},
};
pub use run_info::{RunInfo, Test};

/// One output of a run (netperf's classic tables, its selectors, the JSON
/// document, the JSON stream, the picture); `run` picks them once.
pub trait Reporter {
    /// Before the first iteration (the banner, the stream's start).
    fn begin(&mut self, _t: &Test, _server: &Server) -> anyhow::Result<()> {
        Ok(())
    }
    /// Iteration `i` of a confidence run is over.
    fn iteration(&mut self, _t: &Test, _i: u32, _f: &Figures) {}
    /// The run is over: its results.
    fn finish(&mut self, r: &Results<'_>) -> anyhow::Result<()>;
}

/// The netserver a run talked to, as the outputs name it.
#[derive(Clone, Debug)]
pub struct Server {
    /// Our end and its end of the control connection.
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub software: String,
    /// It was started in this process, as none answered.
    pub embedded: bool,
}

/// A run's results, as every output reads them.
#[derive(Debug)]
pub struct Results<'a> {
    pub test: &'a Test,
    pub server: &'a Server,
    /// Each iteration's measurement and figures, and the last's.
    pub runs: &'a [(Measurement, Figures)],
    pub last: &'a Measurement,
    /// The figures printed: the iterations' means.
    pub figures: &'a Figures,
    /// With `-I`/`-i`: whether the result is confident.
    pub verdict: Option<&'a Verdict>,
}

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
    pub fn new(t: &Test, peer: SocketAddr) -> Endpoints {
        let ipv6 = peer.is_ipv6();
        let (local_name, local_addr) = match (&t.ours.local_host, ipv6) {
            (Some(h), _) => (h.clone(), h.clone()),
            (None, false) => ("0.0.0.0".into(), "0.0.0.0".into()),
            (None, true) => ("::0".into(), "::".into()),
        };
        Endpoints {
            local_name,
            local_addr,
            remote_name: t.host_name.to_string(),
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

/// `part` as a percentage of `whole` (0 of nothing).
pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The end that received the stream, as the lines name it, and its counts.
pub fn receiver<'m>(t: &Test, m: &'m Measurement) -> (&'static str, &'m proto::SideResults) {
    match t.kind() {
        TestKind::TcpMaerts => ("netperf", &m.local.counts),
        _ => ("the netserver", &m.remote.counts),
    }
}
