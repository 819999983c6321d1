//! The last classes of drop-in behaviour, as netperf 2.7.1 shows them (run
//! side by side when this was written): one host and one data port, the
//! data ports in the banner, numbers netperf 2.7 reads leniently, `-V`,
//! TCP_MSS, the `-d` lines that wrappers scrape.

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

/// `-d` writes netperf 2.7's describing lines to stdout, where wrappers
/// scrape them, in 2.7's order around the banner and the table: the
/// control endpoints, our data socket's buffers (the table's figures), our
/// ring, the netserver's data port (the one `-- -P` asked for), the timer;
/// then, when the kernel chose our buffers, the sizes they grew to. Our
/// own debug lines stay on stderr.
#[test]
fn debug_lines_that_wrappers_scrape_are_on_stdout() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let data = free_port();
    let ports = format!(",{data}");
    let out = netperf_at(
        &port,
        &[
            "-t",
            "TCP_STREAM",
            "-l",
            "1",
            "-d",
            "--",
            "-s",
            "65536",
            "-m",
            "1000",
            "-P",
            &ports,
        ],
    )
    .ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line '{prefix}...': {out}"))
    };
    assert_eq!(lines[0], format!("remotehost is 127.0.0.1 and port {port}"));
    assert_eq!(
        lines[at("successful connection")],
        format!("successful connection to remote netserver at 127.0.0.1 and {port}")
    );
    assert!(lines[at("complete_addrinfo")].contains(&format!("port {data} family AF_INET")));
    let banner = at("MIGRATED TCP STREAM TEST");
    let socket = at("create_data_socket: socket ");
    assert!(
        at("local_data_address not set") < banner && banner < socket,
        "{out}"
    );
    let size = |which: &str| -> u32 {
        let l = lines[at(&format!("netperf: get_sock_buffer: {which} socket size"))];
        l.rsplit(' ').next().unwrap().parse().unwrap()
    };
    // the kernel doubles what -s asked for, and the table says so
    assert_eq!((size("send"), size("receive")), (131072, 131072), "{out}");
    let ring = lines[at("send_omni_inner: ")];
    assert!(ring.ends_with(" entry send_ring obtained..."), "{ring}");
    let width: u32 = fields(ring)[1].parse().unwrap();
    assert_eq!(width, 131072 / 1000 + 1, "{out}");
    assert_eq!(
        lines[at("remote listen done.") + 1],
        format!("remote port is {data}")
    );
    assert_eq!(
        lines[at("About to start")],
        "About to start a timer for 1 seconds."
    );
    // -s was given: netperf 2.7 reads no sizes at the end
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("get_sock_buffer"))
            .count(),
        2,
        "{out}"
    );
    let table = at("Recv   Send    Send");
    assert!(
        at("remote results obtained") < at("calculate_confidence: itr  1;")
            && at("calculate_confidence") < table
    );
    let row = fields(lines[table + 5]);
    assert_eq!((row[1], row[2]), ("131072", "1000"), "{out}");
    assert_eq!(
        *lines.last().unwrap(),
        "shutdown_control: shutdown of control connection requested."
    );
    assert!(!out.stderr.contains("remote port is"), "{out}");
    // and when the kernel chose our buffers, the sizes they ended at
    let out = netperf_at(&port, &["-t", "TCP_RR", "-l", "1", "-d"]).ok();
    let after_timer = out.stdout.split("About to start a timer").nth(1).unwrap();
    assert_eq!(after_timer.matches("get_sock_buffer").count(), 2, "{out}");
    let unset = netperf_at(&port, &["-t", "TCP_RR", "-l", "1"]).ok();
    assert!(!unset.stdout.contains("remote port is"), "{unset}");
}
