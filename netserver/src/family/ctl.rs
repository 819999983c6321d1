//! The control block through which the session stops, ends or aborts a
//! running test, and which the test's loops watch.

use std::sync::{
    Condvar, Mutex,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use engine::{live::Live, stream::udp::Drain, timer::StopFlag};
use proto::{
    ClientDone, InterimReport,
    test::{MAX_INTERIM_REPORTS, MAX_TCP_PER_REPORT},
};
use socket2::Socket;

/// What the session and a running test share.
#[derive(Debug)]
pub struct TestCtl {
    /// Raised to end the data loops (abort, or netperf is done).
    pub stop: StopFlag,
    aborted: AtomicBool,
    /// A copy of each data socket (one descriptor each, counted in
    /// `TestSpec::server_descriptors`), with what it is.
    sockets: Mutex<Vec<(Socket, Kept)>>,
    done: Mutex<Option<ClientDone>>,
    done_changed: Condvar,
    /// Datagrams netperf sent, once it has said (u64::MAX until then).
    expected_datagrams: AtomicU64,
    /// Data connections closed as not the test's: all of them, and those
    /// during the measurement.
    foreign: AtomicU64,
    foreign_measured: AtomicU64,
    /// What the test's data loop has moved, for its interim reports.
    pub live: Live,
    /// Its interim reports so far (`TestSpec::interim_ms`).
    interims: Mutex<Vec<InterimReport>>,
}

impl Default for TestCtl {
    fn default() -> Self {
        TestCtl {
            stop: StopFlag::default(),
            aborted: AtomicBool::new(false),
            sockets: Mutex::new(Vec::new()),
            done: Mutex::new(None),
            done_changed: Condvar::new(),
            expected_datagrams: AtomicU64::new(u64::MAX),
            foreign: AtomicU64::new(0),
            foreign_measured: AtomicU64::new(0),
            live: Live::new(),
            interims: Mutex::new(Vec::new()),
        }
    }
}

impl Drain for TestCtl {
    fn expected(&self) -> Option<u64> {
        match self.expected_datagrams.load(Ordering::Relaxed) {
            u64::MAX => None,
            n => Some(n),
        }
    }

    fn aborted(&self) -> bool {
        self.is_aborted()
    }
}

impl TestCtl {
    /// Remember a data socket, so that an abort can wake a loop blocked on
    /// it. If the test was already aborted, shut it down now.
    pub fn register(&self, sock: &impl engine::sys::Sock) {
        self.keep(sock, Kept::Other);
    }

    /// Remember a TCP data connection (see [`TestCtl::end_now`]).
    pub fn register_stream(&self, sock: &impl engine::sys::Sock) {
        self.keep(sock, Kept::Stream);
    }

    /// Remember a listener that the test accepts on until netperf is
    /// done, so that the end wakes the accepting threads at once.
    pub fn register_listener(&self, sock: &impl engine::sys::Sock) {
        self.keep(sock, Kept::Listener);
    }

    /// Keep a copy of `sock`; if the test was already aborted, shut it
    /// down now.
    fn keep(&self, sock: &impl engine::sys::Sock, kind: Kept) {
        if self.is_aborted() {
            let _ = socket2::SockRef::from(sock).shutdown(std::net::Shutdown::Both);
        }
        if let Ok(owned) = socket2::SockRef::from(sock).try_clone()
            && let Ok(mut v) = self.sockets.lock()
        {
            v.push((owned, kind));
        }
    }

    /// Shut down the kept sockets of `kind` (all with `None`), waking
    /// whoever waits on one.
    fn shut_down(&self, kind: Option<Kept>, how: std::net::Shutdown) {
        if let Ok(v) = self.sockets.lock() {
            for (s, k) in v.iter() {
                if kind.is_none_or(|kind| kind == *k) {
                    let _ = s.shutdown(how);
                }
            }
        }
    }

    /// End the test as its natural end would, by the server's clock: the
    /// loops stop, a UDP receiver takes what has arrived, and a TCP
    /// connection's receive side ends as if the peer had closed (netserver
    /// 2.7's padded timer, for a netperf 2.7 client).
    pub fn end_now(&self) {
        self.set_client_done(ClientDone { datagrams_sent: 0 });
        self.shut_down(Some(Kept::Stream), std::net::Shutdown::Read);
    }

    /// Stop the test now: raise the flag and shut down every data socket,
    /// which wakes any thread blocked on one.
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        self.stop.set();
        self.shut_down(None, std::net::Shutdown::Both);
        self.done_changed.notify_all();
    }

    /// `n` data connections that were not the test's were closed, during
    /// the measurement or before it (while the flows connected).
    pub fn saw_foreign(&self, n: u64, measured: bool) {
        self.foreign.fetch_add(n, Ordering::Relaxed);
        if measured {
            self.foreign_measured.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Take an interim report: what the data loop has moved since
    /// `began`, and TCP_INFO of the first data connections. Beyond the most
    /// kept, none is taken.
    pub(crate) fn sample(&self, began: std::time::Instant) {
        let Ok(mut v) = self.interims.lock() else {
            return;
        };
        if v.len() >= MAX_INTERIM_REPORTS {
            return;
        }
        let s = self.live.snapshot();
        let tcp = self
            .sockets
            .lock()
            .map(|kept| {
                kept.iter()
                    .filter(|(_, k)| *k == Kept::Stream)
                    .map(|(s, _)| s)
                    .take(MAX_TCP_PER_REPORT)
                    .filter_map(engine::sockopt::tcp_sample)
                    .collect()
            })
            .unwrap_or_default();
        v.push(InterimReport {
            elapsed_ns: began.elapsed().as_nanos() as u64,
            bytes: s.bytes,
            calls: s.calls,
            transactions: s.transactions,
            tcp,
        });
    }

    /// The interim reports taken, for the results.
    pub fn take_interims(&self) -> Vec<InterimReport> {
        self.interims
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }

    /// What netperf is told of them.
    pub(crate) fn foreign(&self) -> proto::ForeignConnections {
        proto::ForeignConnections {
            closed: self.foreign.load(Ordering::Relaxed),
            measured: self.foreign_measured.load(Ordering::Relaxed),
        }
    }

    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// netperf is done: request/response responders stop (a UDP_STREAM
    /// receiver drains what is still in flight first).
    pub fn set_client_done(&self, done: ClientDone) {
        self.expected_datagrams
            .store(done.datagrams_sent, Ordering::Relaxed);
        self.stop.set();
        // a listener shut down for reading ends a blocked accept (EINVAL)
        self.shut_down(Some(Kept::Listener), std::net::Shutdown::Read);
        if let Ok(mut d) = self.done.lock() {
            *d = Some(done);
        }
        self.done_changed.notify_all();
    }
}

/// What a kept socket is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    /// A TCP data connection.
    Stream,
    /// A listener the test accepts on until netperf is done.
    Listener,
    /// Anything else (a UDP socket).
    Other,
}
