//! UDP_STREAM's two-row table and its loss line.

use std::fmt::Write as _;

use super::*;

/// UDP_STREAM: netperf's two rows (what we sent, what arrived), then, with
/// `extras`, our line on the loss and where it happened.
pub fn udp_stream(t: &Test, m: &Measurement, f: &Figures, extras: bool) -> String {
    let mut s = String::new();
    if t.verbosity == 0 {
        if with_cpu(t) {
            let sd = if t.local_cpu { f.local_sd } else { f.remote_sd };
            // netperf prints the local side's method letter here even when
            // the figure is the remote side's: `U` with -C alone.
            let _ = writeln!(s, "{:6.2} {}", or_minus_one(sd), method(t.local_cpu));
        } else {
            let _ = writeln!(s, "{:7.2}", f.send_rate);
        }
        return s;
    }
    if with_cpu(t) {
        if t.headers {
            let _ = write!(
                s,
                "Socket  Message  Elapsed      Messages                   CPU      Service\n\
                 Size    Size     Time         Okay Errors   Throughput   Util     Demand\n\
                 bytes   bytes    secs            #      #   {}/sec % {}{}     us/KB\n\n",
                t.units.label(),
                method(t.local_cpu),
                method(t.spec.measure_cpu)
            );
        }
        let _ = write!(
            s,
            "{:6}  {:6}   {:<7.2}   {:7} {:6}    {:7.1}     {:<6.2}   {:<6.3}\n\
             {:6}           {:<7.2}   {:7}           {:7.1}     {:<6.2}   {:<6.3}\n\n",
            m.local.send_buf,
            m.local.send_size,
            f.elapsed,
            m.local.send_calls,
            m.send_errors,
            f.send_rate,
            or_minus_one(f.local_cpu),
            or_minus_one(f.local_sd),
            m.remote.recv_buf,
            f.elapsed,
            m.remote.recv_calls,
            f.recv_rate,
            or_minus_one(f.remote_cpu),
            or_minus_one(f.remote_sd)
        );
    } else {
        udp_stream_plain(t, m, f, &mut s);
    }
    if extras {
        s.push_str(&udp_loss_line(m));
        if let Some(bps) = t.spec.rate_bps {
            let u = t.units;
            let _ = writeln!(
                s,
                "Paced at {:.2} {}/sec requested; sent at {:.2} {}/sec",
                u.rate(bps as f64 / 8.0, 1.0),
                u.label(),
                f.send_rate,
                u.label()
            );
        }
    }
    s
}

/// UDP_STREAM's two rows without CPU columns.
fn udp_stream_plain(t: &Test, m: &Measurement, f: &Figures, s: &mut String) {
    if t.headers {
        let _ = write!(
            s,
            "Socket  Message  Elapsed      Messages                \n\
             Size    Size     Time         Okay Errors   Throughput\n\
             bytes   bytes    secs            #      #   {}/sec\n\n",
            t.units.label()
        );
    }
    let _ = write!(
        s,
        "{:6}  {:6}   {:<7.2}   {:7} {:6}    {:7.2}\n\
         {:6}           {:<7.2}   {:7}           {:7.2}\n\n",
        m.local.send_buf,
        m.local.send_size,
        f.elapsed,
        m.local.send_calls,
        m.send_errors,
        f.send_rate,
        m.remote.recv_buf,
        f.elapsed,
        m.remote.recv_calls,
        f.recv_rate
    );
}

/// Our line on UDP loss: how many of the datagrams sent did not arrive, how
/// many of those the receiving socket dropped for lack of buffer space, and
/// how many arrived out of order or twice.
pub fn udp_loss_line(m: &Measurement) -> String {
    let sent = m.local.send_calls;
    let Some(u) = &m.remote.udp else {
        return String::new();
    };
    let lost = sent.saturating_sub(u.received);
    let pct = if sent == 0 {
        0.0
    } else {
        lost as f64 * 100.0 / sent as f64
    };
    let drops = match u.drops_source {
        // The socket's drop counter counts every datagram it dropped:
        // when others' came too, or it dropped more than were lost, it
        // cannot say which of the lost were its.
        proto::DropSource::Socket if u.foreign > 0 || u.rcvbuf_drops > lost => format!(
            "the receiving socket's buffer dropped {} datagrams, this test's and others' alike, so up to {} of the lost there and at least {} elsewhere",
            u.rcvbuf_drops,
            u.rcvbuf_drops.min(lost),
            lost.saturating_sub(u.rcvbuf_drops)
        ),
        proto::DropSource::Socket => format!(
            "{} dropped by the receiving socket's buffer, {} elsewhere",
            u.rcvbuf_drops,
            lost.saturating_sub(u.rcvbuf_drops)
        ),
        proto::DropSource::SocketCoalesced => format!(
            "{} coalesced messages (UDP_GRO, up to {} datagrams each) dropped by the receiving socket's buffer",
            u.rcvbuf_drops,
            proto::test::MAX_UDP_SEGMENTS
        ),
        proto::DropSource::Host => format!(
            "{} receive-buffer errors on the receiving host (host-wide count: the socket's own was unavailable)",
            u.rcvbuf_drops
        ),
        proto::DropSource::Unavailable => "receive-buffer drops unknown".to_string(),
    };
    let strangers = match u.foreign {
        0 => String::new(),
        n => format!("; {n} datagrams from elsewhere reached the data socket and were not counted"),
    };
    format!(
        "Lost {lost} of {sent} datagrams ({pct:.3}%): {drops}; {} out of order, {} duplicated; jitter {:.3} ms{strangers}\n",
        u.out_of_order,
        u.duplicates,
        u.jitter_ns as f64 / 1e6
    )
}
