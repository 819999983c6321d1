//! Every spelling netperf 2.7 users write, and every error we promise.

use super::*;

use super::test_plan as plan;
use optparse::value::AddrFamily;
use proto::TestKind;

fn err(words: &[&str]) -> String {
    let v: Vec<String> = words.iter().map(|s| s.to_string()).collect();
    match parse(&v) {
        Err(e) => e.to_string(),
        Ok(other) => panic!("{words:?} parsed: {other:?}"),
    }
}

#[test]
fn defaults_are_netperfs() {
    let p = plan(&[]);
    assert_eq!(p.test, TestKind::TcpStream);
    assert_eq!(p.length, Length::Seconds(10));
    assert_eq!(p.port, 12865);
    assert!(p.headers);
    assert_eq!(p.verbosity, 1);
    assert_eq!(p.units(), Units::Bits('m'));
    assert_eq!(p.host_name(), "localhost");
    assert_eq!(plan(&["-6"]).host_name(), "::1");
    assert_eq!(plan(&["-t", "TCP_RR"]).units(), Units::Transactions);
}

#[test]
fn glued_values_and_repeats() {
    let p = plan(&["-l1", "-P0", "-v2", "-tTCP_MAERTS", "-l", "3"]);
    assert_eq!(p.length, Length::Seconds(3));
    assert!(!p.headers);
    assert_eq!(p.verbosity, 2);
    assert_eq!(p.test, TestKind::TcpMaerts);
}

#[test]
fn test_names_are_case_insensitive() {
    assert_eq!(plan(&["-t", "tcp_rr"]).test, TestKind::TcpRr);
    assert_eq!(plan(&["-t", "Udp_Stream"]).test, TestKind::UdpStream);
}

#[test]
fn negative_length_is_a_count() {
    assert_eq!(plan(&["-l", "-10000000"]).length, Length::Count(10_000_000));
    assert_eq!(plan(&["-l", "-1M"]).length, Length::Count(1 << 20));
}

#[test]
fn length_in_seconds_may_say_so() {
    // netperf 2.7 ignores the unit letters; so do we, for seconds only.
    for l in ["30s", "30sec", "30secs", "30seconds", " 30s"] {
        assert_eq!(plan(&["-l", l]).length, Length::Seconds(30), "{l}");
    }
    // a word is 0, as netperf 2.7 reads it: the test runs until stopped
    let p = plan(&["-l", "s"]);
    assert_eq!(p.length, Length::Seconds(0));
    assert!(p.warnings[0].contains("-l 's'") && p.warnings[0].contains("until it is interrupted"));
    assert!(plan(&["-l", "30s"]).warnings.is_empty());
    // netperf's convert() finds the 'm' of "min": a million seconds each.
    assert_eq!(plan(&["-l", "30min"]).length, Length::Seconds(30_000_000));
}

/// `--iperf3` (and `--dialect iperf3`): iperf3's port unless `-p` names
/// one, wherever it stands; our authentication is not iperf3's.
#[test]
fn iperf3_takes_its_own_port() {
    let p = plan(&["--iperf3", "-H", "h"]);
    assert_eq!(p.dialect, DialectChoice::Iperf3);
    assert_eq!(p.port, 5201);
    assert_eq!(plan(&["--dialect", "iperf3"]).port, 5201);
    assert_eq!(plan(&["-p", "9000", "--iperf3"]).port, 9000);
    assert_eq!(plan(&["--iperf3", "-p", "12865"]).port, 12865);
    // -p naming only our local port leaves iperf3's
    let p = plan(&["--iperf3", "-p", ",6000"]);
    assert_eq!((p.port, p.local_port), (5201, Some(6000)));
    assert!(err(&["--iperf3", "-Z", "x"]).contains("RSA"));
    assert!(err(&["--dialect", "iperf2"]).contains("iperf3"));
}

#[test]
fn host_and_port_forms() {
    let p = plan(&["-H", "example,6", "-p", "5000,6000"]);
    assert_eq!(p.host.as_deref(), Some("example"));
    assert_eq!(p.family, AddrFamily::V6);
    assert_eq!(p.port, 5000);
    assert_eq!(p.local_port, Some(6000));
    let p = plan(&["-H", "h", "-p", "5000"]);
    assert_eq!(p.family, AddrFamily::Unspec);
    assert_eq!(p.local_port, None);
    let p = plan(&["-p", ",6000"]);
    assert_eq!(p.port, 12865);
    assert_eq!(p.local_port, Some(6000));
    assert_eq!(plan(&["-4"]).family, AddrFamily::V4);
}

#[test]
fn test_specific_sizes() {
    let p = plan(&["--", "-m", "64K"]);
    assert_eq!(p.local.send_size, Some(65536));
    assert_eq!(p.remote.send_size, None);
    let p = plan(&["--", "-m", ",1024", "-M", "2048"]);
    assert_eq!(p.local.send_size, None);
    assert_eq!(p.remote.send_size, Some(1024));
    assert_eq!(p.remote.recv_size, Some(2048));
    assert_eq!(p.local.recv_size, None);
    let p = plan(&["--", "-s", ",128K", "-S", "64K,"]);
    assert_eq!((p.local.send_buf, p.local.recv_buf), (None, Some(131072)));
    assert_eq!((p.remote.send_buf, p.remote.recv_buf), (Some(65536), None));
    let p = plan(&["--", "-s", "64K"]);
    assert_eq!(
        (p.local.send_buf, p.local.recv_buf),
        (Some(65536), Some(65536))
    );
    let p = plan(&["--", "-r", "1,1"]);
    assert_eq!((p.request_size, p.response_size), (1, 1));
    let p = plan(&["--", "-r", "64"]);
    assert_eq!((p.request_size, p.response_size), (64, 64));
    let p = plan(&["--", "-r", "64,1024", "-D"]);
    assert_eq!((p.request_size, p.response_size), (64, 1024));
    assert!(p.local.nodelay && p.remote.nodelay);
    let p = plan(&["--", "-m1024"]);
    assert_eq!(p.local.send_size, Some(1024));
}

#[test]
fn cpu_flags_take_an_optional_rate() {
    let p = plan(&["-c", "-C"]);
    assert!(p.local_cpu && p.remote_cpu);
    let p = plan(&["-c", "100", "-C", "200", "-l", "1"]);
    assert!(p.local_cpu && p.remote_cpu);
    assert_eq!(p.length, Length::Seconds(1));
    let p = plan(&["-cC"]);
    assert!(p.local_cpu && p.remote_cpu);
}

#[test]
fn confidence_rules() {
    let c = plan(&["-I", "99,10"]).confidence.unwrap();
    assert_eq!((c.level, c.width), (99.0, 0.10));
    assert_eq!((c.max_iterations, c.min_iterations), (10, 3));
    let c = plan(&["-I", "95"]).confidence.unwrap();
    assert_eq!((c.level, c.width), (95.0, 0.05));
    let c = plan(&["-i", "10,3"]).confidence.unwrap();
    assert_eq!(
        (c.level, c.width, c.max_iterations, c.min_iterations),
        (99.0, 0.05, 10, 3)
    );
    let c = plan(&["-i", "5"]).confidence.unwrap();
    assert_eq!((c.max_iterations, c.min_iterations), (5, 5));
    let c = plan(&["-i", "2,5"]).confidence.unwrap();
    assert_eq!((c.max_iterations, c.min_iterations), (5, 5));
    let c = plan(&["-i", "50,1"]).confidence.unwrap();
    assert_eq!((c.max_iterations, c.min_iterations), (30, 3));
    let c = plan(&["-I", "99.9,2", "-i", "30,10", "-r"])
        .confidence
        .unwrap();
    assert_eq!(
        (c.level, c.max_iterations, c.min_iterations),
        (99.9, 30, 10)
    );
    assert!(c.result_only);
    assert!(plan(&[]).confidence.is_none());
}

#[test]
fn selectors() {
    let p = plan(&["--", "-k", "THROUGHPUT,LOCAL_CONG_CONTROL"]);
    let s = p.selection.unwrap();
    assert_eq!(s.style, SelectorStyle::KeyVal);
    assert_eq!(s.spec.as_deref(), Some("THROUGHPUT,LOCAL_CONG_CONTROL"));
    let p = plan(&["--", "-o", "-m", "1K"]);
    assert_eq!(p.selection.unwrap().spec, None);
    assert_eq!(p.local.send_size, Some(1024));
    let v: Vec<String> = ["--", "-O", "?"].iter().map(|s| s.to_string()).collect();
    assert!(matches!(
        parse(&v),
        Ok(Invocation::ListSelectors {
            one_line: false,
            ours: false
        })
    ));
}

#[test]
fn stray_words_are_ignored() {
    let p = plan(&["foo", "-l", "2", "--", "bar", "-m", "512"]);
    assert_eq!(p.length, Length::Seconds(2));
    assert_eq!(p.local.send_size, Some(512));
}

#[test]
fn flent_command_line() {
    let p = plan(&[
        "-P",
        "0",
        "-v",
        "0",
        "-D",
        "-0.2",
        "-4",
        "-H",
        "127.0.0.1",
        "-t",
        "TCP_STREAM",
        "-l",
        "3",
        "-f",
        "m",
        "--",
        "-k",
        "THROUGHPUT,LOCAL_CONG_CONTROL,REMOTE_CONG_CONTROL",
    ]);
    assert_eq!(p.interim, Some((0.2, true)));
    assert_eq!(p.units(), Units::Bits('m'));
    assert!(!p.headers);
    assert_eq!(p.verbosity, 0);
}

#[test]
fn units() {
    assert_eq!(plan(&["-f", "K"]).units(), Units::Bytes('K'));
    assert_eq!(plan(&["-f", "g"]).units(), Units::Bits('g'));
    assert_eq!(plan(&["-f", "Mbits"]).units(), Units::Bytes('M'));
    // 'x' makes no sense for a stream test: netperf resets it to 'm'
    assert_eq!(plan(&["-f", "x"]).units(), Units::Bits('m'));
    assert_eq!(plan(&["-t", "TCP_RR", "-f", "m"]).units(), Units::Bits('m'));
}

#[test]
fn tos_values() {
    let p = plan(&["-Y", "0x10,32"]);
    assert_eq!((p.local.tos, p.remote.tos), (Some(0x10), Some(32)));
    // netperf 2.7 leaves a TOS it cannot read unset; we say so, once
    let p = plan(&["-Y", "0x1ff"]);
    assert_eq!((p.local.tos, p.remote.tos), (None, None));
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
}

#[test]
fn errors_name_the_option() {
    assert!(err(&["-t", "FOO"]).contains("unknown test 'FOO'"));
    assert!(err(&["-l", "4G"]).starts_with("-l: '4G'"));
    assert!(err(&["-p", "99999x"]).starts_with("-p:"));
    assert!(err(&["-x"]).contains("-x"));
    assert!(err(&["-l"]).contains("needs a value"));
    assert!(err(&["--", "-m", "-5"]).starts_with("-m:"));
    assert!(err(&["--", "-r", "-1,1"]).starts_with("-r:"));
    assert!(err(&["-I", "100,10"]).contains("between 50 and 99.9"));
    assert!(err(&["-N"]).starts_with("-N"));
    assert_eq!(
        plan(&["-Z", "s3cret"]).auth,
        Some(AuthSource::Passphrase("s3cret".into()))
    );
    assert!(err(&["-a", "none"]).starts_with("-a: an alignment of 0"));
    assert!(err(&["-D", "1e300"]).starts_with("-D: "));
    assert!(err(&["-D", "0"]).starts_with("-D: "));
}

/// Where netperf 2.7 reads a word as 0 (or the leading number of it), we
/// read it so too, with its effect, and say what it was taken as.
#[test]
fn numbers_read_as_netperf_2_7_reads_them() {
    let p = plan(&["-P", "no", "-v", "tcp", "-T", "tcp", "-s", "", "-i", "x,y"]);
    assert!(!p.headers);
    assert_eq!(p.verbosity, 0);
    assert_eq!((p.local.cpu_bind, p.remote.cpu_bind), (Some(0), Some(0)));
    assert_eq!(p.wait_secs, 0);
    let c = p.confidence.unwrap();
    assert_eq!((c.max_iterations, c.min_iterations), (3, 3));
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("-P 'no'") && w.contains("taken as 0"))
    );
    assert!(p.warnings.iter().any(|w| w.contains("-T 'tcp'")));
    // a CPU this host does not have: left unbound
    let p = plan(&["-T", "100000,1"]);
    assert_eq!((p.local.cpu_bind, p.remote.cpu_bind), (None, Some(1)));
    // trailing text is ignored, and said so
    let p = plan(&["--", "-m", "12abc", "-s", "64KB"]);
    assert_eq!(
        (p.local.send_size, p.local.send_buf),
        (Some(12), Some(65_536))
    );
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
    // a size of 0, or a word, is the default size
    assert_eq!(plan(&["--", "-m", "tcp"]).local.send_size, None);
    // buffers: 0 is set (the kernel's least), a negative is not
    let p = plan(&["--", "-s", "word,-1"]);
    assert_eq!((p.local.send_buf, p.local.recv_buf), (Some(0), None));
    assert_eq!(plan(&["-W", "0"]).local.send_width, None);
    assert_eq!(plan(&["-y", "x"]).local.priority, Some(0));
    assert_eq!(plan(&["-y", "-1"]).local.priority, None);
    // an unknown family word, and -f letter
    let p = plan(&["-H", "h,ipx", "-f", "q"]);
    assert_eq!(p.family, AddrFamily::Unspec);
    assert_eq!(p.units, Some(Units::Bytes('K')));
    assert_eq!(p.warnings.len(), 2);
    assert_eq!(plan(&["-f", "u"]).units, Some(Units::Usec));
    // a width of 0 or a word: 5%
    assert_eq!(plan(&["-I", "99,x"]).confidence.unwrap().width, 0.05);
    // ports: wrapped past 65535, as glibc does
    assert_eq!(plan(&["-p", "89535"]).port, 23999);
    // the classic grammar: -m is one size, OMNI's options are -4
    let p = plan(&[
        "-t",
        "TCP_SENDFILE",
        "--",
        "-m",
        "1,64K",
        "-G",
        "1000",
        "-T",
        "udp",
        "-z",
    ]);
    assert_eq!(p.local.send_size, Some(1024));
    assert_eq!(p.local_only.mss, None);
    assert_eq!(p.data_family, AddrFamily::V4);
    // what -m was taken as, and -G ignored: -T and -z are said nothing of
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
}

#[test]
fn rr_options() {
    let p = plan(&["-t", "UDP_RR", "--", "-e", "0.02", "--spin", "--no-latency"]);
    assert_eq!(p.recv_timeout, Some(std::time::Duration::from_millis(20)));
    assert!(p.spin && !p.latency);
    let p = plan(&["-t", "UDP_RR", "--", "-e", "2"]);
    assert_eq!(p.recv_timeout, Some(std::time::Duration::from_secs(2)));
    // 0, or a word, is no timeout, as in netperf 2.7
    assert_eq!(plan(&["--", "-e", "0"]).recv_timeout, None);
    assert_eq!(plan(&["--", "-e", "never"]).recv_timeout, None);
    assert!(err(&["--", "-e", "-5"]).starts_with("-e:"));
    // 0,0: the kernel picks each connection's port
    let p = plan(&["-t", "TCP_CRR", "--", "-p", "any"]);
    assert_eq!(p.port_range, Some((0, 0)));
    let p = plan(&["-t", "TCP_CRR", "--", "-p", "20000,30000"]);
    assert_eq!(p.port_range, Some((20000, 30000)));
    let p = plan(&["-t", "TCP_RR", "--", "-b", "4"]);
    assert_eq!(p.burst, 4);
    let p = plan(&["-t", "UDP_STREAM", "--", "--rate", "100m"]);
    assert_eq!(p.rate_bps, Some(100_000_000));
}

/// Every option of both tables reaches a handler: parsing it (with a value
/// where it takes one) never ends in the "has no handler" error that the
/// dispatch's catch-all returns instead of ignoring an option.
#[test]
fn every_option_in_the_tables_has_a_handler() {
    fn spelled(d: &optparse::OptDef) -> String {
        match (d.short, d.long) {
            (Some(c), _) => format!("-{c}"),
            (None, Some(l)) => format!("--{l}"),
            (None, None) => panic!("option {} has no spelling", d.id),
        }
    }
    fn with_values(d: &optparse::OptDef) -> Vec<Vec<String>> {
        let w = spelled(d);
        match d.arity {
            optparse::Arity::None => vec![vec![w]],
            _ => ["1", "1,1", "x"]
                .iter()
                .map(|v| vec![w.clone(), v.to_string()])
                .collect(),
        }
    }
    let check = |words: Vec<String>| {
        if let Err(e) = parse(&words) {
            assert!(!e.to_string().contains("has no handler"), "{words:?}: {e}");
        }
    };
    for d in global::OPTIONS {
        for w in with_values(d) {
            check(w);
        }
    }
    for t in TestName::ALL {
        for d in test_opts::OPTIONS {
            for w in with_values(d) {
                let mut words: Vec<String> = vec!["-t".into(), t.name().into(), "--".into()];
                words.extend(w);
                check(words);
            }
        }
    }
}

#[test]
fn rates() {
    assert_eq!(Units::Bits('m').rate(125_000_000.0, 1.0), 1000.0);
    assert_eq!(Units::Bits('g').rate(125_000_000.0, 1.0), 1.0);
    assert_eq!(Units::Bits('b').rate(1.0, 1.0), 8.0);
    assert_eq!(Units::Bytes('K').rate(2048.0, 2.0), 1.0);
    assert_eq!(Units::Bytes('M').rate(1048576.0, 1.0), 1.0);
    assert_eq!(Units::Transactions.rate(500.0, 0.5), 1000.0);
    assert_eq!(Units::Bits('m').rate(1.0, 0.0), 0.0);
}

#[test]
fn labels() {
    assert_eq!(Units::Bits('m').label(), "10^6bits");
    assert_eq!(Units::Bytes('G').label(), "GBytes");
    assert_eq!(Units::Transactions.label(), "Trans");
}

/// The load's plan is what its own command line would parse to.
#[test]
fn a_load_is_the_plan_of_its_command_line() {
    let plan = super::test_plan(&["-t", "TCP_RR", "--", "-K", "bbr,cubic"]);
    let span = client::under_load::Span {
        before: 2,
        during: 5,
        after: 1,
    };
    let peer = "[::1]:12865".parse().unwrap();
    for (window, test, words) in [
        (
            true,
            TestName::TcpStream,
            "-t TCP_STREAM -l 5 -D 0.1 -- --flows 3 --warmup 2 --cooldown 1",
        ),
        (
            false,
            TestName::TcpMaerts,
            "-t TCP_MAERTS -l 8 -D 0.1 -- --flows 3",
        ),
    ] {
        let lp = client::under_load::load_plan(&plan, (peer, window), test, 3, span, Some(0.1));
        let line = format!("-H ::1 -p 12865 -P 0 {words} -K bbr,cubic");
        let mut parsed = super::test_plan(&line.split(' ').collect::<Vec<_>>());
        parsed.command_line.clone_from(&lp.command_line);
        assert_eq!(format!("{lp:?}"), format!("{parsed:?}"));
    }
}
