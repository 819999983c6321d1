//! Options netperf 2.7 honours, honoured here with its effect, seen where
//! it happens: the system calls of the right end (strace), the addresses
//! and ports the data connections use, the counters both ends keep.

use std::{net::TcpListener, process::Command, time::Duration};

use harness::{
    Netserver, TracedServer, bin, fields, have_strace, netperf, netperf_at, num, run_with_deadline,
};

fn trace_file(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rsnetperf-{tag}-{}", std::process::id()))
}

/// netperf with `args` under strace: its output and the system calls in
/// `calls`, with raw arguments for those in `raw` (buffer addresses).
pub(crate) fn traced_netperf(args: &[&str], calls: &str, raw: &str) -> (harness::Output, String) {
    let file = trace_file(&format!("np-{}", calls.len() + args.len()));
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-e"])
        .arg(format!("trace={calls}"))
        .args(["-s", "64", "-o"])
        .arg(&file);
    if !raw.is_empty() {
        cmd.args(["-e", &format!("raw={raw}")]);
    }
    cmd.arg(bin("netperf")).args(args);
    let out = run_with_deadline(cmd, Duration::from_secs(60));
    let trace = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    (out, trace)
}

/// A netserver under strace (see [`harness::TracedServer`]), tracing
/// `calls`, with raw arguments for those in `raw`.
pub(crate) fn traced_server(calls: &str, raw: &str, tag: &str) -> TracedServer {
    let mut args = vec!["-e".to_string(), format!("trace={calls}")];
    if !raw.is_empty() {
        args.extend(["-e".to_string(), format!("raw={raw}")]);
    }
    TracedServer::start(&args, &[], tag)
}

pub(crate) fn calls<'a>(trace: &'a str, needle: &str) -> Vec<&'a str> {
    trace.lines().filter(|l| l.contains(needle)).collect()
}

/// `-- -C -G -g -q -f -I`: netperf 2.7 sets these on its own data socket.
#[test]
fn local_options_reach_our_data_socket() {
    if !have_strace() {
        return;
    }
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let (out, t) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-l",
            "-1000000",
            "-P",
            "0",
            "--",
            "-C",
            "-G",
            "1000",
            "-g",
            "-q",
            "1000000",
            "-f",
            "-I",
            "-m",
            "10000",
        ],
        "setsockopt,write,sendto",
        "",
    );
    let out = out.ok();
    for want in [
        "TCP_CORK, [1]",
        "TCP_MAXSEG, [1000]",
        "SO_DEBUG, [1]",
        "SO_MAX_PACING_RATE, [1000000]",
    ] {
        assert!(!calls(&t, want).is_empty(), "no {want}:\n{t}");
    }
    // (strace names the value, or prints IP_PMTUDISC_DO's number)
    assert!(
        calls(&t, "IP_MTU_DISCOVER, [")
            .iter()
            .any(|l| l.contains("[IP_PMTUDISC_DO]") || l.contains("[2]")),
        "{t}"
    );
    // -I: the data goes out with write(2), 100 of them, not with send
    let writes = calls(&t, "write(")
        .into_iter()
        .filter(|l| l.contains("10000) = "))
        .count();
    assert!(writes >= 100, "{writes} writes of 10000 bytes:\n{t}");
    assert!(
        ns.wait_for_log(
            "TCP_STREAM 0 bytes sent, 1000000 received",
            Duration::from_secs(5)
        ),
        "{}",
        ns.log()
    );
    let _ = out;
}

/// netperf 2.7 sends UDP with sendto() to an address unless `-- -n`
/// connects our socket; `-- -N` has the netserver connect its own. netperf
/// 2.7 also sets SO_DONTROUTE on UDP stream sockets, both ends, unless
/// `-- -R 1`.
#[test]
fn udp_sockets_as_netperf_connects_and_routes_them() {
    if !have_strace() {
        return;
    }
    let srv = traced_server("connect,setsockopt", "", "udp");
    let port = srv.port();
    let base = [
        "-H",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "UDP_STREAM",
        "-l",
        "-100000",
        "-P",
        "0",
        "--",
        "-m",
        "1000",
    ];
    let (out, t) = traced_netperf(&base, "sendto,connect,setsockopt", "");
    out.ok();
    let data: Vec<&str> = calls(&t, "sendto(")
        .into_iter()
        .filter(|l| l.contains(", 1000, "))
        .collect();
    assert!(data.len() >= 100, "{t}");
    assert!(
        data.iter().all(|l| l.contains("sin_port=")),
        "sendto with an address:\n{t}"
    );
    assert!(!calls(&t, "SO_DONTROUTE, [1]").is_empty(), "{t}");
    let server = srv.trace();
    assert!(!calls(&server, "SO_DONTROUTE, [1]").is_empty(), "{server}");
    assert!(
        calls(&server, "connect(")
            .iter()
            .all(|l| !l.contains("sin_port=")),
        "the netserver connected its UDP socket without -N:\n{server}"
    );

    let mut args = base.to_vec();
    args.extend(["-n", "-N", "-R", "1"]);
    let (out, t) = traced_netperf(&args, "sendto,connect,setsockopt", "");
    out.ok();
    let data: Vec<&str> = calls(&t, "sendto(")
        .into_iter()
        .filter(|l| l.contains(", 1000, "))
        .collect();
    assert!(
        data.len() >= 100 && data.iter().all(|l| l.contains("NULL, 0")),
        "{t}"
    );
    assert!(calls(&t, "SO_DONTROUTE, [1]").is_empty(), "-R 1:\n{t}");
    assert!(
        srv.ns.wait_for_log(
            "UDP_STREAM 0 bytes sent, 100000 received",
            Duration::from_secs(5)
        ),
        "{}",
        srv.ns.log()
    );
    let server = srv.trace();
    assert!(
        calls(&server, "connect(")
            .iter()
            .any(|l| l.contains("sin_port=")),
        "-N: the netserver connects its UDP socket:\n{server}"
    );
}

/// `-- -a` (TCP_DEFER_ACCEPT) and `-- -F` (TCP Fast Open) reach the
/// netserver's data listener; `-F` ours too.
#[test]
fn defer_accept_and_fast_open() {
    if !have_strace() {
        return;
    }
    let srv = traced_server("setsockopt", "", "tfo");
    let port = srv.port();
    let (out, t) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-l",
            "-100000",
            "-P",
            "0",
            "--",
            "-a",
            "-F",
        ],
        "setsockopt",
        "",
    );
    out.ok();
    assert!(!calls(&t, "TCP_FASTOPEN_CONNECT, [1]").is_empty(), "{t}");
    let server = srv.trace();
    assert!(
        !calls(&server, "TCP_DEFER_ACCEPT, [5]").is_empty(),
        "{server}"
    );
    assert!(!calls(&server, "TCP_FASTOPEN, [5]").is_empty(), "{server}");
}

/// Global `-a`/`-o` and `-A`/`-O` place the buffers: every send and every
/// receive starts at a multiple of the alignment plus the offset.
#[test]
fn buffers_sit_where_alignment_and_offset_say() {
    if !have_strace() {
        return;
    }
    let srv = traced_server("recvfrom", "recvfrom", "align");
    let port = srv.port();
    let (out, t) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-l",
            "-200000",
            "-P",
            "0",
            "-a",
            "4096",
            "-o",
            "3",
            "-A",
            "64",
            "-O",
            ",5",
            "--",
            "-m",
            "10000",
        ],
        "sendto",
        "sendto",
    );
    out.ok();
    // raw: sendto(fd, 0xADDR, len, flags, ...)
    let addr = |l: &str| -> Option<u64> {
        let a = l.split(", ").nth(1)?;
        u64::from_str_radix(a.trim_start_matches("0x"), 16).ok()
    };
    let sends: Vec<u64> = calls(&t, "sendto(")
        .into_iter()
        .filter(|l| l.contains(", 0x2710,"))
        .filter_map(addr)
        .collect();
    assert!(sends.len() >= 20, "{t}");
    assert!(sends.iter().all(|a| (a - 3) % 4096 == 0), "{sends:x?}");
    assert!(
        srv.ns.wait_for_log(
            "TCP_STREAM 0 bytes sent, 200000 received",
            Duration::from_secs(5)
        ),
        "{}",
        srv.ns.log()
    );
    // the netserver's data receives (of its socket buffer's size, 128 KiB
    // on loopback; its control connection reads elsewhere): 64-aligned,
    // then 5 bytes in
    let server = srv.trace();
    let recvs: Vec<u64> = calls(&server, "recvfrom(")
        .into_iter()
        .filter(|l| l.contains(", 0x20000,"))
        .filter_map(addr)
        .collect();
    assert!(!recvs.is_empty(), "{server}");
    assert!(recvs.iter().all(|a| (a - 5) % 64 == 0), "{recvs:x?}");
}

/// `-Y` takes netperf 2.7's names and the whole TOS byte: ECN bits go on
/// our UDP socket and on the netserver's, as netperf 2.7's do (but an end
/// never sends CE: the netserver's DSCP then goes out not-ECT).
#[test]
fn tos_names_and_ecn_bits() {
    if !have_strace() {
        return;
    }
    let srv = traced_server("setsockopt", "", "tos");
    let port = srv.port();
    let (out, t) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "UDP_RR",
            "-l",
            "-100",
            "-P",
            "0",
            "-Y",
            "0xb9,ef",
            "--",
            "-k",
            "LOCAL_SOCKET_TOS,REMOTE_SOCKET_TOS",
        ],
        "setsockopt",
        "",
    );
    let out = out.ok();
    assert!(!calls(&t, "IP_TOS, [185]").is_empty(), "{t}");
    assert!(out.stdout.contains("LOCAL_SOCKET_TOS=0xb9"), "{out}");
    assert!(out.stdout.contains("REMOTE_SOCKET_TOS=0xb8"), "{out}");
    assert!(
        !calls(&srv.trace(), "IP_TOS, [184]").is_empty(),
        "{}",
        srv.trace()
    );
    let (out, _) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "UDP_RR",
            "-l",
            "-100",
            "-P",
            "0",
            "-Y",
            "0x01",
        ],
        "setsockopt",
        "",
    );
    out.ok();
    assert!(
        !calls(&srv.trace(), "IP_TOS, [1]").is_empty(),
        "ECN bits go on the netserver's sends, as netperf 2.7's: {}",
        srv.trace()
    );
    // CE is a queue's to set: the netserver's own sends never carry it
    let (out, _) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "UDP_RR",
            "-l",
            "-100",
            "-P",
            "0",
            "-Y",
            "0x0b,0x0b",
        ],
        "setsockopt",
        "",
    );
    out.ok();
    assert!(
        calls(&srv.trace(), "IP_TOS, [11]").is_empty(),
        "{}",
        srv.trace()
    );
    assert!(
        !calls(&srv.trace(), "IP_TOS, [8]").is_empty(),
        "{}",
        srv.trace()
    );
}

/// netperf 2.7 tries a congestion control algorithm the host refuses and
/// goes on with the one in use, which it reports.
#[test]
fn refused_congestion_control_runs_with_the_default() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .unwrap()
        .trim()
        .to_string();
    for test in ["TCP_STREAM", "TCP_RR"] {
        let out = netperf_at(
            &port,
            &[
                "-t",
                test,
                "-l",
                "-1000",
                "-P",
                "0",
                "--",
                "-K",
                "nosuchcc",
                "-k",
                "LOCAL_CONG_CONTROL,REMOTE_CONG_CONTROL",
            ],
        )
        .ok();
        assert!(
            out.stdout
                .contains(&format!("LOCAL_CONG_CONTROL={default}\n")),
            "{test}: {out}"
        );
        assert!(
            out.stdout
                .contains(&format!("REMOTE_CONG_CONTROL={default}\n")),
            "{test}: {out}"
        );
    }
}

/// `-Z` against a netserver that asks for no passphrase: netperf 2.7 runs;
/// so do we, quietly (a note on stderr at `-d`).
#[test]
fn passphrase_against_a_netserver_without_one() {
    let ns = Netserver::start(&[]);
    let out = ns.netperf(&["-Z", "secret", "-l", "-1000", "-P", "0"]).ok();
    assert_eq!(out.stdout.lines().count(), 1, "{out}");
    assert_eq!(out.stderr, "", "{out}");
    let out = ns
        .netperf(&["-Z", "secret", "-d", "-l", "-1000", "-P", "0"])
        .ok();
    // (stdout has netperf 2.7's debug lines around the row)
    assert!(out.stdout.contains("remote results obtained"), "{out}");
    assert!(out.stderr.contains("asks for no passphrase"), "{out}");
}

/// `-d`: our own debug lines go to stderr; stdout has netperf 2.7's
/// (dropin.rs), and its row keeps its place among them.
#[test]
fn our_debug_lines_go_to_stderr() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(&port, &["-d", "-d", "-l", "-1000", "-P", "0"]).ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    let row = lines[lines.len() - 2];
    assert_eq!(row.split_whitespace().count(), 5, "{out}");
    assert!(!out.stdout.contains("debug:"), "{out}");
    for want in [
        "debug: control connection from",
        "debug: requesting TCP_STREAM",
        "debug: granted: data port",
        "debug: request: TestSpec",
        "debug: netserver's counters",
    ] {
        assert!(out.stderr.contains(want), "no '{want}':\n{out}");
    }
}

/// `-- -P lport,rport`: our data socket binds to lport, the netserver
/// listens on rport (by default, for ports from 1024); netperf 2.7 reuses
/// the ports in every iteration of `-i`. A port in use is named.
#[test]
fn client_chosen_data_ports() {
    if !have_strace() {
        return;
    }
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let pick = || {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (lport, rport) = (pick(), pick());
    let ports = format!("{lport},{rport}");
    let (out, t) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-l",
            "-100000",
            "-P",
            "0",
            "-i",
            "3,3",
            "--",
            "-P",
            &ports,
        ],
        "bind,connect",
        "",
    );
    out.ok();
    let binds = calls(&t, &format!("sin_port=htons({lport})"))
        .into_iter()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains("bind("))
        .count();
    let connects = calls(&t, &format!("sin_port=htons({rport})"))
        .into_iter()
        .filter(|l| l.contains("connect("))
        .count();
    assert_eq!(
        (binds, connects),
        (3, 3),
        "three iterations on the same ports:\n{t}"
    );
    // UDP, and a port someone holds
    let out = netperf_at(
        &port,
        &[
            "-t",
            "UDP_STREAM",
            "-l",
            "-10000",
            "-P",
            "0",
            "--",
            "-P",
            &format!(",{}", pick()),
        ],
    );
    out.ok();
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = held.local_addr().unwrap().port();
    let out = netperf_at(&port, &["-l", "-1000", "--", "-P", &format!(",{busy}")]);
    assert!(!out.success(), "{out}");
    assert!(
        out.stderr
            .contains(&format!("cannot bind data port {busy}")),
        "{out}"
    );
}

/// `--data-ports` still narrows what a client may pick.
#[test]
fn data_ports_narrow_the_choice() {
    let ns = Netserver::start(&["--data-ports", "40000-40010"]);
    let port = ns.port().to_string();
    let out = netperf_at(&port, &["-l", "-1000", "--", "-P", ",50000"]);
    assert!(!out.success());
    assert!(
        out.stderr
            .contains("outside this netserver's data port range 40000-40010"),
        "{out}"
    );
    netperf_at(&port, &["-l", "-1000", "-P", "0", "--", "-P", ",40005"]).ok();
}

/// `-- -H` names another address of the netserver's host for the data
/// connections (a data network beside the control network); `-- -L` binds
/// ours to another of ours. Over UDP, a peer at an address other than the
/// control connection's proves it receives there before data flows.
#[test]
fn data_connections_on_other_addresses() {
    if !have_strace() {
        return;
    }
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    for (test, log) in [
        ("TCP_STREAM", "TCP_STREAM 0 bytes sent, 300000 received"),
        // few enough datagrams that a receiver not yet scheduled drops none
        ("UDP_STREAM", "UDP_STREAM 0 bytes sent, 30000 received"),
        ("TCP_RR", "TCP_RR 300 bytes sent, 300 received"),
    ] {
        let len = match test {
            "TCP_RR" => "-300",
            "UDP_STREAM" => "-30000",
            _ => "-300000",
        };
        let (out, t) = traced_netperf(
            &[
                "-H",
                "127.0.0.1",
                "-p",
                &port,
                "-t",
                test,
                "-l",
                len,
                "-P",
                "0",
                "--",
                "-H",
                "127.0.0.2",
                "-L",
                "127.0.0.3",
                "-m",
                "1000",
            ],
            "bind,connect,sendto",
            "",
        );
        out.ok();
        assert!(
            t.lines().any(|l| l.contains("inet_addr(\"127.0.0.2\")")
                && (l.contains("connect(") || l.contains("sendto("))),
            "{test} goes to 127.0.0.2:\n{t}"
        );
        assert!(
            t.lines()
                .any(|l| l.contains("bind(") && l.contains("inet_addr(\"127.0.0.3\")")),
            "{test} from 127.0.0.3:\n{t}"
        );
        assert!(
            ns.wait_for_log(log, Duration::from_secs(5)),
            "{test}: {}",
            ns.log()
        );
    }
}

/// `-- -4` under a global `-6`: control over IPv6, data over IPv4.
#[test]
fn data_family_other_than_control() {
    let ns = Netserver::start_with(&["-L", "::1"], &[]);
    let port = ns.port().to_string();
    let out = netperf(&[
        "-6",
        "-H",
        "::1",
        "-p",
        &port,
        "-l",
        "-100000",
        "-P",
        "0",
        "--",
        "-4",
        "-H",
        "127.0.0.1",
        "-k",
        "DEST_FAMILY,LOCAL_BYTES_SENT",
    ])
    .ok();
    assert!(out.stdout.contains("DEST_FAMILY=2\n"), "{out}");
    assert!(out.stdout.contains("LOCAL_BYTES_SENT=100000\n"), "{out}");
}

/// `-F ,file`: the netserver fills its buffers with its own data and never
/// opens a file a client names.
#[test]
fn remote_fill_never_opens_a_client_named_file() {
    if !have_strace() {
        return;
    }
    let srv = traced_server("openat,open", "", "fill");
    let port = srv.port();
    let out = netperf_at(
        &port,
        &[
            "-t",
            "TCP_MAERTS",
            "-F",
            ",/etc/hostname",
            "-l",
            "-100000",
            "-P",
            "0",
        ],
    )
    .ok();
    assert!(num(fields(&out.stdout)[4]) > 0.0, "{out}");
    assert!(!srv.trace().contains("/etc/hostname"), "{}", srv.trace());
}

/// Numbers as netperf 2.7's convert() reads them: `-r 80000:80000` is a
/// request and a response of 80000 bytes.
#[test]
fn numbers_with_trailing_words() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    let out = netperf_at(
        &port,
        &[
            "-t",
            "TCP_RR",
            "-l",
            "-10",
            "-P",
            "0",
            "--",
            "-r",
            "80000:80000",
            "-k",
            "REQUEST_SIZE,RESPONSE_SIZE,LOCAL_BYTES_SENT",
        ],
    )
    .ok();
    assert!(
        out.stdout
            .contains("REQUEST_SIZE=80000\nRESPONSE_SIZE=80000\nLOCAL_BYTES_SENT=800000\n"),
        "{out}"
    );
}

/// The system calls of thread `tid` in an `strace -f` trace, by name.
fn calls_of_thread(trace: &str, tid: &str) -> std::collections::BTreeMap<String, u64> {
    let mut by_name = std::collections::BTreeMap::new();
    for l in trace.lines() {
        let mut it = l.splitn(2, ' ');
        if it.next() != Some(tid) {
            continue;
        }
        // std's debug builds check that a descriptor is open before
        // closing it (F_GETFD); release builds make no such call
        if l.contains("fcntl(") && l.contains("F_GETFD") {
            continue;
        }
        let rest = it.next().unwrap_or("").trim_start();
        let Some(name) = rest.split('(').next().filter(|n| !n.contains(' ')) else {
            continue;
        };
        *by_name.entry(name.to_string()).or_insert(0) += 1;
    }
    by_name
}

/// TCP_CRR costs netserver 2.7's four system calls a transaction (accept,
/// one receive for the token and the request, one send, close) and
/// netperf no more than netperf 2.7's nine (socket, setsockopt, bind,
/// connect, send, receive, shutdown, receive, close).
#[test]
fn tcp_crr_system_calls_per_transaction() {
    if !have_strace() {
        return;
    }
    const N: u64 = 400;
    let data = "accept,accept4,recvfrom,read,recvmsg,sendto,write,sendmsg,close,setsockopt,getsockopt,ioctl,fcntl,poll,ppoll,shutdown,socket,bind,connect";
    let srv = traced_server(data, "", "crr");
    let port = srv.port();
    let n = format!("-{N}");
    let (out, client) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "TCP_CRR",
            "-l",
            &n,
            "-P",
            "0",
            "-v",
            "0",
        ],
        data,
        "",
    );
    out.ok();
    // the responder: the thread that accepts data connections
    let server = srv.trace();
    let accepting = server
        .lines()
        .filter(|l| l.contains("accept4(") && !l.contains("= -1"))
        .filter_map(|l| l.split(' ').next())
        .collect::<std::collections::BTreeSet<_>>();
    let tid = accepting
        .iter()
        .copied()
        .max_by_key(|t| {
            calls_of_thread(&server, t)
                .get("accept4")
                .copied()
                .unwrap_or(0)
        })
        .unwrap_or_else(|| panic!("no accepting thread in {server}"));
    let by = calls_of_thread(&server, tid);
    let total: u64 = by.values().sum();
    assert!(by.get("accept4").copied().unwrap_or(0) >= N, "{by:?}");
    // four a transaction, and a few to set the listener up and end (the
    // responder runs on the test's own thread, which reports the end)
    assert!(
        total <= 4 * N + 16,
        "{total} calls for {N} transactions: {by:?}"
    );
    // none a transaction (the listener's set-up aside)
    for none in ["poll", "ppoll", "ioctl", "fcntl"] {
        assert!(by.get(none).copied().unwrap_or(0) <= 8, "{none} in {by:?}");
    }
    // the requester: netperf's thread that connects
    let tid = client
        .lines()
        .find(|l| l.contains(" connect(") || l.contains("connect("))
        .and_then(|l| l.split(' ').next())
        .map(str::to_string);
    let tid = tid.unwrap_or_else(|| panic!("no connect in {client}"));
    let by = calls_of_thread(&client, &tid);
    let total: u64 = by.values().sum();
    assert!(by.get("connect").copied().unwrap_or(0) >= N, "{by:?}");
    assert!(total <= 9 * N, "{total} calls for {N} transactions: {by:?}");
}

/// UDP_STREAM's fast paths: `--batch` sends and receives with sendmmsg and
/// recvmmsg of that many datagrams; `--gso` sets UDP_SEGMENT on netperf's
/// socket and UDP_GRO on netserver's; either way both ends count every
/// datagram (paced, so that none is lost on loopback).
#[test]
fn udp_batch_and_gso_reach_both_ends_and_count_every_datagram() {
    if !have_strace() {
        return;
    }
    for (tag, extra, netperf_call, server_call) in [
        ("batch", &["--batch", "16"][..], "sendmmsg(", "recvmmsg("),
        (
            "gso",
            &["--gso", "16K"][..],
            "UDP_SEGMENT, [1024]",
            "UDP_GRO, [1]",
        ),
    ] {
        let srv = traced_server("recvmmsg,recvfrom,setsockopt", "recvmmsg", tag);
        let port = srv.port();
        let mut args = vec![
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "UDP_STREAM",
            "-l",
            "-1024000",
            "-P",
            "0",
            "-v",
            "0",
            "--",
            "-m",
            "1024",
            // slow enough that a traced receiver on a busy machine keeps
            // up: none of the 1000 is lost
            "--rate",
            "10m",
        ];
        args.extend(extra);
        let (out, t) = traced_netperf(&args, "sendmmsg,sendto,setsockopt", "sendmmsg");
        out.ok();
        assert!(!calls(&t, netperf_call).is_empty(), "{tag}: {t}");
        if tag == "batch" {
            // raw: sendmmsg(fd, msgvec, vlen, flags), 16 messages a call
            assert!(
                calls(&t, "sendmmsg(")
                    .iter()
                    .any(|l| l.contains(", 0x10, ")),
                "{t}"
            );
            assert!(calls(&t, "sendto(").len() < 20, "one datagram a call: {t}");
        }
        assert!(
            srv.ns.wait_for_log(
                "UDP_STREAM 0 bytes sent, 1024000 received",
                Duration::from_secs(5)
            ),
            "{tag}: {}",
            srv.ns.log()
        );
        let server = srv.trace();
        assert!(!calls(&server, server_call).is_empty(), "{tag}: {server}");
    }
}

/// `--zerocopy`: netperf turns SO_ZEROCOPY on, sends with MSG_ZEROCOPY,
/// reads the kernel's completions from the error queue as they come, and
/// every byte arrives, one flow or two (on the event loops); the options
/// it does not apply to are refused before anything runs.
#[test]
fn zerocopy_sends_and_counts_every_byte() {
    if !have_strace() {
        return;
    }
    let srv = traced_server("setsockopt", "", "zc");
    let port = srv.port();
    let (out, t) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "TCP_STREAM",
            "-l",
            "-20000000",
            "-P",
            "0",
            "-v",
            "0",
            "--",
            "-m",
            "16K",
            "--zerocopy",
        ],
        "setsockopt,sendto,recvmsg",
        "",
    );
    out.ok();
    assert!(!calls(&t, "SO_ZEROCOPY, [1]").is_empty(), "{t}");
    let zc = calls(&t, "MSG_ZEROCOPY");
    assert!(
        zc.len() >= 20_000_000 / 16384,
        "{} zerocopy sends",
        zc.len()
    );
    assert!(!calls(&t, "MSG_ERRQUEUE").is_empty(), "no completion read");
    assert!(
        srv.ns.wait_for_log(
            "TCP_STREAM 0 bytes sent, 20000000 received",
            Duration::from_secs(5)
        ),
        "{}",
        srv.ns.log()
    );
    // two flows, on the event loops: each sends with MSG_ZEROCOPY
    let (out, t) = traced_netperf(
        &[
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "TCP_STREAM",
            "-l",
            "-20000000",
            "--json",
            "--",
            "-m",
            "16K",
            "--zerocopy",
            "--flows",
            "2",
        ],
        "sendto,recvmsg",
        "",
    );
    let out = out.ok();
    let d: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(d["local"]["bytes_sent"], 20_000_000, "{out}");
    assert_eq!(d["remote"]["bytes_received"], 20_000_000, "{out}");
    let zc = calls(&t, "MSG_ZEROCOPY");
    assert!(
        zc.len() >= 20_000_000 / 16384,
        "{} zerocopy sends",
        zc.len()
    );
    for bad in [
        &["-t", "TCP_MAERTS", "--", "--zerocopy"][..],
        &["-t", "UDP_STREAM", "--", "--zerocopy"][..],
        &["-t", "TCP_RR", "--", "--batch", "8"][..],
        &["-t", "TCP_STREAM", "--", "--gso", "64K"][..],
    ] {
        let mut args = vec!["-H", "127.0.0.1", "-p", &port];
        args.extend(bad);
        let out = netperf(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {out}");
        assert!(out.stdout.is_empty(), "{bad:?} printed: {out}");
        let named = if bad.contains(&"--zerocopy") {
            "--zerocopy"
        } else {
            "--batch, --gso"
        };
        assert!(out.stderr.contains(named), "{bad:?}: {out}");
    }
}

/// `--rate` on a TCP stream: the sending end's sockets paced by the kernel
/// at each flow's share (SO_MAX_PACING_RATE, in bytes a second: 100 Mbit/s
/// over two flows is 6,250,000 each), ours for TCP_STREAM and the
/// netserver's for TCP_MAERTS; the figure stays under the rate asked.
#[test]
fn rate_paces_a_tcp_sender_at_either_end() {
    if !have_strace() {
        return;
    }
    let srv = traced_server("setsockopt", "", "tcp-rate");
    let port = srv.port();
    for test in ["TCP_STREAM", "TCP_MAERTS"] {
        let args = [
            "-H",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            test,
            "-l",
            "2",
            "-P",
            "0",
            "-v",
            "0",
            "--",
            "--rate",
            "100m",
            "--flows",
            "2",
        ];
        let (out, t) = traced_netperf(&args, "setsockopt", "");
        let out = out.ok();
        let mbps = num(out.stdout.trim());
        eprintln!("{test} --rate 100m --flows 2: {mbps} 10^6 bits/s");
        assert!(mbps > 0.0 && mbps < 110.0, "{test}: {out}");
        let ours = calls(&t, "SO_MAX_PACING_RATE, [6250000]").len();
        let theirs = calls(&srv.trace(), "SO_MAX_PACING_RATE, [6250000]").len();
        match test {
            "TCP_STREAM" => assert_eq!(ours, 2, "{t}"),
            _ => assert!(theirs >= 2, "{}", srv.trace()),
        }
    }
}

/// `--help` is what a newcomer types first: on both programs it prints
/// what `-h` prints, and exits 0 (netperf 2.7 prints its usage too; ours
/// said "unknown option --help").
#[test]
fn help_prints_the_usage_on_both_programs() {
    for program in ["netperf", "netserver"] {
        let run = |arg: &str| {
            let mut c = Command::new(bin(program));
            c.arg(arg);
            run_with_deadline(c, Duration::from_secs(10))
        };
        let (long, short) = (run("--help"), run("-h"));
        assert!(long.success(), "{program} --help: {long}");
        assert!(long.stdout.contains("Usage"), "{program} --help: {long}");
        assert_eq!(long.stdout, short.stdout, "{program}: --help and -h differ");
    }
}

/// A congestion control the netserver keeps off (it applies only those in
/// its host's net.ipv4.tcp_allowed_congestion_control, even as root) is
/// said with the end, the reason and the remedy; not as an unprivileged
/// process's lot, which a root daemon's is not.
#[test]
fn a_congestion_control_the_netserver_keeps_off_is_said_with_its_remedy() {
    let read = |f: &str| std::fs::read_to_string(f).unwrap_or_default();
    let allowed = read("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
    let Some(off) = read("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .split_whitespace()
        .find(|a| !allowed.split_whitespace().any(|b| b == *a))
        .map(str::to_string)
    else {
        eprintln!("!!! SKIPPED: every available congestion control is allowed here");
        return;
    };
    let ns = Netserver::start(&[]);
    let k = format!(",{off}");
    let out = ns.netperf(&["-t", "TCP_STREAM", "-l", "1", "-P", "0", "--", "-K", &k]);
    assert!(out.success(), "{out}");
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains(&format!("-K ,{off}: ")))
        .unwrap_or_else(|| panic!("no -K line: {out}"))
        .to_string();
    assert!(line.contains("the netserver's end ran"), "{line}");
    assert!(line.contains("tcp_allowed_congestion_control"), "{line}");
    assert!(line.contains("on the netserver's host"), "{line}");
    assert!(!line.contains("unprivileged process may only"), "{line}");
}
