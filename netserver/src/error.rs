//! What goes wrong in netserver, and who is told: a test's client, in an
//! [`ErrorMsg`] on its control connection (the daemon goes on serving
//! others), or the operator, as an [`Error`] that stops the daemon from
//! starting.

use std::{io, net::SocketAddr, path::PathBuf};

use proto::{ErrorCode, ErrorMsg};

/// Why the daemon cannot start or go on serving.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line (printed with a pointer to `-h`).
    #[error("{0}")]
    Usage(#[from] crate::cli::CliError),
    /// No control port could be listened on.
    #[error("cannot listen on {addr}: {source}{}", listen_hint(addr, source))]
    Listen {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The log file (or the record) cannot be opened.
    #[error("{option} {}: {source}", path.display())]
    LogFile {
        option: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A step of starting up (detaching, signals, the accept loop) failed.
    #[error("{what}: {source}")]
    System {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// What the daemon was started with, or asked to bind, cannot be
    /// served (systemd's descriptors, `-L`'s address).
    #[error("{0}")]
    Setup(String),
}

impl Error {
    pub fn system(what: &'static str, e: impl Into<io::Error>) -> Error {
        Error::System {
            what,
            source: e.into(),
        }
    }
}

/// What a refusal to listen needs, where it is a privilege.
fn listen_hint(addr: &SocketAddr, e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::PermissionDenied && addr.port() < 1024 {
        " (a port below 1024 needs root or CAP_NET_BIND_SERVICE: systemd's AmbientCapabilities=CAP_NET_BIND_SERVICE, or `setcap cap_net_bind_service=+ep netserver`)"
    } else {
        ""
    }
}

/// What the client is told when the session aborted its test.
pub(crate) fn aborted() -> ErrorMsg {
    ErrorMsg::new(ErrorCode::TestFailed, "test aborted")
}

/// Turn an engine error into what the client is told.
pub(crate) fn failed(what: &str, e: impl std::fmt::Display) -> ErrorMsg {
    ErrorMsg::new(ErrorCode::TestFailed, format!("{what}: {e}"))
}

/// Which resource an error says ran out, and what gives more of it.
pub(crate) fn shortage(e: &std::io::Error) -> Option<String> {
    use engine::sys;
    if sys::system_out_of_descriptors(e) {
        Some(
            "the system's table of open files is full: raise fs.file-max, or close files elsewhere"
                .to_string(),
        )
    } else if sys::out_of_descriptors(e) {
        let limit = sys::open_files_limit().0;
        Some(format!(
            "its limit is {limit}: raise it, e.g. LimitNOFILE= or ulimit -n"
        ))
    } else if sys::no_buffer_space(e) || e.kind() == std::io::ErrorKind::OutOfMemory {
        Some("the kernel is short of memory".to_string())
    } else {
        None
    }
}

/// A data socket that could not be had: the resource named when one ran out.
pub(crate) fn data_socket_error(
    what: &str,
    e: impl std::fmt::Display,
    io: Option<&std::io::Error>,
) -> ErrorMsg {
    ErrorMsg::new(
        ErrorCode::Resource,
        match io.and_then(shortage) {
            Some(why) => format!("netserver cannot {what}: {e} ({why})"),
            None => format!("netserver cannot {what}: {e}"),
        },
    )
}
