//! netperf 2.7's control protocol, for the netservers labs already run:
//! the [`Dialect`] of its 656-byte frames (proto::netperf2 holds the
//! frames and the mapping). netperf 2.7 has no greeting: our hello, sent
//! as a 656-byte frame, is answered by netserver 2.7 with serv_errno 998,
//! which is how [`crate::control::connect`] finds out, in one round trip.

use std::{
    io::{self, Read, Write},
    net::{Shutdown, SocketAddr, TcpStream},
    time::Duration,
};

use anyhow::{Result, anyhow, bail};
use proto::{
    ClientDone, Grant, SideResults, TestSpec,
    netperf2::{self, FRAME_LEN, Frame},
};

use crate::control::Dialect;

/// netperf 2.7 waits this long for a response, and for results.
const RESPONSE_WAIT: Duration = Duration::from_secs(120);
/// And this long for CPU_CALIBRATE's answer.
const CALIBRATE_WAIT: Duration = Duration::from_secs(160);

/// A conversation with netserver 2.7.
#[derive(Debug)]
pub struct Netperf2 {
    stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    /// The last response announced CPU figures (only then are the
    /// results' CPU words meaningful).
    measured: bool,
    cpu: Option<(u32, u32)>,
}

impl Netperf2 {
    /// Over a connected control stream: `pending`, what of netserver
    /// 2.7's answer to our probe already arrived (the rest is read and
    /// dropped); `passphrase`, the frame netperf 2.7's `-Z` sends first.
    pub fn new(stream: TcpStream, pending: &[u8], passphrase: Option<&str>) -> Result<Netperf2> {
        let peer = stream.peer_addr()?;
        let local = stream.local_addr()?;
        let _ = stream.set_nodelay(true);
        let mut d = Netperf2 {
            stream,
            peer,
            local,
            measured: false,
            cpu: None,
        };
        let rest = pending.len() % FRAME_LEN;
        if rest > 0 {
            let mut skip = vec![0u8; FRAME_LEN - rest];
            d.stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .and_then(|()| d.stream.read_exact(&mut skip))
                .map_err(|e| anyhow!("control connection to {peer}: {e}"))?;
        }
        if let Some(p) = passphrase {
            d.send(&netperf2::passphrase_frame(p))?;
        }
        Ok(d)
    }

    fn send(&mut self, f: &Frame) -> Result<()> {
        self.stream
            .write_all(f.as_bytes())
            .map_err(|e| anyhow!("control connection to {}: {e}", self.peer))
    }

    /// One frame, within `wait`; a nonzero serv_errno is the netserver's
    /// error, as netperf 2.7 reports it.
    fn receive(&mut self, wait: Duration, what: &str) -> Result<Frame> {
        let f = self.receive_any(wait, what)?;
        match f.int(1) {
            0 => Ok(f),
            n => bail!(
                "netserver at {}: remote error {n} ({})",
                self.peer,
                remote_error(n)
            ),
        }
    }

    /// One frame, whatever its serv_errno.
    fn receive_any(&mut self, wait: Duration, what: &str) -> Result<Frame> {
        self.stream.set_read_timeout(Some(wait))?;
        let mut b = [0u8; FRAME_LEN];
        let mut got = 0;
        while got < FRAME_LEN {
            match self.stream.read(b.get_mut(got..).unwrap_or_default()) {
                Ok(0) if got == 0 => bail!(
                    "netserver at {} closed the control connection instead of sending {what} (netperf 2.7's netserver does so when its -Z passphrase is missing or wrong)",
                    self.peer
                ),
                Ok(0) => bail!(
                    "netserver at {}: partial {what} received: {got} bytes",
                    self.peer
                ),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if got == 0 && e.kind() == io::ErrorKind::ConnectionReset => bail!(
                    "netserver at {} reset the control connection instead of sending {what} (netperf 2.7's netserver does so when its -Z passphrase is wrong)",
                    self.peer
                ),
                Err(e) if engine::error::timed_out(&e) => bail!(
                    "no {what} from the netserver at {} within {} s",
                    self.peer,
                    wait.as_secs()
                ),
                Err(e) => bail!("control connection to {}: {e}", self.peer),
            }
        }
        Ok(Frame(b))
    }
}

/// What netserver 2.7's serv_errno means (Linux numbering, its own codes).
fn remote_error(n: i32) -> String {
    match n {
        998 => "it does not know this request".into(),
        n => io::Error::from_raw_os_error(n).to_string(),
    }
}

impl Dialect for Netperf2 {
    fn conventions(&self) -> engine::conventions::Conventions {
        engine::conventions::Conventions::NETPERF2
    }

    fn server_software(&self) -> &str {
        "netperf 2.7 netserver"
    }

    fn is_netperf2(&self) -> bool {
        true
    }

    fn server_cpu(&self) -> (u32, u32) {
        self.cpu.unwrap_or((0, 0))
    }

    fn peer(&self) -> SocketAddr {
        self.peer
    }

    fn local(&self) -> SocketAddr {
        self.local
    }

    fn setup(&mut self, spec: &TestSpec) -> Result<Grant> {
        let req = netperf2::omni_request(spec, spec.peer_data_port.unwrap_or(0));
        self.send(&req)?;
        let f = self.receive(RESPONSE_WAIT, "response")?;
        let g = netperf2::grant_of(&f);
        if g.data_port == 0 {
            bail!(
                "netserver at {}: its response names no data port",
                self.peer
            );
        }
        self.measured = g.measure_cpu;
        Ok(g)
    }

    fn finish(&mut self, _done: ClientDone, wait: Duration) -> Result<SideResults> {
        let f = self.receive(wait.max(RESPONSE_WAIT), "results")?;
        let r = netperf2::side_results_of(&f, self.measured);
        crate::family::got_results(&r);
        Ok(r)
    }

    fn calibrate(&mut self) -> Result<()> {
        self.send(&netperf2::cpu_calibrate_request())?;
        // netserver 2.7 does not reset serv_errno for this answer (its
        // earlier 998, to our hello, sticks): the figures are fresh
        let f = self.receive_any(CALIBRATE_WAIT, "CPU calibration")?;
        let (rate, cpus) = (
            f.float(proto::netperf2::frame::ts(0)),
            f.word(proto::netperf2::frame::ts(4)),
        );
        self.cpu = Some((cpus, rate.max(0.0) as u32));
        Ok(())
    }

    fn bye(&mut self) {
        // as netperf 2.7: half-close, and wait a moment for the server's end
        let _ = self.stream.shutdown(Shutdown::Write);
        let _ = self.stream.set_read_timeout(Some(Duration::from_secs(2)));
        let mut b = [0u8; 64];
        while matches!(self.stream.read(&mut b), Ok(n) if n > 0) {}
    }
}
