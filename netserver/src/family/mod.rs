//! The server's side of each test family, and what they share: the data
//! listener, the token check on incoming data connections, and the control
//! block through which the session stops or aborts a running test.

pub mod ctl;
pub mod data;
pub mod proof;
pub mod rr;
pub mod running;
pub mod setup;
pub mod stream;
pub mod udp_stream;

pub use ctl::TestCtl;
pub use data::MIN_CLIENT_PORT;
pub use running::RunningTest;
pub use setup::Job;

use std::net::IpAddr;

use engine::conventions::Conventions;
use proto::{ErrorCode, ErrorMsg, TestKind, TestSpec};

use crate::{admission::Refusal, shared::Shared};
use data::data_address;
use running::Held;
use setup::Setup;

/// Set up the data sockets for `spec` and start its worker thread.
/// `local` is the control connection's local address: data sockets bind to
/// it (or to the address of this host netperf named with `-- -H`), never to
/// the wildcard.
/// `conv`: the data path's conventions of the session's dialect.
pub(crate) fn start(
    spec: &TestSpec,
    local: IpAddr,
    peer: IpAddr,
    conv: Conventions,
    shared: &Shared,
    handed: Option<data::HandedSocks>,
    on_done: Box<dyn Fn() + Send>,
) -> Result<RunningTest, ErrorMsg> {
    let cfg = &shared.config;
    // Each session runs one test at a time, but the worker of an aborted
    // one may still be ending: at most as many workers as sessions.
    let slot = shared
        .workers
        .enter(cfg.max_sessions.max(1))
        .map_err(|alive| Refusal::Workers { alive }.told(&cfg.metrics))?;
    if let Some(why) = platform_lacks(spec) {
        return Err(ErrorMsg::new(ErrorCode::Unsupported, why));
    }
    // every descriptor the test can hold, before one is opened
    let fds = shared
        .descriptors
        .reserve(peer, spec.server_descriptors(engine::cpu::count()))
        .map_err(|why| {
            Refusal::Descriptors {
                why,
                flows: spec.flows,
            }
            .told(&cfg.metrics)
        })?;
    // what its sockets can hold of the kernel's memory, held to a share
    let (spec, sockets) = socket_memory(spec, cfg)?;
    let spec = &spec;
    let setup = Setup {
        spec,
        local: data_address(spec, local)?,
        peer,
        conv,
        cfg,
    };
    // Sizes, widths and placement resolved, data sockets bound; nothing of
    // the test's buffers allocated yet.
    let prepared = match spec.kind {
        TestKind::TcpStream | TestKind::TcpMaerts => {
            let handed = match handed {
                Some(data::HandedSocks::Tcp(h)) => Some(h),
                _ => None,
            };
            stream::prepare(&setup, handed)?
        }
        TestKind::UdpStream | TestKind::UdpMaerts => match handed {
            Some(data::HandedSocks::Udp(h)) => udp_stream::prepare_handed(&setup, h)?,
            _ => udp_stream::prepare(&setup)?,
        },
        TestKind::TcpRr
        | TestKind::UdpRr
        | TestKind::TcpCrr
        | TestKind::TcpCc
        | TestKind::UdpStamp => rr::prepare(&setup)?,
    };
    running::launch(
        spec,
        prepared,
        cfg,
        Held {
            _slot: slot,
            _fds: fds,
            _sockets: sockets,
        },
        on_done,
    )
}

/// The test as it will run, its socket buffers held to a test's share of
/// `--socket-budget` (a quarter), and that much reserved: buffers the
/// client left to the server are set to fit; what the client asked for
/// and cannot fit is refused with the figure.
fn socket_memory(
    spec: &TestSpec,
    cfg: &crate::config::Config,
) -> Result<(TestSpec, crate::admission::Reservation), ErrorMsg> {
    let budget = &cfg.socket_budget;
    let share = budget.limit() / 4;
    let fit = spec
        .socket_memory(&engine::sys::kernel_buffers(), share)
        .map_err(|need| {
            Refusal::SocketShare {
                need,
                share,
                flows: spec.flows.max(1),
            }
            .told(&cfg.metrics)
        })?;
    let reserved = budget.reserve(fit.bytes).map_err(|free| {
        Refusal::SocketBusy {
            bytes: fit.bytes,
            free,
            limit: budget.limit(),
        }
        .told(&cfg.metrics)
    })?;
    let mut spec = spec.clone();
    if let Some(b) = fit.send_buf {
        spec.server.send_buf = Some(b);
    }
    if let Some(b) = fit.recv_buf {
        spec.server.recv_buf = Some(b);
    }
    Ok((spec, reserved))
}

/// What the test asks of this netserver's data path that its platform
/// lacks (Linux's own calls), in one line naming the option and the
/// platform.
fn platform_lacks(spec: &TestSpec) -> Option<String> {
    use engine::sys::lacks;
    let p = spec.paths;
    [
        (p.rx == proto::RxPath::ZeroCopy, "--rx-zerocopy"),
        (p.rx == proto::RxPath::Discard, "--rx-discard"),
        (p.uring, "--io-uring"),
        (spec.udp_fast.batch > 1, "--batch"),
        (spec.udp_fast.segments > 1, "--gso"),
    ]
    .into_iter()
    .find_map(|(asked, option)| if asked { lacks(option) } else { None })
    .map(|why| format!("netserver: {why}"))
}
