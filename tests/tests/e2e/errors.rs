//! Every error case: one clear line on stderr, a non-zero exit status,
//! nothing on stdout but what was printed before the failure.

use std::{
    io::{Read, Write},
    net::TcpListener,
    thread,
    time::Duration,
};

use harness::{Netserver, free_port, netperf, netperf_at};
use proto::{Hello, ServerHello, ServerMsg};

fn assert_error(args: &[&str], needle: &str) {
    let out = netperf(args);
    assert!(!out.success(), "{args:?} should fail: {out}");
    let first = out.stderr.lines().next().unwrap_or("");
    assert!(first.starts_with("netperf: "), "{args:?}: {out}");
    assert!(
        first.contains(needle),
        "{args:?}: expected '{needle}' in: {out}"
    );
}

#[test]
fn unknown_test_name() {
    assert_error(&["-t", "TCP_FOO"], "unknown test 'TCP_FOO'");
}

#[test]
fn malformed_numbers() {
    // what netperf 2.7 cannot use either (its getaddrinfo refuses the port),
    // or crashes on (an alignment of 0, a negative message size)
    assert_error(&["-p", "12865x"], "-p:");
    assert_error(&["-a", "x"], "-a: an alignment of 0");
    assert_error(&["--", "-m", "-5"], "-m: '-5' must not be negative");
    // netperf 2.7's int wraps past 2^31; we refuse that
    assert_error(&["--", "-m", "3G"], "-m: '3G' is more than");
}

#[test]
fn unknown_option() {
    assert_error(&["-X"], "unknown option -X");
}

/// netperf 2.7 complains about an unknown option after `--` and runs the
/// test anyway: so do we, with a warning on stderr.
#[test]
fn unknown_test_option_is_a_warning() {
    let ns = Netserver::start(&[]);
    let out = ns
        .netperf(&["-l", "1", "-P", "0", "--", "-Q", "-m", "1K"])
        .ok();
    assert!(
        out.stderr.contains("warning: unknown option -Q after --"),
        "{out}"
    );
    assert_eq!(out.stdout.lines().count(), 1, "{out}");
    assert_eq!(harness::fields(&out.stdout)[2], "1024", "{out}");
}

#[test]
fn refused_port() {
    let port = free_port().to_string();
    assert_error(
        &["-H", "127.0.0.1", "-p", &port, "-l", "1"],
        "Connection refused",
    );
}

#[test]
fn refused_port_ipv6() {
    let l = TcpListener::bind("[::1]:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    drop(l);
    assert_error(&["-H", "::1", "-p", &port, "-l", "1"], "Connection refused");
}

/// A one-shot server on 127.0.0.1 that reads what netperf says first and
/// answers `reply`; netperf is run with `args` after `-H` and `-p`, and
/// must fail with `needle`.
fn against_a_fake_server(reply: Vec<u8>, args: &[&str], needle: &str) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let fake = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 256];
        let _ = s.read(&mut buf);
        s.write_all(&reply).unwrap();
        thread::sleep(Duration::from_millis(200));
    });
    let mut all = vec!["-H", "127.0.0.1", "-p", &port];
    all.extend_from_slice(args);
    assert_error(&all, needle);
    fake.join().unwrap();
}

/// A server speaking another version of the protocol: refused at hello,
/// with both versions named.
#[test]
fn server_of_another_protocol_version() {
    let mut hello = Hello::new("rsnetperf netserver 9.0");
    hello.protocol = 99;
    let msg = ServerMsg::Hello(ServerHello {
        hello,
        challenge: None,
        num_cpus: 2,
        cpu_rate: 100,
    });
    against_a_fake_server(
        msg.encode().unwrap(),
        &["-l", "1"],
        "protocol version mismatch",
    );
}

/// Something else on the port (netperf 2.7's netserver, a web server).
#[test]
fn server_of_another_protocol() {
    against_a_fake_server(
        b"\0\0\0\x10HTTP/1.1 400 Bad".to_vec(),
        &["-l", "1"],
        "control protocol",
    );
}

/// The server refuses a test request it cannot honour; the client says why.
#[test]
fn server_refusal_is_reported() {
    let ns = Netserver::start(&[]);
    let port = ns.port().to_string();
    assert_error(
        &["-H", "127.0.0.1", "-p", &port, "-l", "1", "--", "-P", ",80"],
        "ports below 1024 are only allowed inside the range",
    );
    // and it goes on serving
    netperf_at(&port, &["-l", "1", "-P", "0"]).ok();
}

#[test]
fn help_and_version() {
    // netperf 2.7's one line, which scripts test; ours with --version
    let out = netperf(&["-V"]).ok();
    assert_eq!(out.stdout, "Netperf version 2.7.1\n", "{out}");
    let out = netperf(&["--version"]).ok();
    assert!(out.stdout.contains("control protocol version"), "{out}");
    let out = netperf(&["-h"]).ok();
    assert!(out.stdout.contains("-H name|ip[,fam]"), "{out}");
}
