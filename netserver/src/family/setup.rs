//! What every family's `prepare` works from ([`Setup`]) and hands back
//! ([`Prepared`]: the grant, the job, the memory it will take).

use std::net::IpAddr;

use engine::conventions::Conventions;
use proto::{ErrorMsg, Grant, SideResults, TestSpec, Token};

use super::ctl::TestCtl;
use crate::config::Config;

/// What every family's `prepare` works from.
pub(crate) struct Setup<'a> {
    pub spec: &'a TestSpec,
    /// Where the data sockets bind.
    pub local: IpAddr,
    /// The control connection's peer.
    pub peer: IpAddr,
    /// The data path's conventions, from the session's dialect.
    pub conv: Conventions,
    pub cfg: &'a Config,
}

impl Setup<'_> {
    /// A grant's fields that the session, not the family, decides.
    pub fn grant(&self, g: GrantSides) -> Grant {
        Grant {
            data_port: g.data_port,
            token: g.token,
            send_buf: g.bufs.0,
            recv_buf: g.bufs.1,
            send_size: g.sizes.0,
            recv_size: g.sizes.1,
            send_width: g.widths.0,
            recv_width: g.widths.1,
            measure_cpu: self.spec.measure_cpu,
            num_cpus: match self.cfg.num_cpus {
                0 => engine::cpu::count(),
                n => n,
            },
        }
    }
}

/// What a family decides of its grant: (send, receive) pairs of the
/// server's socket buffers, message sizes and ring widths.
pub(crate) struct GrantSides {
    pub data_port: u16,
    pub token: Token,
    pub bufs: (u32, u32),
    pub sizes: (u32, u32),
    pub widths: (u32, u32),
}

/// The server's side of a test, once its sockets are ready.
pub type Job = Box<dyn FnOnce(&TestCtl) -> Result<SideResults, ErrorMsg> + Send>;

/// What a family's `prepare` hands back: the grant, the job, and the
/// buffer memory the job will allocate, as resolved
/// ([`TestSpec::buffer_memory`]), which is reserved before the job runs.
pub(crate) struct Prepared {
    pub grant: Grant,
    pub job: Job,
    pub memory: u64,
}
