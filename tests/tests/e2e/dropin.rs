//! The last classes of drop-in behaviour, as netperf 2.7.1 shows them (run
//! side by side when this was written): one host and one data port, the
//! data ports in the banner, numbers netperf 2.7 reads leniently, `-V`,
//! TCP_MSS.

use harness::{Netserver, fields, free_port, netperf, netperf_at, num};

/// `-- -P N` on one host: both data sockets have port N. netperf 2.7's
/// UDP_STREAM runs there; so does ours, every datagram counted (the loss
/// line's count is sent minus received, exactly), and the banner names the
/// port on both sides as 2.7's does.
#[test]
fn udp_stream_with_one_port_for_both_ends() {
    let ns = Netserver::start(&[]);
    let p = free_port().to_string();
    let out = netperf_at(
        &ns.port().to_string(),
        &[
            "-t",
            "UDP_STREAM",
            "-l",
            "1",
            "-v",
            "3",
            "--",
            "-P",
            &p,
            "-m",
            "1024",
        ],
    )
    .ok();
    let banner = out.stdout.lines().next().unwrap();
    assert!(
        banner.contains(&format!("port {p} AF_INET to"))
            && banner.ends_with(&format!("port {p} AF_INET : demo")),
        "{out}"
    );
    let rows: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .map(fields)
        .filter(|f| f.len() >= 4 && f[0].parse::<u64>().is_ok())
        .collect();
    let sent = num(rows[0][3]) as u64;
    let received = num(rows[1][2]) as u64;
    assert!(received > 0 && received <= sent, "{out}");
    let lost = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("Lost "))
        .map(|l| num(fields(l)[0]) as u64)
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(lost, sent - received, "{out}");
}

/// The same with TCP, or UDP_RR: netperf 2.7 prints zeros; ours stops at
/// once, naming the clash and the fix.
#[test]
fn tcp_with_one_port_for_both_ends_is_refused_at_once() {
    let ns = Netserver::start(&[]);
    let p = free_port().to_string();
    for t in ["TCP_STREAM", "TCP_RR", "UDP_RR"] {
        let out = netperf_at(
            &ns.port().to_string(),
            &["-t", t, "-l", "1", "--", "-P", &p],
        );
        assert!(!out.success(), "{out}");
        assert!(out.stdout.is_empty(), "{out}");
        assert!(
            out.stderr.contains(&format!("would both be port {p}")) && out.stderr.contains("-- -P"),
            "{out}"
        );
    }
}

/// `-- -P l,r` and `-P ,r`: the banner says the ports asked for, as 2.7's.
#[test]
fn the_banner_names_the_data_ports() {
    let ns = Netserver::start(&[]);
    let (l, r) = (free_port(), free_port());
    let ports = format!("{l},{r}");
    let out = netperf_at(
        &ns.port().to_string(),
        &["-t", "TCP_RR", "-l", "1", "--", "-P", &ports],
    )
    .ok();
    assert!(
        out.stdout.lines().next().unwrap().contains(&format!(
            "port {l} AF_INET to 127.0.0.1 (127.0.0.1) port {r} AF_INET"
        )),
        "{out}"
    );
}

/// Wrappers' command lines with words where numbers go: netperf 2.7 reads
/// them as 0 (or their leading number) and runs; so do we, with the same
/// effect, and a line on stderr for each. `-P ""` prints no headers, `-T
/// tcp` binds both ends to CPU 0, `-v word` is verbosity 0, `-- -m 12abc`
/// sends 12-byte messages.
#[test]
fn words_where_numbers_go_run_as_in_netperf_2_7() {
    let ns = Netserver::start(&[]);
    let out = netperf_at(
        &ns.port().to_string(),
        &[
            "-P",
            "",
            "-T",
            "tcp",
            "-l",
            "1",
            "-t",
            "TCP_STREAM",
            "--",
            "-m",
            "12abc",
        ],
    )
    .ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "no banner, no titles: {out}");
    assert_eq!(fields(lines[0])[2], "12", "{out}");
    assert!(
        out.stderr
            .contains("-T 'tcp' is not a clean number: taken as 0"),
        "{out}"
    );
    assert!(out.stderr.contains("-m '12abc'"), "{out}");
    let out = netperf_at(
        &ns.port().to_string(),
        &["-v", "word", "-l", "1", "-P", "0"],
    )
    .ok();
    assert_eq!(
        out.stdout.split_whitespace().count(),
        1,
        "verbosity 0: {out}"
    );
}

/// `-V` is netperf 2.7's one line; TCP_MSS is our data socket's segment
/// size right after connect, as netperf 2.7 reports it (on loopback 32741,
/// not the netserver's 32768).
#[test]
fn version_and_mss_as_netperf_2_7() {
    let out = netperf(&["-V"]).ok();
    assert_eq!(out.stdout, "Netperf version 2.7.1\n");
    let ns = Netserver::start(&[]);
    let out = netperf_at(&ns.port().to_string(), &["-t", "TCP_MSS", "-P", "0"]).ok();
    let mss = num(out.stdout.trim());
    // what a new loopback connection's TCP_MAXSEG says before any data
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let fresh = socket2::SockRef::from(&c).tcp_mss().unwrap();
    assert_eq!(mss as u32, fresh, "{out}");
}
