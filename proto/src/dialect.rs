//! Which protocol a control connection speaks, told from its first bytes
//! (netperf 2.7 has no version exchange, so the bytes themselves must say).
//!
//! - This suite's: a 4-byte frame length, then the hello: variant 0 and the
//!   8 bytes of [`MAGIC`].
//! - netperf 2.7's: 656-byte frames whose first word is a request type
//!   (big-endian; DO_OMNI is 97, PASSPHRASE 6, the classic tests 10 to
//!   300, DO_SYSINFO 600), and whose second is a CPU number or -1.

use crate::message::MAGIC;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// This suite's protocol (doc/protocol.md).
    Native,
    /// netperf 2.7's fixed 656-byte frames.
    Netperf2,
    /// iperf3's (3.x) state bytes and JSON, on a listener of its own
    /// (`netserver --iperf3`): chosen by the port, not sniffed.
    Iperf3,
}

/// What the first bytes say so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sniff {
    NeedMore,
    Is(Dialect),
}

/// Bytes that decide: our frame header, the hello's variant and magic.
const OURS: usize = 4 + 1 + MAGIC.len();
/// The largest request type netperf 2.7 sends (DO_SYSINFO).
const MAX_REQUEST: u32 = 1000;

/// Tell the dialect from the first bytes of a connection. Anything that is
/// not netperf 2.7's is taken as ours, so that the framing layer names what
/// is wrong with it (a frame too large, an empty one, not a hello).
pub fn sniff(first: &[u8]) -> Sniff {
    let ours =
        first.len() >= OURS && first.get(4) == Some(&0) && first.get(5..OURS) == Some(&MAGIC[..]);
    if ours {
        return Sniff::Is(Dialect::Native);
    }
    let Some(w0) = first.first_chunk::<4>() else {
        return Sniff::NeedMore;
    };
    let request = u32::from_be_bytes(*w0);
    if !(1..=MAX_REQUEST).contains(&request) {
        return Sniff::Is(Dialect::Native);
    }
    // A request type of netperf 2.7's, or the length of a short frame of
    // ours: our hello's beginning waits for its magic ...
    let hello_so_far =
        first.get(4).is_none_or(|&v| v == 0) && first.get(5..).is_none_or(|m| MAGIC.starts_with(m));
    if hello_so_far {
        return Sniff::NeedMore;
    }
    // ... netperf 2.7 sends its 656 bytes at once ...
    if first.len() >= 8 {
        return Sniff::Is(Dialect::Netperf2);
    }
    // ... and a whole short frame of ours is ours (and wrong).
    if first.len() >= 4 + request as usize {
        return Sniff::Is(Dialect::Native);
    }
    Sniff::NeedMore
}

/// What the first bytes of a server's answer to our (656-byte) hello say:
/// ours begins with our frame and hello; netperf 2.7's netserver answers
/// an unknown request with serv_errno 998 in its second word.
pub fn sniff_reply(first: &[u8]) -> Sniff {
    let ours =
        first.len() >= OURS && first.get(4) == Some(&0) && first.get(5..OURS) == Some(&MAGIC[..]);
    if ours {
        return Sniff::Is(Dialect::Native);
    }
    match first.get(4..8).and_then(|w| <[u8; 4]>::try_from(w).ok()) {
        None => Sniff::NeedMore,
        Some(w1) if u32::from_be_bytes(w1) == 998 => Sniff::Is(Dialect::Netperf2),
        // anything else: the framing says what is wrong with it
        Some(_) => Sniff::Is(Dialect::Native),
    }
}

/// Bytes of every netperf 2.7 control frame.
pub const NETPERF2_FRAME: usize = 656;

/// What netserver answers a netperf 2.7 client it does not serve (its
/// administrator's choice, see [`Netperf2Refused`]): one 656-byte response
/// whose `serv_errno` is EPROTONOSUPPORT, which netperf 2.7 prints as
/// "netperf: remote error 93" and the error's text, then exits; the
/// test-specific area says why in ASCII, for whoever captures it. `first`
/// is the client's first bytes: the response type answers its first
/// request (after a PASSPHRASE, the omni response).
pub fn netperf2_refusal(first: &[u8], why: Netperf2Refused) -> [u8; NETPERF2_FRAME] {
    const EPROTONOSUPPORT: i32 = 93;
    netperf2_error(first, EPROTONOSUPPORT, why.text())
}

/// A netperf 2.7 client's answer to its first request, `first`: the
/// response to it, with `errno` (which netperf 2.7 prints as "remote error
/// N") and `why` in the test-specific area, in ASCII, cut to fit.
fn netperf2_error(first: &[u8], errno: i32, why: &str) -> [u8; NETPERF2_FRAME] {
    const PASSPHRASE: u32 = 6;
    const OMNI_RESPONSE: u32 = 98;
    let request = first
        .first_chunk::<4>()
        .map_or(PASSPHRASE, |w| u32::from_be_bytes(*w));
    let response = if request == PASSPHRASE || request >= MAX_REQUEST {
        OMNI_RESPONSE
    } else {
        request + 1
    };
    let mut f = [0u8; NETPERF2_FRAME];
    f[..4].copy_from_slice(&response.to_be_bytes());
    f[4..8].copy_from_slice(&errno.to_be_bytes());
    let why = why.as_bytes();
    let n = why.len().min(NETPERF2_FRAME - 8 - 1);
    if let (Some(area), Some(text)) = (f.get_mut(8..8 + n), why.get(..n)) {
        area.copy_from_slice(text);
    }
    f
}

/// Whether the first bytes of a connection that stopped short of a whole
/// first message look like netperf 2.7's: its frame's first word is a
/// request type, and what follows is not our hello. (Four bytes alone are
/// taken as netperf 2.7's: a client of ours sends its hello at once.)
fn looks_like_netperf2(first: &[u8]) -> bool {
    match sniff(first) {
        Sniff::Is(d) => d == Dialect::Netperf2,
        Sniff::NeedMore => {
            first
                .first_chunk::<4>()
                .is_some_and(|w| (1..=MAX_REQUEST).contains(&u32::from_be_bytes(*w)))
                && first.len() == 4
        }
    }
}

/// What to answer a connection refused before any session spoke with it
/// (busy, shutting down, silent past its deadline), in the protocol its
/// first bytes `first` speak: netperf 2.7's 656-byte frame, or our error
/// frame.
pub fn refusal(first: &[u8], err: &crate::message::ErrorMsg) -> Vec<u8> {
    if looks_like_netperf2(first) {
        return netperf2_error(first, crate::netperf2::errno_of(err.code), &err.message).to_vec();
    }
    crate::message::ServerMsg::Error(err.clone())
        .encode()
        .unwrap_or_default()
}

/// Why a netserver that speaks netperf 2.7's protocol refuses its clients.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Netperf2Refused {
    /// Its administrator turned them away (`--no-netperf2`).
    #[default]
    Disabled,
    /// It requires a key (`--key-file`), which netperf 2.7's protocol
    /// cannot prove (`--allow-netperf2` serves them anyway).
    KeyRequired,
}

impl Netperf2Refused {
    /// Why, in a line for the client and the log (at most a frame's
    /// test-specific area).
    pub fn text(self) -> &'static str {
        match self {
            Netperf2Refused::Disabled => {
                "this netserver (rsnetperf) serves netperf 2.7 clients, but its administrator turned them away (--no-netperf2)"
            }
            Netperf2Refused::KeyRequired => {
                "this netserver (rsnetperf) requires a key (--key-file), which netperf 2.7's protocol cannot prove; its administrator can serve netperf 2.7 clients with --allow-netperf2"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netperf2_is_refused_in_its_own_frame() {
        let key = Netperf2Refused::KeyRequired;
        let f = netperf2_refusal(&[0, 0, 0, 97, 0xff, 0xff, 0xff, 0xff], key);
        assert_eq!(f.len(), 656);
        assert_eq!(&f[..8], &[0, 0, 0, 98, 0, 0, 0, 93]);
        assert!(f[8..].starts_with(b"this netserver (rsnetperf) requires a key"));
        assert_eq!(&netperf2_refusal(&[0, 0, 0, 10], key)[..4], &[0, 0, 0, 11]);
        assert_eq!(&netperf2_refusal(&[0, 0, 0, 6], key)[..4], &[0, 0, 0, 98]);
        // each reason fits the frame's test-specific area, with its end
        for why in [Netperf2Refused::Disabled, Netperf2Refused::KeyRequired] {
            assert!(why.text().len() < NETPERF2_FRAME - 8 - 1);
        }
    }

    /// A refusal before any session answers in the protocol of the first
    /// bytes: netperf 2.7's frame for a netperf 2.7 client that stalled
    /// part way through its first frame, ours otherwise.
    #[test]
    fn refusals_speak_the_clients_protocol() {
        use crate::message::{ErrorCode, ErrorMsg};
        let err = ErrorMsg::new(ErrorCode::Timeout, "no whole first message within 5 s");
        for partial in [
            &[0u8, 0, 0, 97][..],
            &[0, 0, 0, 97, 0xff, 0xff, 0xff, 0xff, 0, 0],
        ] {
            let r = refusal(partial, &err);
            assert_eq!(r.len(), NETPERF2_FRAME);
            assert_eq!(&r[..8], &[0, 0, 0, 98, 0, 0, 0, 110]);
            assert!(r[8..].starts_with(b"no whole first message"));
        }
        let hello = crate::frame::encode(&crate::message::ClientMsg::Hello(
            crate::message::Hello::new("x"),
        ))
        .unwrap();
        for ours in [&hello[..7], &[][..], b"GET / HTTP/1.1"] {
            let r = refusal(ours, &err);
            let (m, _) = crate::frame::decode::<crate::message::ServerMsg>(&r)
                .unwrap()
                .unwrap();
            assert!(
                matches!(m, crate::message::ServerMsg::Error(e) if e.code == ErrorCode::Timeout)
            );
        }
    }

    #[test]
    fn ours_netperf2s_and_neither() {
        let hello = crate::frame::encode(&crate::message::ClientMsg::Hello(
            crate::message::Hello::new("x"),
        ))
        .unwrap();
        assert_eq!(sniff(&hello), Sniff::Is(Dialect::Native));
        for n in 0..OURS {
            assert_eq!(sniff(&hello[..n]), Sniff::NeedMore, "{n} bytes");
        }
        let mut omni = vec![0u8; 656];
        omni[..8].copy_from_slice(&[0, 0, 0, 97, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(sniff(&omni), Sniff::Is(Dialect::Netperf2));
        assert_eq!(sniff(&omni[..8]), Sniff::Is(Dialect::Netperf2));
        let mut pass = vec![0u8; 656];
        pass[..12].copy_from_slice(&[0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, b's', b'e', b'c', 0]);
        assert_eq!(sniff(&pass), Sniff::Is(Dialect::Netperf2));
        // the framing layer says what is wrong with these
        assert_eq!(sniff(b"GET / HTTP/1.1\r\n"), Sniff::Is(Dialect::Native));
        assert_eq!(sniff(&[0, 0, 0, 0]), Sniff::Is(Dialect::Native));
        assert_eq!(
            sniff(&[0, 0, 0, 3, 0xff, 0xff, 0xff]),
            Sniff::Is(Dialect::Native)
        );
        assert_eq!(sniff(&[0, 0, 0, 9, 0xff]), Sniff::NeedMore);
        // netperf 2.7 with -T ,0: its second word is 0
        let mut cpu0 = omni.clone();
        cpu0[4..8].copy_from_slice(&[0, 0, 0, 0]);
        assert_eq!(sniff(&cpu0), Sniff::Is(Dialect::Netperf2));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_sniff_without_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = sniff(&b);
        }
    }
}
