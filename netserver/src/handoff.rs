//! Data connections that come to a session's own port and are handed to
//! its test by the listener (iperf3's streams connect to the port of their
//! control connection and present its cookie first). A test that expects
//! them registers its cookie; the listener's waiting room, having read a
//! connection's cookie, hands it over, or makes it a new session when no
//! test expects it. Each test takes at most as many as it expects: more
//! are closed.

use std::{
    collections::{HashMap, VecDeque},
    net::{IpAddr, SocketAddr, TcpStream, UdpSocket},
    sync::{
        Mutex,
        mpsc::{self, Receiver, SyncSender, TrySendError},
    },
};

use proto::iperf3::COOKIE_LEN;

/// A session's cookie.
pub(crate) type Cookie = [u8; COOKIE_LEN];

/// The tests expecting handed connections, by cookie; and those
/// expecting UDP streams, by their client's address, in the order they
/// asked (a UDP stream's first datagram carries no cookie: two tests of
/// one address setting up their UDP streams at the same moment take
/// them in turn).
#[derive(Debug, Default)]
pub(crate) struct Handoff {
    /// By cookie: the address of the test's control connection (its
    /// streams must come from there: the cookie crosses the control
    /// connection in the clear, and is never enough alone), and where
    /// its streams go.
    tcp: Mutex<HashMap<Cookie, (IpAddr, SyncSender<TcpStream>)>>,
    udp: Mutex<VecDeque<UdpRoute>>,
}

/// A test expecting UDP streams.
#[derive(Debug)]
struct UdpRoute {
    cookie: Cookie,
    from: IpAddr,
    left: usize,
    tx: SyncSender<UdpSocket>,
}

impl Handoff {
    /// A test expects `n` connections from `from` presenting `cookie`.
    pub(crate) fn expect(&self, cookie: Cookie, from: IpAddr, n: usize) -> Receiver<TcpStream> {
        let (tx, rx) = mpsc::sync_channel(n.max(1));
        if let Ok(mut m) = self.tcp.lock() {
            m.insert(cookie, (from.to_canonical(), tx));
        }
        rx
    }

    /// A test expects `n` UDP streams from `from`.
    pub(crate) fn expect_udp(&self, cookie: Cookie, from: IpAddr, n: usize) -> Receiver<UdpSocket> {
        let (tx, rx) = mpsc::sync_channel(n.max(1));
        if let Ok(mut q) = self.udp.lock() {
            q.push_back(UdpRoute {
                cookie,
                from,
                left: n,
                tx,
            });
        }
        rx
    }

    /// A UDP stream's first datagram came from `from`: where its socket
    /// goes, if a test expects one from there.
    pub(crate) fn udp_stream(&self, from: SocketAddr) -> Option<SyncSender<UdpSocket>> {
        let mut q = self.udp.lock().ok()?;
        let i = q.iter().position(|r| r.from == from.ip())?;
        let r = q.get_mut(i)?;
        r.left = r.left.saturating_sub(1);
        let tx = r.tx.clone();
        if r.left == 0 {
            q.remove(i);
        }
        Some(tx)
    }

    /// The test of `cookie` expects no more.
    pub(crate) fn forget(&self, cookie: &Cookie) {
        if let Ok(mut m) = self.tcp.lock() {
            m.remove(cookie);
        }
        if let Ok(mut q) = self.udp.lock() {
            q.retain(|r| &r.cookie != cookie);
        }
    }

    /// Whether a test expects connections presenting `cookie`, and from
    /// `from` (`Some(false)`: the cookie of a test of another address).
    pub(crate) fn expects(&self, cookie: &[u8], from: IpAddr) -> Option<bool> {
        let c = Cookie::try_from(cookie).ok()?;
        let m = self.tcp.lock().ok()?;
        m.get(&c).map(|(at, _)| *at == from.to_canonical())
    }

    /// Hand `stream`, which presented `cookie`, to the test expecting it
    /// from the stream's address: `Err` gives it back when none does (a
    /// new session's control connection). One over what the test expects
    /// is closed.
    pub(crate) fn hand(&self, cookie: &[u8], stream: TcpStream) -> Result<(), TcpStream> {
        let Ok(m) = self.tcp.lock() else {
            return Err(stream);
        };
        let Some((at, tx)) = Cookie::try_from(cookie).ok().and_then(|c| m.get(&c)) else {
            return Err(stream);
        };
        if stream.peer_addr().map(|p| p.ip().to_canonical()).ok() != Some(*at) {
            return Err(stream);
        }
        match tx.try_send(stream) {
            // (a stream over the count, or for a test that ended: closed)
            Ok(()) | Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => Ok(()),
        }
    }

    /// Cookies registered (for the memory tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.tcp.lock().map_or(0, |m| m.len())
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn a_test_takes_what_it_expects_and_no_more() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let conn = || TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let h = Handoff::default();
        let cookie = *b"abcdefghijklmnopqrstuvwxyz234567abcd\0";
        assert!(h.hand(&cookie, conn()).is_err(), "nobody expects it yet");
        // the test's control connection came from 127.0.0.2: a stream
        // from 127.0.0.1 with its cookie is not the test's
        let rx = h.expect(cookie, "127.0.0.2".parse().unwrap(), 2);
        assert_eq!(
            h.expects(&cookie, "127.0.0.1".parse().unwrap()),
            Some(false)
        );
        assert!(h.hand(&cookie, conn()).is_err(), "another address");
        h.forget(&cookie);
        let rx_other = rx;
        assert!(rx_other.try_recv().is_err());
        let rx = h.expect(cookie, "127.0.0.1".parse().unwrap(), 2);
        assert_eq!(h.expects(&cookie, "127.0.0.1".parse().unwrap()), Some(true));
        for _ in 0..3 {
            assert!(h.hand(&cookie, conn()).is_ok());
        }
        assert_eq!(rx.try_iter().count(), 2, "the third closed");
        assert!(h.hand(b"another cookie", conn()).is_err());
        h.forget(&cookie);
        assert_eq!(h.len(), 0);
        assert!(h.hand(&cookie, conn()).is_err());
    }
}
