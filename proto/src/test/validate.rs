//! A test request checked against a netserver's limits, field by field
//! ([`TestSpec::validate`]), and what it will hold: its driver, buffers,
//! descriptors and socket memory, estimated before anything is allocated.

use super::*;

impl TestSpec {
    /// A spec with netperf's defaults for `kind`.
    pub fn new(kind: TestKind, family: Family) -> TestSpec {
        TestSpec {
            kind,
            family,
            end: TestEnd::Time { millis: 10_000 },
            server: SideSpec {
                send_align: 8,
                recv_align: 8,
                ..SideSpec::default()
            },
            request_size: 1,
            response_size: 1,
            burst: 0,
            flows: 1,
            recv_timeout_ms: None,
            spin: false,
            rate_bps: None,
            measure_cpu: false,
            num_cpus: 0,
            interim_ms: None,
            data_port: None,
            data_addr: None,
            keepalive: false,
            defer_accept: false,
            fastopen: false,
            connected_udp: false,
            remote_fill: false,
            peer_data_port: None,
            window: None,
            udp_fast: UdpFast::default(),
            paths: Paths::default(),
            ecn: None,
            iperf3: crate::iperf3::Extras::default(),
        }
    }

    /// Check every field against the server's limits. The error names the
    /// netperf option that sets the field.
    pub fn validate(&self, limits: &Limits) -> Result<(), SpecError> {
        self.check_sizes(limits)?;
        self.check_counts(limits)?;
        self.check_end(limits)?;
        self.check_server_side()?;
        self.check_paths()?;
        self.check_stamps()?;
        self.check_ecn()?;
        let memory = self.server_memory();
        if memory > limits.memory_per_session {
            return Err(SpecError::new(
                "buffers",
                format!(
                    "the test would need {memory} bytes of buffers on the server, more than its limit of {}",
                    limits.memory_per_session
                ),
            ));
        }
        Ok(())
    }

    /// ECN (`--ecn`): the tests that carry it, a mark a sender may use, an
    /// interval a receiver can keep.
    fn check_ecn(&self) -> Result<(), SpecError> {
        let Some(ecn) = self.ecn else {
            return Ok(());
        };
        if !matches!(
            self.kind,
            TestKind::UdpStream | TestKind::UdpRr | TestKind::TcpStream | TestKind::TcpMaerts
        ) {
            return Err(SpecError::new(
                "--ecn",
                "ECN is measured by UDP_STREAM, UDP_RR, TCP_STREAM and TCP_MAERTS",
            ));
        }
        if !matches!(
            ecn.mark,
            crate::ecn::Codepoint::Ect0 | crate::ecn::Codepoint::Ect1
        ) {
            return Err(SpecError::new(
                "--ecn",
                "a sender marks with ECT(0) or ECT(1)",
            ));
        }
        if !(10..=3_600_000).contains(&ecn.interval_ms) {
            return Err(SpecError::new(
                "--ecn",
                "its interval is from 10 ms to an hour",
            ));
        }
        if self.kind == TestKind::UdpRr && self.flows > 1 {
            return Err(SpecError::new(
                "--ecn",
                "UDP_RR's codepoints are counted on one flow: leave out --flows",
            ));
        }
        if self.paths.uring || self.iperf3.bidir {
            return Err(SpecError::new(
                "--ecn",
                "io_uring's calls, and a test both ways at once, do not read ECN here",
            ));
        }
        Ok(())
    }

    /// One-way delay probes: one flow of [`crate::stamp::LEN`]-byte
    /// probes and answers, paced by the client (no burst, no rate).
    fn check_stamps(&self) -> Result<(), SpecError> {
        if self.kind != TestKind::UdpStamp {
            return Ok(());
        }
        let len = crate::stamp::LEN as u32;
        if self.flows > 1 {
            return Err(SpecError::new("flows", "UDP_STAMP probes on one flow"));
        }
        if self.request_size != len || self.response_size != len {
            return Err(SpecError::new(
                "-r",
                format!("UDP_STAMP's probes and answers are {len} bytes"),
            ));
        }
        if self.burst > 0 || self.window.is_some() || self.paths.is_on() {
            return Err(SpecError::new(
                "UDP_STAMP",
                "its probes take no burst, window or data path of their own",
            ));
        }
        Ok(())
    }

    /// Message sizes, the UDP fast paths, socket buffers.
    fn check_sizes(&self, limits: &Limits) -> Result<(), SpecError> {
        let max_msg = match self.kind.protocol() {
            Protocol::Udp => self.family.max_udp_payload(),
            Protocol::Tcp => limits.max_message,
        };
        let check_size = |field: &str, v: Option<u32>| -> Result<(), SpecError> {
            match v {
                Some(0) => Err(SpecError::new(field, "must be at least 1 byte")),
                Some(n) if n > max_msg => Err(SpecError::new(
                    field,
                    format!("{n} bytes is more than the limit of {max_msg}"),
                )),
                _ => Ok(()),
            }
        };
        check_size("-m (remote send size)", self.server.send_size)?;
        let fast = self.udp_fast;
        if fast.is_on() && self.kind != TestKind::UdpStream {
            return Err(SpecError::new("--batch/--gso", "only UDP_STREAM has them"));
        }
        if !(1..=MAX_UDP_BATCH).contains(&fast.batch) {
            return Err(SpecError::new(
                "--batch",
                format!("{} is not between 1 and {MAX_UDP_BATCH}", fast.batch),
            ));
        }
        if !(1..=MAX_UDP_SEGMENTS).contains(&fast.segments) {
            return Err(SpecError::new(
                "--gso",
                format!(
                    "{} datagrams a send is not between 1 and {MAX_UDP_SEGMENTS}",
                    fast.segments
                ),
            ));
        }
        check_size("-M (remote receive size)", self.server.recv_size)?;
        if self.kind.is_connection_test() {
            // A connection test may carry nothing at all (TCP_CC).
            let some = |n: u32| (n > 0).then_some(n);
            check_size("-r (request size)", some(self.request_size))?;
            check_size("-r (response size)", some(self.response_size))?;
        } else if self.kind.is_rr() {
            check_size("-r (request size)", Some(self.request_size))?;
            check_size("-r (response size)", Some(self.response_size))?;
        }
        for (field, v) in [
            ("-S (remote send socket buffer)", self.server.send_buf),
            ("-S (remote receive socket buffer)", self.server.recv_buf),
        ] {
            if let Some(n) = v
                && n > limits.max_socket_buffer
            {
                return Err(SpecError::new(
                    field,
                    format!(
                        "{n} bytes is more than the limit of {}",
                        limits.max_socket_buffer
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Flows and the burst.
    fn check_counts(&self, limits: &Limits) -> Result<(), SpecError> {
        if self.flows == 0 || self.flows > limits.max_flows {
            return Err(SpecError::new(
                "--flows",
                format!(
                    "{} is not between 1 and this netserver's limit of {} (netserver --max-flows raises it)",
                    self.flows, limits.max_flows
                ),
            ));
        }
        if self.burst > limits.max_burst {
            return Err(SpecError::new(
                "-b (burst)",
                format!(
                    "{} is more than the limit of {}",
                    self.burst, limits.max_burst
                ),
            ));
        }
        if self.burst > 0 && !matches!(self.kind, TestKind::TcpRr | TestKind::UdpRr) {
            return Err(SpecError::new(
                "-b (burst)",
                "applies to TCP_RR and UDP_RR only",
            ));
        }
        if self.burst > 0 && self.kind == TestKind::UdpRr {
            // Each request in flight must be told apart by its tag.
            let (req, resp) = (self.request_size as usize, self.response_size as usize);
            let tag = udp_rr_tag_len(req, resp);
            let distinct = udp_rr_distinct_tags(req, resp);
            if u64::from(self.burst) + 1 > distinct {
                return Err(SpecError::new(
                    "-b (burst)",
                    format!(
                        "{} transactions in flight cannot be told apart by a {tag}-byte tag \
                         (UDP_RR tags each request with its first bytes, as many as \
                         the smaller of -r's sizes, up to 8): at most {} with these sizes",
                        u64::from(self.burst) + 1,
                        distinct
                    ),
                ));
            }
        }
        Ok(())
    }

    /// How the test ends: its length or count, its window, timeouts, rate.
    fn check_end(&self, limits: &Limits) -> Result<(), SpecError> {
        match self.end {
            TestEnd::Time { millis } if millis > limits.max_duration_ms => {
                return Err(SpecError::new(
                    "-l (test length)",
                    format!(
                        "{} s is more than this netserver's limit of {} s (netserver --max-test-length)",
                        millis / 1000,
                        limits.max_duration_ms / 1000
                    ),
                ));
            }
            TestEnd::Bytes(0) | TestEnd::Transactions(0) => {
                return Err(SpecError::new(
                    "-l (test length)",
                    "a count of 0 runs nothing",
                ));
            }
            TestEnd::Bytes(_) if self.kind.is_rr() => {
                return Err(SpecError::new(
                    "-l (test length)",
                    "a byte count applies to stream tests only",
                ));
            }
            TestEnd::Transactions(_) if !self.kind.is_rr() => {
                return Err(SpecError::new(
                    "-l (test length)",
                    "a transaction count applies to _RR tests only",
                ));
            }
            _ => {}
        }
        // a client that ends the test itself (iperf3's -t and -O) is held
        // to the same limit as netperf's -l
        if let Some(ms) = self.iperf3.client_ends_after_ms
            && ms > limits.max_duration_ms
        {
            return Err(SpecError::new(
                "-t (test length)",
                format!(
                    "{} s is more than this netserver's limit of {} s (netserver --max-test-length)",
                    ms.div_ceil(1000),
                    limits.max_duration_ms / 1000
                ),
            ));
        }
        if let Some(w) = self.window {
            let TestEnd::Time { millis } = self.end else {
                return Err(SpecError::new(
                    "--warmup/--cooldown",
                    "a window needs a timed test (-l seconds), not a count",
                ));
            };
            const HOUR_MS: u32 = 3_600_000;
            if w.warmup_ms > HOUR_MS || w.cooldown_ms > HOUR_MS {
                return Err(SpecError::new(
                    "--warmup/--cooldown",
                    "more than an hour of uncounted traffic",
                ));
            }
            let total = millis + u64::from(w.warmup_ms) + u64::from(w.cooldown_ms);
            if total > limits.max_duration_ms {
                return Err(SpecError::new(
                    "-l (test length)",
                    format!(
                        "{} s with the warmup and cooldown is more than this netserver's limit of {} s (netserver --max-test-length)",
                        total / 1000,
                        limits.max_duration_ms / 1000
                    ),
                ));
            }
        }
        if let Some(t) = self.recv_timeout_ms
            && (t == 0 || t > 3_600_000)
        {
            return Err(SpecError::new(
                "-e (receive timeout)",
                "must be between 1 ms and 1 hour",
            ));
        }
        if let Some(r) = self.rate_bps
            && r == 0
        {
            return Err(SpecError::new("--rate", "must be more than 0 bits/s"));
        }
        Ok(())
    }

    /// The data path's calls: the receive paths where the server receives
    /// a TCP stream, io_uring on the stream tests.
    fn check_paths(&self) -> Result<(), SpecError> {
        let rx = self.paths.rx;
        if rx != RxPath::Copy && self.kind != TestKind::TcpStream {
            return Err(SpecError::new(
                rx.option(),
                "the netserver receives a TCP stream only in TCP_STREAM",
            ));
        }
        if self.paths.uring
            && !matches!(
                self.kind,
                TestKind::TcpStream | TestKind::TcpMaerts | TestKind::UdpStream
            )
        {
            return Err(SpecError::new(
                "--io-uring",
                "only TCP_STREAM, TCP_MAERTS and UDP_STREAM have it",
            ));
        }
        if self.paths.uring && self.window.is_some() {
            return Err(SpecError::new("--io-uring", "not with --warmup/--cooldown"));
        }
        if self.paths.uring && self.kind == TestKind::UdpStream && self.flows > 1 {
            return Err(SpecError::new(
                "--io-uring",
                "UDP_STREAM runs it on one flow",
            ));
        }
        if self.paths.uring && (self.udp_fast.is_on() || rx != RxPath::Copy) {
            return Err(SpecError::new(
                "--io-uring",
                "it makes its own calls: not with --batch, --gso, --rx-zerocopy or --rx-discard",
            ));
        }
        Ok(())
    }

    /// What the server's side is asked to set: congestion control, buffer placement, widths, priority, CPU.
    fn check_server_side(&self) -> Result<(), SpecError> {
        if let Some(cc) = &self.server.cong_control
            && (cc.is_empty()
                || cc.len() > 15
                || !cc
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
        {
            return Err(SpecError::new(
                "-K (remote congestion control)",
                "must be 1 to 15 letters, digits, '_' or '-'",
            ));
        }
        // Buffer placement: an alignment up to a page of huge pages, an
        // offset within it.
        for (field, v, min) in [
            ("-A (remote send alignment)", self.server.send_align, 1),
            ("-A (remote receive alignment)", self.server.recv_align, 1),
            ("-O (remote send offset)", self.server.send_offset, 0),
            ("-O (remote receive offset)", self.server.recv_offset, 0),
        ] {
            if v < min || v > MAX_PLACEMENT {
                return Err(SpecError::new(
                    field,
                    format!("{v} is not between {min} and {MAX_PLACEMENT}"),
                ));
            }
        }
        for (field, v) in [
            ("-W (remote send width)", self.server.send_width),
            ("-W (remote receive width)", self.server.recv_width),
        ] {
            if let Some(w) = v
                && !(1..=MAX_WIDTH).contains(&w)
            {
                return Err(SpecError::new(
                    field,
                    format!("{w} buffers is not between 1 and {MAX_WIDTH}"),
                ));
            }
        }
        if let Some(p) = self.server.priority
            && p > 6
        {
            return Err(SpecError::new(
                "-y (remote socket priority)",
                format!("{p} is above 6, which only an administrator may set"),
            ));
        }
        if let Some(cpu) = self.server.cpu_bind
            && cpu >= 65_536
        {
            return Err(SpecError::new(
                "-T (remote CPU)",
                format!("{cpu} is not a CPU"),
            ));
        }
        if self.num_cpus > 65_536 {
            return Err(SpecError::new("-n (CPUs)", "more than 65536"));
        }
        if let Some(i) = self.interim_ms
            && !(MIN_INTERIM_MS..=3_600_000).contains(&i)
        {
            return Err(SpecError::new(
                "-D (interim interval)",
                format!("{i} ms is not between {MIN_INTERIM_MS} ms and an hour"),
            ));
        }
        Ok(())
    }

    /// The least buffer memory the server can need for this test, before
    /// it knows its socket buffers: sizes and widths it was not told count
    /// as the smallest they can be, one CPU. A request that cannot fit even
    /// so is refused before anything is bound; the server then counts and
    /// reserves what it resolved ([`TestSpec::buffer_memory`]) before it
    /// allocates.
    pub fn server_memory(&self) -> u64 {
        const DEFAULT_GUESS: u32 = 1;
        let ring = |size: Option<u32>, width: Option<u32>, align: u32, offset: u32| {
            let r = Ring::placed(
                size.unwrap_or(DEFAULT_GUESS),
                width.unwrap_or(1),
                align,
                offset,
            );
            // A ring whose size the server chooses may be capped at
            // MAX_RING_BYTES; with a larger size, fewer buffers fit and
            // the block may be smaller than with this guess (never below
            // half the cap): count no more than half the cap for it.
            match size {
                Some(_) => r,
                None => {
                    let half = (MAX_RING_BYTES as u64 / 2).saturating_sub(r.lead()) / r.stride();
                    let half = u32::try_from(half).unwrap_or(u32::MAX).max(1);
                    Ring::placed(r.size, r.width.min(half), align, offset)
                }
            }
        };
        self.buffer_memory(
            ring(
                self.server.send_size,
                self.server.send_width,
                self.server.send_align,
                self.server.send_offset,
            ),
            ring(
                self.server.recv_size,
                self.server.recv_width,
                self.server.recv_align,
                self.server.recv_offset,
            ),
            1,
        )
    }

    /// The one memory estimate: the buffers the server allocates for this
    /// test, given its send and receive rings (their sizes, widths and
    /// placement as resolved) and its CPUs (event loops run a thread per
    /// CPU at most). Each case is the shape its family allocates:
    /// - one TCP stream flow: its ring (one block, placement counted);
    /// - TCP flows on event loops (many flows, or a window): each loop
    ///   thread one buffer each way, shared by its flows, and each flow's
    ///   state;
    /// - a UDP receiver: one buffer per flow of the receive size, at most a
    ///   datagram's (and a fast receiver's batch of slots);
    /// - request/response: a request and a response buffer per flow (per
    ///   thread on event loops and for TCP_CRR's answering threads).
    pub fn buffer_memory(&self, send: Ring, recv: Ring, cpus: u32) -> u64 {
        /// Room for a tag, a preamble, a sequence header.
        const SLACK: u64 = 64;
        let flows = u64::from(self.flows.max(1));
        let loops = self.loops(cpus);
        // (io_uring runs even one flow on the many-flow shape: a buffer a
        // thread)
        let on_loops = self.driver(cpus) != Driver::Blocking;
        let (req, resp) = (
            u64::from(self.request_size.max(1)) + SLACK,
            u64::from(self.response_size.max(1)) + SLACK,
        );
        let state = flows.saturating_mul(FLOW_STATE_BYTES);
        match self.kind {
            TestKind::TcpStream if on_loops => {
                let inb = Ring::placed(recv.size.max(512), 1, PAGE_ALIGN, 0).bytes();
                loops.saturating_mul(1 + inb) + state
            }
            TestKind::TcpMaerts if on_loops => {
                loops.saturating_mul(Ring::placed(send.size.max(1), 1, PAGE_ALIGN, 0).bytes() + 512)
                    + state
            }
            TestKind::TcpStream => recv.bytes(),
            TestKind::TcpMaerts | TestKind::UdpMaerts => send.bytes(),
            TestKind::UdpStream => {
                let slots = if self.udp_fast.is_on() {
                    u64::from(self.udp_fast.batch) * u64::from(UDP_SLOT)
                } else {
                    0
                };
                let buf = u64::from(udp_receive_buffer(recv.size));
                flows.saturating_mul(buf + slots + FLOW_STATE_BYTES)
            }
            TestKind::TcpRr if on_loops => loops.saturating_mul(req.max(512) + resp) + state,
            TestKind::TcpRr => req + resp,
            TestKind::UdpRr | TestKind::UdpStamp => {
                flows.saturating_mul(req + resp + FLOW_STATE_BYTES)
            }
            TestKind::TcpCrr | TestKind::TcpCc => loops.saturating_mul(req + resp) + state,
        }
        .saturating_add(self.interim_memory())
        .saturating_add(self.path_memory(recv, loops))
    }

    /// How this test's data path runs, decided from the spec alone, the
    /// same at both ends: io_uring when asked; event loops for many flows
    /// or a window; one flow's blocking calls on the test's own thread
    /// otherwise (the fast path: one send and one receive a transaction).
    pub fn driver(&self, cpus: u32) -> Driver {
        let threads = u32::try_from(self.loops(cpus)).unwrap_or(u32::MAX);
        if self.paths.uring {
            Driver::Uring { threads }
        } else if self.flows > 1 || self.window.is_some() {
            Driver::Loops { threads }
        } else {
            Driver::Blocking
        }
    }

    /// The data connections the test's flows make: each flow once, twice
    /// where data goes both ways at once (iperf3's `--bidir`).
    pub fn streams(&self) -> usize {
        self.flows.max(1) as usize * if self.iperf3.bidir { 2 } else { 1 }
    }

    /// How long the test will run, in whole seconds, where that is known
    /// before it starts: its time (with a window's warmup and cooldown),
    /// or what a client that ends it itself said; `None` for a count.
    pub fn asked_seconds(&self) -> Option<u64> {
        let ms = match self.end {
            TestEnd::Time { millis } if millis > 0 => {
                let length = std::time::Duration::from_millis(millis);
                let total = self.window.map_or(length, |w| w.total(length));
                u64::try_from(total.as_millis()).unwrap_or(u64::MAX)
            }
            _ => self.iperf3.client_ends_after_ms?,
        };
        Some(ms.div_ceil(1000))
    }

    /// Each flow's share of [`TestSpec::rate_bps`], bits per second.
    pub fn flow_rate_bps(&self) -> Option<u64> {
        self.rate_bps
            .map(|r| (r / u64::from(self.flows.max(1))).max(1))
    }

    /// The threads the server's data path runs this test on: a flow a
    /// thread for TCP streams up to a point ([`stream_threads`]), else a
    /// thread a CPU at most, never more than the flows.
    pub fn loops(&self, cpus: u32) -> u64 {
        match self.kind {
            TestKind::TcpStream | TestKind::TcpMaerts => {
                u64::from(stream_threads(self.flows, cpus))
            }
            _ => u64::from(cpus.max(1).min(self.flows.max(1))),
        }
    }

    /// The most file descriptors the server's side of this test holds at
    /// once, counted before anything is opened: its data socket (and the
    /// copy its waiting room accepts on), the unproven connections a
    /// waiting room keeps ([`DATA_WAITING`]; TCP_CRR's, a thread each),
    /// each flow's socket and the copy kept to wake it on an abort, and an
    /// event loop's poll and waker a thread (an io_uring ring besides).
    pub fn server_descriptors(&self, cpus: u32) -> u64 {
        let flows = u64::from(self.flows.max(1));
        let loops = self.loops(cpus);
        let per_loop = 2 + u64::from(self.paths.uring);
        // the data socket, its copies, the waiting room's poll and waker
        let base = 6;
        let waiting = match self.kind {
            TestKind::TcpCrr | TestKind::TcpCc => loops * DATA_WAITING,
            _ if self.kind.protocol() == Protocol::Tcp => DATA_WAITING,
            _ => 0,
        };
        base + waiting + flows.saturating_mul(2) + loops * per_loop
    }

    /// What the server's data sockets can hold of the kernel's memory, and
    /// the send buffer it sets so that they fit `share` bytes. Each flow's
    /// socket counts both its queues: a buffer the client asked for
    /// (`-s`/`-S`) as the kernel sets it (doubled, within
    /// wmem_max/rmem_max); a TCP send queue left to autotuning as far as
    /// autotuning grows it (what a client that reads nothing makes the
    /// server hold); a receive queue left to autotuning at the size it
    /// starts with (the server reads all it is sent: the queue grows only
    /// as fast as it is read); a UDP socket's at the host's defaults where
    /// it streams, its window of datagrams where it answers. When
    /// that is over the share, a TCP send buffer the client left to the
    /// server is set to fit (at least [`MIN_HELD_BUFFER`]); when the test
    /// cannot fit even so, `Err` carries the least it would hold.
    pub fn socket_memory(&self, k: &KernelBuffers, share: u64) -> Result<SocketMemory, u64> {
        let flows = u64::from(self.flows.max(1));
        let tcp = self.kind.protocol() == Protocol::Tcp;
        let asked = |b: Option<u32>, max: u32| b.map(|b| 2 * u64::from(b.min(max)));
        // a UDP request/response flow's queues hold its window of
        // datagrams (each charged at least a page or so by the kernel)
        let datagrams = |size: u32| u64::from(self.burst + 1) * (u64::from(size) + 2048);
        let (udp_send, udp_recv) = match self.kind {
            TestKind::UdpRr => (datagrams(self.response_size), datagrams(self.request_size)),
            TestKind::UdpMaerts => (u64::from(k.wmem_default), 0),
            _ => (0, u64::from(k.rmem_default)),
        };
        let recv = asked(self.server.recv_buf, k.rmem_max).unwrap_or(if tcp {
            u64::from(k.tcp_rmem_default)
        } else {
            udp_recv
        });
        let send = asked(self.server.send_buf, k.wmem_max);
        let send_free = if tcp {
            u64::from(k.tcp_wmem_max)
        } else {
            udp_send
        };
        let whole = flows.saturating_mul(send.unwrap_or(send_free) + recv);
        if whole <= share {
            return Ok(SocketMemory {
                bytes: whole,
                send_buf: None,
                recv_buf: None,
            });
        }
        if send.is_some() || !tcp {
            // nothing of it is the server's to set
            return Err(whole);
        }
        let least = flows.saturating_mul(2 * u64::from(MIN_HELD_BUFFER) + recv);
        if least > share {
            return Err(least);
        }
        // what the send buffer left to the server may be, before doubling
        let each = (share / flows).saturating_sub(recv) / 2;
        let each = u32::try_from(each)
            .unwrap_or(u32::MAX)
            .clamp(MIN_HELD_BUFFER, k.wmem_max.max(MIN_HELD_BUFFER));
        Ok(SocketMemory {
            bytes: flows.saturating_mul(2 * u64::from(each) + recv),
            send_buf: Some(each),
            recv_buf: None,
        })
    }

    /// What the data path's calls hold beyond the rings, on the server: a
    /// zero-copy receiver's window of mapped pages a flow (taken off the
    /// socket's queue, held until its next call); an io_uring receiver's
    /// provided buffers, a group a thread (`loops` of them; one for one
    /// flow). (An io_uring sender's one buffer a thread is the loops'
    /// buffer, counted with them.)
    pub fn path_memory(&self, recv: Ring, loops: u64) -> u64 {
        let flows = self.flows.max(1);
        let mut bytes = 0u64;
        if self.paths.rx == RxPath::ZeroCopy {
            bytes += u64::from(flows) * u64::from(RX_MAP_WINDOW);
        }
        let server_receives = matches!(self.kind, TestKind::TcpStream | TestKind::UdpStream);
        if self.paths.uring && server_receives {
            let loops = loops.clamp(1, u64::from(flows));
            let per_loop = u32::try_from(u64::from(flows).div_ceil(loops)).unwrap_or(u32::MAX);
            let datagrams = self.kind.protocol() == Protocol::Udp;
            // (a UDP receiver's buffers hold the largest datagram it takes)
            let size = if datagrams {
                udp_receive_buffer(recv.size)
            } else {
                recv.size.max(1)
            };
            bytes += loops
                * u64::from(uring_buffers(per_loop))
                * u64::from(uring_buffer_size(size, datagrams));
        }
        bytes
    }

    /// What the server's interim reports of this test can take: as many
    /// as it keeps, each with TCP_INFO of as many connections as one holds.
    pub fn interim_memory(&self) -> u64 {
        if self.interim_ms.is_none() {
            return 0;
        }
        let one = std::mem::size_of::<InterimReport>()
            + MAX_TCP_PER_REPORT * std::mem::size_of::<TcpSample>();
        (MAX_INTERIM_REPORTS * one) as u64
    }
}
