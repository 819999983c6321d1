//! The TCP stream tables: TCP_STREAM, TCP_MAERTS, TCP_SENDFILE.

use std::fmt::Write as _;

use super::*;

/// TCP_STREAM and TCP_MAERTS.
pub fn stream(t: &Test, m: &Measurement, f: &Figures) -> String {
    let mut s = String::new();
    if t.verbosity == 0 {
        if with_cpu(t) {
            return terse_sd(t, f);
        }
        let _ = writeln!(s, "{:7.2} {}", f.result, brand(t));
        return s;
    }
    if with_cpu(t) {
        return stream_cpu(t, m, f);
    }
    if t.headers {
        let _ = write!(
            s,
            "Recv   Send    Send                          \n\
             Socket Socket  Message  Elapsed              \n\
             Size   Size    Size     Time     Throughput  \n\
             bytes  bytes   bytes    secs.    {}/sec  \n\n",
            t.units.label()
        );
    }
    let (recv_buf, send_buf, msg) = match t.name {
        TestName::TcpMaerts => (m.local.recv_buf, m.remote.send_buf, m.remote.send_size),
        _ => (m.remote.recv_buf, m.local.send_buf, m.local.send_size),
    };
    let _ = writeln!(
        s,
        "{:6} {:6} {:6}    {:<6.2}   {:7.2}   {}",
        recv_buf,
        send_buf,
        msg,
        f.elapsed,
        f.result,
        brand(t)
    );
    if t.verbosity > 1 {
        s.push_str(&stream_detail(t, m));
    }
    s
}

/// TCP_STREAM and TCP_MAERTS with CPU columns.
fn stream_cpu(t: &Test, m: &Measurement, f: &Figures) -> String {
    let mut s = String::new();
    let maerts = t.name == TestName::TcpMaerts;
    if t.headers {
        let _ = write!(
            s,
            "Recv   Send    Send                          Utilization       Service Demand\n\
             Socket Socket  Message  Elapsed              {}\n\
             Size   Size    Size     Time     Throughput  local    remote   local   remote\n\
             bytes  bytes   bytes    secs.    {:<8.8}/s  % {}      % {}      us/KB   us/KB\n\n",
            if maerts {
                "Recv     Send     Recv    Send"
            } else {
                "Send     Recv     Send    Recv"
            },
            t.units.label(),
            method(t.local_cpu),
            method(t.spec.measure_cpu)
        );
    }
    let (recv_buf, send_buf, msg) = if maerts {
        (m.local.recv_buf, m.remote.send_buf, m.remote.send_size)
    } else {
        (m.remote.recv_buf, m.local.send_buf, m.local.send_size)
    };
    let _ = writeln!(
        s,
        "{:6} {:6} {:6}    {:<6.2}     {:7.2}   {:<6.2}   {:<6.2}   {:<6.3}  {:<6.3} {}",
        recv_buf,
        send_buf,
        msg,
        f.elapsed,
        f.result,
        or_minus_one(f.local_cpu),
        or_minus_one(f.remote_cpu),
        or_minus_one(f.local_sd),
        or_minus_one(f.remote_sd),
        brand(t)
    );
    if t.verbosity > 1 {
        s.push_str(&stream_detail(t, m));
    }
    s
}

fn per(bytes: u64, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        bytes as f64 / calls as f64
    }
}

/// `-v 2`: where the buffers sat, bytes per call on each side, and the MSS.
fn stream_detail(t: &Test, m: &Measurement) -> String {
    let maerts = t.name == TestName::TcpMaerts;
    // (our direction, theirs), and what each side moved in how many calls.
    let ((mine, theirs), local, remote) = if maerts {
        (
            ("Recv", "Send"),
            (m.local.bytes_received, m.local.recv_calls),
            (m.remote.bytes_sent, m.remote.send_calls),
        )
    } else {
        (
            ("Send", "Recv"),
            (m.local.bytes_sent, m.local.send_calls),
            (m.local.bytes_sent, m.remote.recv_calls),
        )
    };
    let (la, ra, lo, ro) = if maerts {
        (
            m.local.asked.recv_align,
            m.remote.asked.send_align,
            m.local.asked.recv_offset,
            m.remote.asked.send_offset,
        )
    } else {
        (
            m.local.asked.send_align,
            m.remote.asked.recv_align,
            m.local.asked.send_offset,
            m.remote.asked.recv_offset,
        )
    };
    // TCP_SENDFILE prints the bytes moved as C's %6.4g.
    let xfered = if t.is_sendfile() {
        crate::output::units::c_g(local.0 as f64, 6, 4)
    } else {
        format!("{:6}", local.0)
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "\nAlignment      Offset         Bytes    Bytes       {mine}s   Bytes    {theirs}s\n\
         Local  Remote  Local  Remote  Xfered   Per                 Per\n\
         {mine}   {theirs}    {mine}   {theirs}             {mine} (avg)          {theirs} (avg)\n\
         {:5}   {:5}  {:5}   {:5} {}  {:6.2}    {:6}   {:6.2} {:6}\n",
        la,
        ra,
        lo,
        ro,
        xfered,
        per(local.0, local.1),
        local.1,
        per(remote.0, remote.1),
        remote.1
    );
    let _ = write!(
        s,
        "\nMaximum\nSegment\nSize (bytes)\n{:6}\n",
        m.mss.map_or(-1, i64::from)
    );
    s
}

/// Our line on how the data moved, where an option of ours chose it
/// (`--rx-zerocopy`, `--rx-discard`, `--zerocopy`, `--io-uring`): empty
/// otherwise. Not netperf 2.7's: only on a terminal or at `-v 3`.
pub fn path_lines(t: &Test, m: &Measurement) -> String {
    let mut s = String::new();
    let (who, side) = receiver(t, m);
    match t.ours.rx {
        proto::RxPath::ZeroCopy => {
            let _ = writeln!(
                s,
                "Receive path: {who} took {:.1}% of the {} bytes it received as mapped pages (--rx-zerocopy), copying the rest",
                share(side.rx.mapped_bytes, side.bytes_received),
                side.bytes_received
            );
        }
        proto::RxPath::Discard => {
            let _ = writeln!(
                s,
                "Receive path: {who}'s kernel dropped the {} bytes it received uncopied (--rx-discard): nothing reached user space; the stack's ceiling, not a delivery rate",
                side.bytes_received
            );
        }
        proto::RxPath::Copy => {}
    }
    if t.ours.zerocopy {
        let tx = m.local.counts.tx;
        let _ = writeln!(
            s,
            "Send path: netperf sent with MSG_ZEROCOPY (--zerocopy): {} sends, {:.1}% of them copied (the locked-memory limit)",
            tx.zerocopy_sends,
            share(tx.copied_sends, tx.zerocopy_sends)
        );
    }
    if t.spec.paths.uring {
        let _ = writeln!(
            s,
            "Data path: both ends moved the data through io_uring (--io-uring)"
        );
    }
    s
}

pub use client::output::{receiver, share};
