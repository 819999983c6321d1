//! MSG_ZEROCOPY sends (`--zerocopy`): the kernel sends from our buffers
//! themselves, pinning their pages, and says on the socket's error queue
//! when it is done with them. Our buffers are never written once filled,
//! so a buffer still in flight may be sent again; what must not pile up
//! is the kernel's notifications (each send in flight holds option memory
//! until they are read: past `net.core.optmem_max`, a send fails with
//! ENOBUFS). So the sender reads them as they come, and waits for them
//! only when the kernel has no room for another send. The one flow's
//! blocking loop and the event loops both send through a [`ZcSender`].
//!
//! Pinned pages are charged to the locked-memory limit (RLIMIT_MEMLOCK,
//! 64 KiB in many containers, for an unprivileged user): past it, a send
//! fails with ENOBUFS with nothing in flight to wait for. That send is
//! made with a copy instead, as the kernel's documentation advises, and
//! counted ([`figures`]): the figure stays the bytes that went, and
//! netperf says how many sends were copied.

use std::{
    io,
    sync::atomic::{AtomicU64, Ordering},
};

use crate::{EngineError, sys};

/// A socket's MSG_ZEROCOPY sends.
#[derive(Debug, Default)]
pub struct ZcSender {
    /// Zero-copy sends made, and those the kernel said it is done with.
    sent: u64,
    done: u64,
}

/// Sends of this process that could not pin their pages and were copied.
static COPIED: AtomicU64 = AtomicU64::new(0);

/// This process's `--zerocopy` sends so far: all of them, and those made
/// with a copy because the kernel would not pin their pages (the
/// locked-memory limit). A test reads them before and after its data phase.
pub fn figures() -> proto::TxFigures {
    proto::TxFigures {
        zerocopy_sends: SENDS.load(Ordering::Relaxed),
        copied_sends: COPIED.load(Ordering::Relaxed),
    }
}

/// What was sent between two readings of [`figures`].
pub fn since(before: proto::TxFigures) -> proto::TxFigures {
    let now = figures();
    proto::TxFigures {
        zerocopy_sends: now.zerocopy_sends.saturating_sub(before.zerocopy_sends),
        copied_sends: now.copied_sends.saturating_sub(before.copied_sends),
    }
}

static SENDS: AtomicU64 = AtomicU64::new(0);

/// Read the error queue after this many sends.
const DRAIN_EVERY: u64 = 8;

impl ZcSender {
    /// How long a blocking sender's send waits at most for the kernel's
    /// room, before it looks at its stop flag.
    pub const WAIT_MS: i32 = 100;

    /// Turn SO_ZEROCOPY on for `conn`.
    pub fn new(conn: &impl crate::sys::Sock) -> Result<ZcSender, EngineError> {
        sys::opt::zerocopy(conn)
            .map_err(|e| EngineError::io("--zerocopy: setting SO_ZEROCOPY", e))?;
        Ok(ZcSender::default())
    }

    /// Take every notification queued, without waiting: how many there were.
    fn drain(&mut self, conn: &impl crate::sys::Sock) -> io::Result<u64> {
        let mut n = 0;
        loop {
            match sys::zerocopy_done(conn)? {
                sys::ErrQueue::ZeroCopyDone { lo, hi } => {
                    self.done += u64::from(hi.wrapping_sub(lo)) + 1;
                    n += 1;
                }
                sys::ErrQueue::Other => n += 1,
                sys::ErrQueue::Empty => return Ok(n),
            }
        }
    }

    /// Send `buf` with MSG_ZEROCOPY. When the kernel has no room for another
    /// send in flight, its notifications are read and the send tried again
    /// (`wait`: a blocking socket waits up to that many milliseconds for
    /// one; a non-blocking one says `WouldBlock`, and the error queue's
    /// event wakes its loop).
    pub fn send(
        &mut self,
        conn: &impl crate::sys::Sock,
        buf: &[u8],
        wait: Option<i32>,
    ) -> io::Result<usize> {
        if self.sent % DRAIN_EVERY == DRAIN_EVERY - 1 {
            self.drain(conn)?;
        }
        loop {
            match sys::send_zerocopy(conn, buf) {
                Ok(n) => {
                    self.sent += 1;
                    SENDS.fetch_add(1, Ordering::Relaxed);
                    return Ok(n);
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    if self.drain(conn)? > 0 {
                        continue;
                    }
                    if self.done >= self.sent {
                        // nothing in flight: the kernel would not pin the
                        // pages (the locked-memory limit); copy this one
                        let n = sys::write(conn, buf)?;
                        COPIED.fetch_add(1, Ordering::Relaxed);
                        SENDS.fetch_add(1, Ordering::Relaxed);
                        return Ok(n);
                    }
                    match wait {
                        Some(ms) if sys::wait_error_queue(conn, ms)? => {
                            if self.drain(conn)? == 0
                                && let Some(e) = socket2::SockRef::from(conn).take_error()?
                            {
                                return Err(e);
                            }
                        }
                        // (a blocking caller looks at its stop flag)
                        _ => return Err(io::ErrorKind::WouldBlock.into()),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Take what is left of the notifications (at the end of a test).
    pub fn finish(&mut self, conn: &impl crate::sys::Sock) {
        let _ = self.drain(conn);
    }
}
