//! How a TCP stream receiver takes its bytes off the socket: netperf's
//! copy into a buffer, or, beyond netperf, the kernel dropping them
//! uncopied (`--rx-discard`, the stack's ceiling: nothing reaches user
//! space) or mapping whole pages of them into a window of ours
//! (`--rx-zerocopy`, TCP_ZEROCOPY_RECEIVE: only the unaligned rest is
//! copied). Every path counts every byte the socket gave, as the copy
//! does; the blocking loop of one flow and the event loops of many both
//! receive through a [`Reader`].

use std::{
    io::{self, Read},
    time::{Duration, Instant},
};

use proto::{RX_MAP_WINDOW, RxPath};

use crate::{EngineError, sys};

/// The zero-copy receiver's SO_RCVLOWAT: a wait ends once this much has
/// arrived (or the stream ends), so that one call maps many pages; a wait
/// for every few pages cost a third more CPU a byte on loopback.
const RX_LOWAT: i32 = 512 * 1024;

/// Zero-copy receives in a row that mapped nothing (the data's pages could
/// not be mapped: a plain sender's on loopback, a NIC without header
/// split) before the reader copies for a while: each such receive costs a
/// TCP_ZEROCOPY_RECEIVE that maps nothing and then the copy anyway, 0.94
/// of a copying receiver's rate beside iperf3 -P 2 on loopback ...
const ZC_IDLE: u32 = 32;
/// ... and the receives it then copies before it tries to map again (so
/// that a sender whose pages become mappable is mapped again soon).
const ZC_REST: u32 = 256;

/// A copying receiver wakes for at most this many bytes (SO_RCVLOWAT) ...
const WAKE_MAX: i32 = 64 * 1024;
/// ... or for what its flow brings in this long, when that is less, so that
/// a slow flow is still taken as it comes.
const WAKE_SPAN: Duration = Duration::from_millis(2);
/// The mark is reconsidered every so many receives.
const WAKE_CHECK: u32 = 16;

/// When a copying receiver is woken (`Reader::batching`): woken for every
/// few packets, a fast flow's receiver sleeps and wakes more often than it
/// needs, and on loopback each wake-up costs its sender's CPU as well as
/// its own: eight iperf3 3.12 streams (one client thread) into netserver
/// ran at 0.84 of iperf3 -s (which reads them all on one thread), the
/// client spending 1.5 times the CPU a megabyte; woken for 64 KiB, 1.56.
/// A fast sender of many threads loses by it instead (our --flows 8 into
/// netserver: 0.88), and so does one flow (TCP_MAERTS 0.85 to 0.90 of
/// netperf 2.7, with half the context switches): so only iperf3's clients'
/// streams from one sending thread are received so (3.12's eight; 3.21's
/// one stream: 1.04 and 1.11 of the same netserver waking for every
/// packet, geometric means of 30 and 24 alternated pairs, at 0.78 and
/// 0.82 of its CPU a megabyte). The mark follows the flow's rate: 2 ms of it,
/// 64 KiB at most, one byte for a slow flow.
#[derive(Debug, Default)]
struct Wake {
    mark: i32,
    reads: u32,
    bytes: u64,
    since: Option<Instant>,
}

impl Wake {
    /// `n` bytes were received on `conn`.
    fn received(&mut self, conn: &impl crate::sys::Sock, n: usize) {
        self.reads += 1;
        self.bytes += n as u64;
        if self.reads < WAKE_CHECK {
            return;
        }
        let now = Instant::now();
        let (bytes, since) = (self.bytes, self.since.replace(now));
        (self.reads, self.bytes) = (0, 0);
        let Some(since) = since else {
            return;
        };
        let secs = now.duration_since(since).as_secs_f64().max(1e-6);
        let span = bytes as f64 / secs * WAKE_SPAN.as_secs_f64();
        // whole pages, or one byte (the kernel's own mark)
        let want = ((span.min(f64::from(WAKE_MAX)) as i32) & !4095).max(1);
        let mark = self.mark.max(1);
        if want >= mark * 2 || want * 2 <= mark {
            // (a kernel that refuses it keeps waking at every packet)
            if sys::opt::rcvlowat(conn, want).is_ok() {
                self.mark = want;
            }
        }
    }
}

/// One flow's receive path, with what it holds (the zero-copy window).
#[derive(Debug)]
pub struct Reader {
    path: RxPath,
    map: Option<sys::RxMap>,
    /// Bytes that came as mapped pages.
    pub mapped: u64,
    /// Zero-copy receives tried (TCP_ZEROCOPY_RECEIVE).
    pub tries: u64,
    /// Zero-copy receives in a row that mapped nothing, and the receives
    /// left to copy before trying again ([`ZC_IDLE`], [`ZC_REST`]).
    idle: u32,
    rest: u32,
    /// When a copying receive wakes, where it is set ([`Reader::batching`]).
    wake: Option<Wake>,
}

impl Reader {
    /// The path `path` on `conn`: a zero-copy window mapped onto it.
    pub fn new(path: RxPath, conn: &impl crate::sys::Sock) -> Result<Reader, EngineError> {
        if path == RxPath::ZeroCopy {
            // wake for many pages at once (the kernel keeps the mark under
            // half the receive buffer)
            let _ = sys::opt::rcvlowat(conn, RX_LOWAT);
        }
        let map = match path {
            RxPath::ZeroCopy => {
                Some(sys::RxMap::new(conn, RX_MAP_WINDOW as usize).map_err(|e| {
                    EngineError::io("--rx-zerocopy: mapping a window onto the data socket", e)
                })?)
            }
            _ => None,
        };
        Ok(Reader {
            path,
            map,
            mapped: 0,
            tries: 0,
            idle: 0,
            rest: 0,
            wake: None,
        })
    }

    /// Wake for more than a packet once the flow is fast (see [`Wake`]).
    pub fn batching(mut self) -> Reader {
        self.wake = Some(Wake::default());
        self
    }

    pub fn path(&self) -> RxPath {
        self.path
    }

    /// Take what has arrived on `conn`, up to `buf`'s length by copy or
    /// discard (a zero-copy receive maps up to its window): the bytes
    /// taken, 0 at the peer's end. On a non-blocking socket, `WouldBlock`
    /// when nothing has arrived; on a blocking one, the socket's receive
    /// timeout as a copy would time out.
    pub fn read<S: crate::sys::Sock>(
        &mut self,
        conn: &S,
        buf: &mut [u8],
        nonblocking: bool,
    ) -> io::Result<usize>
    where
        for<'a> &'a S: Read,
    {
        match (self.path, self.map.as_mut()) {
            (RxPath::Discard, _) => sys::recv_discard(conn, buf.len().max(1), nonblocking),
            (RxPath::ZeroCopy, Some(_)) if self.rest > 0 => {
                // nothing could be mapped of late: a copy, as a copying
                // receiver's
                let n = (&*conn).read(buf)?;
                self.rest -= 1;
                Ok(n)
            }
            (RxPath::ZeroCopy, Some(map)) => {
                let r = zero_copy(map, conn, buf, nonblocking);
                self.tries += 1;
                if let Ok((n, mapped)) = r {
                    self.mapped += mapped as u64;
                    if mapped > 0 {
                        self.idle = 0;
                    } else if n > 0 {
                        self.idle += 1;
                        if self.idle >= ZC_IDLE {
                            (self.idle, self.rest) = (0, ZC_REST);
                        }
                    }
                }
                r.map(|(n, _)| n)
            }
            _ => {
                let n = (&*conn).read(buf)?;
                if let Some(w) = &mut self.wake {
                    w.received(conn, n);
                }
                Ok(n)
            }
        }
    }
}

/// The most a zero-copy receive copies itself: less than a page, so that
/// whatever whole pages there are get mapped, never copied.
fn copy_room(buf: &mut [u8]) -> &mut [u8] {
    let page = sys::page_size();
    let n = buf.len().min(page - 1);
    buf.get_mut(..n).unwrap_or_default()
}

/// One zero-copy receive: (bytes taken, of which mapped).
fn zero_copy<S: crate::sys::Sock>(
    map: &mut sys::RxMap,
    conn: &S,
    buf: &mut [u8],
    nonblocking: bool,
) -> io::Result<(usize, usize)>
where
    for<'a> &'a S: Read,
{
    let mut waited = false;
    loop {
        let got = match map.receive(conn, copy_room(buf)) {
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok((0, 0)),
            Err(e) => return Err(e),
        };
        if got.mapped > 0 {
            return Ok((got.mapped + got.copied, got.mapped));
        }
        if got.copied + got.skip > 0 {
            // nothing whole pages: what the kernel did not copy itself
            // (it copies less than a page) is taken by a plain receive in
            // the same turn, as much as the buffer holds after its copy
            let rest = buf.get_mut(got.copied..).unwrap_or_default();
            let len = got.skip.min(rest.len());
            let n = match rest.get_mut(..len).filter(|r| !r.is_empty()) {
                Some(r) => match (&*conn).read(r) {
                    Ok(n) => n,
                    Err(e) if got.copied > 0 && crate::error::timed_out(&e) => 0,
                    Err(e) => return Err(e),
                },
                None => 0,
            };
            return Ok((got.copied + n, 0));
        }
        if nonblocking {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        if waited {
            // readable, yet nothing to map, copy or skip: the peer's end
            // or an error, which a plain receive reports
            return (&*conn).read(buf).map(|n| (n, 0));
        }
        // nothing yet: wait as a blocking receive would
        let timeout = socket2::SockRef::from(conn)
            .read_timeout()?
            .unwrap_or(Duration::from_secs(3600));
        let ready = sys::wait_readable(&[sys::borrowed(conn)], timeout)?;
        if !ready.first().copied().unwrap_or(false) {
            // (as a blocking receive's timeout says it)
            return Err(io::ErrorKind::WouldBlock.into());
        }
        waited = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    use crate::{
        buffer::Ring,
        live::Live,
        stream::tcp::{Until, receive_by, send},
        testing::tcp_pair,
        timer::StopFlag,
    };

    /// A blocking receiver by each path takes every byte sent, and ends at
    /// the sender's end; on plain loopback nothing can be mapped, so the
    /// zero-copy path copies it all, and says none was mapped.
    #[test]
    fn blocking_paths_count_every_byte() {
        for path in [RxPath::Discard, RxPath::ZeroCopy] {
            let (c, s) = tcp_pair();
            let rx = std::thread::spawn(move || {
                let mut reader = Reader::new(path, &s).unwrap();
                let mut ring = Ring::new(65536, 2, b"");
                let o = receive_by(&s, &mut ring, &mut reader, &Live::new(), None).unwrap();
                drop(s);
                (o, reader.mapped, reader.tries)
            });
            let mut ring = Ring::new(10_000, 2, b"");
            let sent = send(
                &c,
                &mut ring,
                Until::Bytes(5_000_001),
                &StopFlag::new(),
                &Live::new(),
                Duration::from_secs(10),
            )
            .unwrap();
            let (got, mapped, tries) = rx.join().unwrap();
            assert_eq!(sent.counters.bytes_sent, 5_000_001);
            assert_eq!(got.counters.bytes_received, 5_000_001, "{path:?}");
            assert_eq!(mapped, 0);
            if path == RxPath::ZeroCopy {
                // mapping nothing, it stops trying for a while: at most
                // ZC_IDLE tries for each ZC_REST copies after them
                let receives = got.counters.recv_calls;
                let most = receives.div_ceil(u64::from(ZC_IDLE + ZC_REST)) * u64::from(ZC_IDLE);
                assert!(tries <= most, "{tries} tries in {receives} receives");
                assert!(tries >= u64::from(ZC_IDLE).min(receives), "{tries}");
            }
        }
    }

    /// A fast flow's copying receiver is woken for more than a packet
    /// (its SO_RCVLOWAT read back), at most 64 KiB, and still takes every
    /// byte to the last; a slow one (a write every 20 ms) keeps the
    /// kernel's mark of one byte.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_fast_flow_is_received_in_larger_wakes_and_a_slow_one_as_it_comes() {
        let lowat = |s: &std::net::TcpStream| {
            sys::get_int_option(s, libc::SOL_SOCKET, libc::SO_RCVLOWAT).unwrap()
        };
        let (c, s) = tcp_pair();
        let rx = std::thread::spawn(move || {
            let mut reader = Reader::new(RxPath::Copy, &s).unwrap().batching();
            let mut buf = vec![0u8; 65536];
            let (mut total, mut most) = (0u64, 1);
            loop {
                let n = reader.read(&s, &mut buf, false).unwrap();
                if n == 0 {
                    break;
                }
                total += n as u64;
                most = most.max(lowat(&s));
            }
            (total, most)
        });
        let mut ring = Ring::new(65536, 2, b"");
        send(
            &c,
            &mut ring,
            Until::Bytes(200_000_001),
            &StopFlag::new(),
            &Live::new(),
            Duration::from_secs(30),
        )
        .unwrap();
        drop(c);
        let (total, most) = rx.join().unwrap();
        assert_eq!(total, 200_000_001);
        assert!(most > 4096 && most <= WAKE_MAX, "{most}");

        let (c, s) = tcp_pair();
        let rx = std::thread::spawn(move || {
            let mut reader = Reader::new(RxPath::Copy, &s).unwrap().batching();
            let mut buf = vec![0u8; 65536];
            let mut total = 0;
            while let Ok(n @ 1..) = reader.read(&s, &mut buf, false) {
                total += n;
            }
            (total, lowat(&s))
        });
        for _ in 0..40 {
            (&c).write_all(&[7u8; 100]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(c);
        assert_eq!(rx.join().unwrap(), (4000, 1));
    }
}
