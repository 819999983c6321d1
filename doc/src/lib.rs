//! The man pages and shell completions of `netperf` and `netserver`,
//! generated from the option tables the programs parse with, so that they
//! are never written twice. `cargo run -p rsnetperf-doc` writes them under
//! doc/man and doc/completions; a test fails if the committed ones are stale.

use std::fmt::Write as _;

use clap::{Command, builder::PossibleValuesParser};
use clap_complete::Shell;
use optparse::{Arity, OptDef};

pub const NETPERF_ABOUT: &str = "network benchmark client, compatible with netperf 2.7";
pub const NETSERVER_ABOUT: &str = "network benchmark daemon for netperf";

/// netperf's global options as a clap command (for man and completions).
pub fn netperf_command() -> Command {
    let tests: Vec<&'static str> = netperf::cli::TestName::ALL
        .iter()
        .map(|k| k.name())
        .collect();
    optparse::clap::command("netperf", NETPERF_ABOUT, netperf::cli::global::OPTIONS)
        .override_usage("netperf [global options] [-- test options]")
        .mut_arg("test", |a| a.value_parser(PossibleValuesParser::new(tests)))
        .long_about(
            "netperf measures network performance against a netserver: bulk \
             throughput (TCP_STREAM, TCP_MAERTS, UDP_STREAM, TCP_SENDFILE), \
             request/response rates and latency (TCP_RR, UDP_RR, TCP_CRR), \
             connection rates (TCP_CC), and netperf 2.7's OMNI test, which chooses \
             among them by its options. Its command line and its output are those of \
             netperf 2.7: global options, then --, then options of the test; piped \
             output has netperf 2.7's lines exactly. With no -H and no netserver on \
             localhost, netperf starts one inside its own process.",
        )
        .version(env!("CARGO_PKG_VERSION"))
}

/// netserver's options as a clap command.
pub fn netserver_command() -> Command {
    optparse::clap::command("netserver", NETSERVER_ABOUT, netserver::cli::OPTIONS)
        .override_usage("netserver [options]")
        .long_about(
            "netserver answers netperf: it listens for control connections (port \
             12865, IPv4 and IPv6), runs its side of each test, and reports its \
             counters. Without -D it detaches. It is meant to be left running: see \
             SECURITY for its limits and authentication.",
        )
        .version(env!("CARGO_PKG_VERSION"))
}

fn roff_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('-', "\\-")
}

/// A man page section listing options, in clap_mangen's style.
fn options_section(title: &str, defs: &[OptDef]) -> String {
    let mut s = format!(".SH \"{title}\"\n");
    for d in defs.iter().filter(|d| !d.hidden) {
        let mut names = Vec::new();
        if let Some(c) = d.short {
            names.push(format!("\\fB\\-{c}\\fR"));
        }
        if let Some(l) = d.long {
            names.push(format!("\\fB\\-\\-{}\\fR", roff_escape(l)));
        }
        let value = match d.arity {
            Arity::None => String::new(),
            Arity::Required => format!(" \\fI{}\\fR", roff_escape(d.value_name)),
            _ => format!(" [\\fI{}\\fR]", roff_escape(d.value_name)),
        };
        let _ = write!(
            s,
            ".TP\n{}{}\n{}\n",
            names.join(", "),
            value,
            roff_escape(d.help)
        );
    }
    s
}

fn section(title: &str, paragraphs: &[&str]) -> String {
    let mut s = format!(".SH \"{title}\"\n");
    for p in paragraphs {
        if let Some(example) = p.strip_prefix("$ ") {
            let _ = write!(s, ".PP\n.nf\n\\fB{}\\fR\n.fi\n", roff_escape(example));
        } else {
            let _ = write!(s, ".PP\n{}\n", roff_escape(p));
        }
    }
    s
}

fn render(cmd: Command, synopsis: &str, extra: &str) -> String {
    let man = clap_mangen::Man::new(cmd)
        .manual("rsnetperf")
        .source(format!("rsnetperf {}", env!("CARGO_PKG_VERSION")));
    let mut out: Vec<u8> = Vec::new();
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    out.extend_from_slice(format!(".SH SYNOPSIS\n{synopsis}\n").as_bytes());
    let _ = man.render_description_section(&mut out);
    let _ = man.render_options_section(&mut out);
    let mut s = String::from_utf8_lossy(&out).into_owned();
    s.push_str(extra);
    let mut tail: Vec<u8> = Vec::new();
    let _ = man.render_version_section(&mut tail);
    s.push_str(&String::from_utf8_lossy(&tail));
    s
}

/// netperf.1
pub fn netperf_man() -> String {
    let mut extra = options_section(
        "TEST OPTIONS (after \\-\\-)",
        netperf::cli::test_opts::OPTIONS,
    );
    let tests: Vec<String> = netperf::cli::TestName::ALL
        .iter()
        .map(|t| format!("{}: {}.", t.name(), t.describe()))
        .collect();
    let mut paragraphs: Vec<&str> = tests.iter().map(String::as_str).collect();
    paragraphs.extend([
        "OMNI: -- -d send|recv|rr (or a number, or parts joined by |), -- -T tcp|udp, -- -c for a connection per transaction (TCP_CRR with -d rr, TCP_CC without a direction). The six named tests take -T and -c too: -t TCP_STREAM -- -T udp runs UDP under TCP_STREAM's banner and table, as in netperf 2.7.",
        "OUTPUT: when stdout is not a terminal, netperf prints netperf 2.7's lines exactly at -v 0, 1 and 2. On a terminal, and at -v 3 and above, it adds its own: UDP loss and where it happened, latency percentiles, each confidence iteration and a confidence summary.",
    ]);
    extra.push_str(&section("TESTS", &paragraphs));
    extra.push_str(&section(
        "EMBEDDED NETSERVER",
        &["When the target is a loopback address (no -H, or -H localhost, 127.0.0.1 or ::1 with the default control port) and nothing listens there, netperf starts a netserver inside its own process, says so on stderr, and runs the test against it. With both -H and -p given, a refused connection is an error."],
    ));
    extra.push_str(&section(
        "IPERF3 SERVERS",
        &["With --iperf3, netperf runs TCP_STREAM, TCP_MAERTS (iperf3's -R) and UDP_STREAM (its -u; -- -m is the datagrams' size, --rate their rate) against an iperf3 server (iperf3 -s, or netserver --iperf3), on port 5201 unless -p names another; --flows N is iperf3's -P N and -l secs its -t. The output is netperf 2.7's lines for the test; the remote figures are those the iperf3 server reports at the end of the test. What an iperf3 server cannot run (the other tests, --warmup, --batch, --io-uring, -Z, and the like) is refused by name before connecting. See doc/user-guide.md, \"netperf against an iperf3 server\"."],
    ));
    extra.push_str(&section(
        "EXAMPLES",
        &[
            "$ netperf -H server -l 10",
            "$ netperf -H server -t UDP_STREAM -- -m 1024",
            "$ netperf -H server -t TCP_RR -v 3 -- -r 64,1024",
            "$ netperf -H server -t OMNI -- -d rr -T udp -o THROUGHPUT,P99_LATENCY",
            "$ netperf -H server -I 99,10 -i 10,3 -l 5",
            "$ netperf -H server -P 0 -v 0 -D -0.2 -l 10 -f m -- -k THROUGHPUT,LOCAL_CONG_CONTROL",
            "$ netperf --iperf3 -H server -t UDP_STREAM -- -m 1400 --rate 500M --flows 4",
        ],
    ));
    extra.push_str(&section(
        "EXIT STATUS",
        &["0 on success (also when -I confidence was not reached); 1 when the test could not run; 255 when no netserver answered (after netperf 2.7's two establish_control lines on stdout); 2 for a command-line error; 1 after -o ? listings, as netperf 2.7."],
    ));
    extra.push_str(&section(
        "SEE ALSO",
        &["netserver(1); doc/user-guide.md; doc/differences.md for what differs from netperf 2.7."],
    ));
    render(
        netperf_command(),
        "\\fBnetperf\\fR [\\fIglobal options\\fR] [\\fB\\-\\-\\fR \\fItest options\\fR]",
        &extra,
    )
}

/// netserver.1
pub fn netserver_man() -> String {
    let mut extra = section(
        "SECURITY",
        &[
            "Data sockets bind to the control connection's address, or to another unicast address of this host that netperf names (-- -H); every data connection must present the test's random token; UDP goes only to the address that presented it, and one other than the control connection's peer must first echo a random challenge. A client may choose a data port of 1024 or above (-- -P ,port); --data-ports narrows that. Nothing a client sends names a file on the server.",
            "Limits (defaults): 16 sessions, 4 per client address, 64 in their handshake; handshake 10 s, idle 60 s, data connections 10 s, test length 300 s; 64 MiB of buffers per session.",
            "With --key-file or -Z, clients must prove they know the key (HMAC-SHA256 challenge-response); the key never crosses the wire and every later control frame is authenticated.",
        ],
    );
    extra.push_str(&section(
        "SIGNALS",
        &["SIGINT and SIGTERM stop netserver within 5 seconds, telling clients it is shutting down. SIGHUP is ignored."],
    ));
    extra.push_str(&section(
        "EXAMPLES",
        &[
            "$ netserver",
            "$ netserver -D -p 12866 -L 192.0.2.10",
            "$ netserver --key-file /etc/netserver.key --data-ports 50000-50100",
        ],
    ));
    extra.push_str(&section(
        "SEE ALSO",
        &["netperf(1); doc/security.md; doc/service.md."],
    ));
    render(
        netserver_command(),
        "\\fBnetserver\\fR [\\fIoptions\\fR]",
        &extra,
    )
}

/// Completion scripts: (file name, contents).
pub fn completions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, make) in [
        ("netperf", netperf_command as fn() -> Command),
        ("netserver", netserver_command),
    ] {
        for (shell, file) in [
            (Shell::Bash, format!("{name}.bash")),
            (Shell::Zsh, format!("_{name}")),
            (Shell::Fish, format!("{name}.fish")),
        ] {
            let mut buf: Vec<u8> = Vec::new();
            clap_complete::generate(shell, &mut make(), name, &mut buf);
            out.push((file, String::from_utf8_lossy(&buf).into_owned()));
        }
    }
    out
}

/// Every generated file: (path relative to doc/, contents).
pub fn files() -> Vec<(String, String)> {
    let mut v = vec![
        ("man/netperf.1".to_string(), netperf_man()),
        ("man/netserver.1".to_string(), netserver_man()),
    ];
    v.extend(
        completions()
            .into_iter()
            .map(|(f, c)| (format!("completions/{f}"), c)),
    );
    v
}
