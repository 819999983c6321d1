//! `--ecn` against a router that marks, bleaches or mangles ECN by
//! nftables: what each receiver counted equals the router's own counters,
//! exactly, each way; the path's verdict is the rule's; TCP sees CE where
//! the router marks it and nowhere else. On loopback: the option's
//! refusals, and `-Y`'s ECN bits on the netserver's sends.

use std::time::Duration;

use harness::{
    bin,
    netns::{A6, Hosts, ROUTED_SERVER, Routed, TO_CLIENT, TO_SERVER, nft, nft_counter},
    run_with_deadline,
};
use serde_json::Value;

/// The test's datagrams (1024 bytes, UDP length 1032), not its hellos.
const DATA: &str = "udp length 1032";

/// The router's rules: `up` on what it forwards toward the server,
/// `down` toward the client, each counted in a counter of that name.
fn rules(r: &Routed, up: &str, down: &str) {
    nft(
        &r.router,
        &format!(
            "table inet npecn {{
               counter up {{ }}
               counter down {{ }}
               chain forward {{
                 type filter hook forward priority 0; policy accept;
                 oifname \"{TO_SERVER}\" {up}
                 oifname \"{TO_CLIENT}\" {down}
               }}
             }}"
        ),
    );
}

fn counter(r: &Routed, name: &str) -> u64 {
    nft_counter(&r.router, "npecn", name)
}

/// netperf in the client's namespace with `--json`, its document.
fn netperf_json(r: &Routed, port: u16, args: &str) -> Value {
    let mut cmd = r.command(&r.client, &bin("netperf"));
    cmd.args(["--json", "-H", ROUTED_SERVER, "-p", &port.to_string()])
        .args(args.split_whitespace());
    let out = run_with_deadline(cmd, Duration::from_secs(60)).ok();
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// A receiver's count of what the router marked: exactly the router's
/// when nothing was lost after it; else at most that and at least that
/// less what was lost (`lost`: the receiving socket's drops, or UDP_RR's
/// answers given up, whose late arrivals the run no longer reads).
fn same_as_router(got: u64, router: u64, lost: u64, what: &str) {
    if lost == 0 {
        assert_eq!(got, router, "{what}");
    } else {
        eprintln!("{what}: {lost} lost after the router: a bound, not the exact count");
        assert!(
            got <= router && got + lost >= router,
            "{what}: {got} against {router}, {lost} lost"
        );
    }
}

/// What a UDP_STREAM's receiving socket dropped.
fn socket_drops(doc: &Value) -> u64 {
    doc["remote"]["udp"]["rcvbuf_drops"].as_u64().unwrap_or(0)
}

/// UDP_RR's transactions given up.
fn given_up(doc: &Value) -> u64 {
    doc["lost_transactions"].as_u64().unwrap_or(0)
}

fn count(doc: &Value, way: &str, cp: &str) -> u64 {
    doc["ecn"][way]["received"][cp]
        .as_u64()
        .unwrap_or_else(|| panic!("no ecn.{way}.received.{cp} in {}", doc["ecn"]))
}

/// 20,000 datagrams, paced well below what the path and the receiver
/// take, into a 4 MB socket buffer, so that nothing is lost after the
/// router counted it on a loaded machine either (`-R 1`: routed, as
/// netperf 2.7's UDP_STREAM is only when asked).
const UDP_STREAM: &str = "-t UDP_STREAM -l -20480000 -- -R 1 -m 1024 -S 4M --rate 80m --ecn ect0";
/// 10,000 transactions of 1024 bytes each way.
const UDP_RR: &str = "-t UDP_RR -l -10000 -- -r 1024,1024 --ecn ect1";

/// A random tenth of the datagrams marked CE each way: each receiver's CE
/// count is the router's, exactly, the rest arrive as sent, and the path
/// passes ECN.
#[test]
fn ce_marks_are_counted_exactly_each_way() {
    let Some(r) = Routed::new("ce_marks_are_counted_exactly_each_way") else {
        return;
    };
    let ns = r.netserver();
    let mark = format!("{DATA} numgen random mod 10 0 counter name");
    rules(
        &r,
        &format!("{mark} \"up\" ip ecn set ce"),
        &format!("{mark} \"down\" ip ecn set ce"),
    );
    let doc = netperf_json(&r, ns.port(), UDP_STREAM);
    let up = counter(&r, "up");
    eprintln!("UDP_STREAM: router marked {up}: {}", doc["ecn"]);
    assert!(up > 1000, "a tenth of 20,000: {up}");
    let lost = socket_drops(&doc);
    let what = format!("{}", doc["ecn"]);
    same_as_router(count(&doc, "up", "ce"), up, lost, &what);
    let all = count(&doc, "up", "ect0") + count(&doc, "up", "ce");
    same_as_router(all, 20_000, lost, &what);
    assert_eq!(count(&doc, "up", "not_ect") + count(&doc, "up", "ect1"), 0);
    assert_eq!(doc["ecn"]["path"], "passes");
    let fraction = doc["ecn"]["ce_fraction"].as_f64().unwrap();
    let ce = count(&doc, "up", "ce");
    assert!(
        (fraction - ce as f64 / all as f64).abs() < 1e-9,
        "{fraction}"
    );
    // by interval: every datagram in one, the CE marks among them
    let intervals = doc["ecn"]["up"]["intervals"].as_array().unwrap();
    let by_interval: u64 = intervals.iter().map(|i| i["ce"].as_u64().unwrap()).sum();
    assert_eq!(by_interval, ce);
    assert!(intervals.len() >= 2, "{intervals:?}");

    // many flows, each counted at its own socket, all together
    let up0 = counter(&r, "up");
    let doc = netperf_json(&r, ns.port(), &format!("{UDP_STREAM} --flows 3"));
    let up = counter(&r, "up") - up0;
    eprintln!(
        "UDP_STREAM --flows 3: router marked {up}: {}",
        doc["ecn"]["received"]
    );
    assert!(up > 1000, "{up}");
    let (lost, what) = (socket_drops(&doc), format!("{}", doc["ecn"]));
    same_as_router(count(&doc, "up", "ce"), up, lost, &what);
    let all = count(&doc, "up", "ect0") + count(&doc, "up", "ce");
    same_as_router(all, 20_000, lost, &what);

    // UDP_RR: the requests up, the answers down, each counted at its end
    let (up0, down0) = (counter(&r, "up"), counter(&r, "down"));
    let doc = netperf_json(&r, ns.port(), UDP_RR);
    let (up, down) = (counter(&r, "up") - up0, counter(&r, "down") - down0);
    eprintln!("UDP_RR: router marked {up} up, {down} down: {}", doc["ecn"]);
    assert!(up > 500 && down > 500, "{up} {down}");
    let (lost, what) = (given_up(&doc), format!("{}", doc["ecn"]));
    assert_eq!(count(&doc, "up", "ce"), up, "{what}");
    assert_eq!(count(&doc, "up", "ect1") + up, 10_000, "{what}");
    same_as_router(count(&doc, "down", "ce"), down, lost, &what);
    let all = count(&doc, "down", "ect1") + count(&doc, "down", "ce");
    same_as_router(all, 10_000, lost, &what);
    assert_eq!(doc["ecn"]["path"], "passes");
    assert_eq!(doc["ecn"]["sent"], "ect1");
}

/// IPv6: the traffic class's ECN bits, marked CE on a random tenth of
/// the datagrams as each host takes them in (A the netserver's, B ours),
/// counted exactly each way by UDP_RR's two ends.
#[test]
fn ipv6_traffic_class_is_counted_exactly() {
    let Some(h) = Hosts::new("ipv6_traffic_class_is_counted_exactly") else {
        return;
    };
    let ns = h.netserver(A6, &[]);
    for host in [&h.a, &h.b] {
        nft(
            host,
            "table inet npecn {
               counter marked { }
               chain input {
                 type filter hook input priority -150; policy accept;
                 meta l4proto udp udp length 1032 numgen random mod 10 0 counter name \"marked\" ip6 ecn set ce
               }
             }",
        );
    }
    let mut cmd = h.command(&h.b, &bin("netperf"));
    cmd.args(["--json", "-H", A6, "-p", &ns.port().to_string()])
        .args(UDP_RR.split_whitespace());
    let out = run_with_deadline(cmd, Duration::from_secs(60)).ok();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    let (up, down) = (
        nft_counter(&h.a, "npecn", "marked"),
        nft_counter(&h.b, "npecn", "marked"),
    );
    eprintln!("IPv6 UDP_RR: marked {up} up, {down} down: {}", doc["ecn"]);
    assert!(up > 500 && down > 500, "{up} {down}");
    let (lost, what) = (given_up(&doc), format!("{}", doc["ecn"]));
    assert_eq!(count(&doc, "up", "ce"), up, "{what}");
    same_as_router(count(&doc, "down", "ce"), down, lost, &what);
    assert_eq!(count(&doc, "up", "ect1") + up, 10_000);
    assert_eq!(doc["ecn"]["path"], "passes");
}

/// A router that clears ECN toward the server bleaches; one that marks
/// every datagram CE toward the client mangles; a clean path passes with
/// no CE.
#[test]
fn bleached_mangled_and_clean_paths() {
    let Some(r) = Routed::new("bleached_mangled_and_clean_paths") else {
        return;
    };
    let ns = r.netserver();
    let doc = netperf_json(&r, ns.port(), UDP_RR);
    assert_eq!(doc["ecn"]["path"], "passes", "{}", doc["ecn"]);
    assert_eq!(doc["ecn"]["received"]["ce"], 0);
    let ect1 = doc["ecn"]["received"]["ect1"].as_u64().unwrap();
    same_as_router(ect1, 20_000, given_up(&doc), &format!("{}", doc["ecn"]));
    rules(
        &r,
        &format!("{DATA} counter name \"up\" ip ecn set not-ect"),
        &format!("{DATA} counter name \"down\" ip ecn set ce"),
    );
    let doc = netperf_json(&r, ns.port(), UDP_RR);
    eprintln!("{}", doc["ecn"]);
    assert_eq!(doc["ecn"]["up"]["path"], "bleached");
    assert_eq!(count(&doc, "up", "not_ect"), counter(&r, "up"));
    assert_eq!(doc["ecn"]["down"]["path"], "mangled");
    same_as_router(
        count(&doc, "down", "ce"),
        counter(&r, "down"),
        given_up(&doc),
        &format!("{}", doc["ecn"]),
    );
    assert_eq!(doc["ecn"]["path"], "mangled");
    // the selectors say the same, and a terminal's line (-v 3)
    let mut cmd = r.command(&r.client, &bin("netperf"));
    cmd.args(["-v", "3", "-H", ROUTED_SERVER, "-p", &ns.port().to_string()])
        .args(UDP_RR.split_whitespace())
        .args(["-k", "ECN_PATH,ECN_CE_FRACTION"]);
    let out = run_with_deadline(cmd, Duration::from_secs(60)).ok();
    assert!(out.stdout.contains("ECN_PATH=mangled"), "{out}");
    assert!(out.stdout.contains("ECN_CE_FRACTION=0.500000"), "{out}");
}

/// TCP negotiates ECN where the connecting host's net.ipv4.tcp_ecn asks
/// for it; CE marked by the router on the data comes back to the sender
/// as delivered CE, and a clean path has none. Where it is not asked, the
/// run says so and names the sysctl.
#[test]
fn tcp_sees_ce_where_the_router_marks() {
    let Some(r) = Routed::new("tcp_sees_ce_where_the_router_marks") else {
        return;
    };
    let ns = r.netserver();
    let port = ns.port();
    let sysctl = |v: &str| {
        harness::netns::sh(&[
            "ip",
            "netns",
            "exec",
            &r.client,
            "sysctl",
            "-q",
            "-w",
            &format!("net.ipv4.tcp_ecn={v}"),
        ]);
    };
    sysctl("1");
    let tcp = |test: &str| {
        let doc = netperf_json(&r, port, &format!("-t {test} -l 2 -- --ecn ect0"));
        assert_eq!(doc["ecn"]["path"], Value::Null, "{}", doc["ecn"]);
        eprintln!("{test}: {}", doc["ecn"]);
        doc["ecn"]["tcp"].clone()
    };
    for test in ["TCP_STREAM", "TCP_MAERTS"] {
        let t = tcp(test);
        assert_eq!(t["negotiated"], true, "{t}");
        assert!(t["delivered"].as_u64().unwrap() > 1000, "{t}");
        assert_eq!(t["delivered_ce"], 0, "a clean path: {t}");
    }
    // a tenth of the ECN-capable data packets marked, each way
    let mark = "tcp dport != 0 ip ecn ect0 numgen random mod 10 0 counter name";
    rules(
        &r,
        &format!("{mark} \"up\" ip ecn set ce"),
        &format!("{mark} \"down\" ip ecn set ce"),
    );
    for (test, way) in [("TCP_STREAM", "up"), ("TCP_MAERTS", "down")] {
        let before = counter(&r, way);
        let t = tcp(test);
        let marked = counter(&r, way) - before;
        assert!(marked > 100, "{test}: the router marked {marked}");
        assert_eq!(t["negotiated"], true, "{t}");
        assert!(t["delivered_ce"].as_u64().unwrap() > 0, "{test}: {t}");
    }
    // many flows, and the flows of a load beside UDP_RR
    let before = counter(&r, "up");
    let doc = netperf_json(&r, port, "-t TCP_STREAM -l 2 -- --ecn ect0 --flows 3");
    let t = &doc["ecn"]["tcp"];
    assert!(counter(&r, "up") > before, "the router marked none");
    assert_eq!(t["negotiated"], true, "{t}");
    assert!(t["delivered_ce"].as_u64().unwrap() > 0, "{t}");
    let doc = netperf_json(&r, port, "-t UDP_RR -l 2 -- --ecn ect0 --under-load 2,both");
    eprintln!("UDP_RR under load: {}", doc["ecn"]);
    for way in ["load_up", "load_down"] {
        let l = &doc["ecn"][way];
        assert_eq!(l["negotiated"], true, "{way}: {}", doc["ecn"]);
        assert!(l["delivered_ce"].as_u64().unwrap() > 0, "{way}: {l}");
    }
    // not asked for: said, with the sysctl
    sysctl("0");
    let mut cmd = r.command(&r.client, &bin("netperf"));
    cmd.args(["-H", ROUTED_SERVER, "-p", &port.to_string()])
        .args(["-t", "TCP_STREAM", "-l", "1", "--", "--ecn", "ect0"]);
    let out = run_with_deadline(cmd, Duration::from_secs(60)).ok();
    assert!(
        out.stderr
            .contains("TCP did not negotiate ECN: net.ipv4.tcp_ecn is 0 here"),
        "{out}"
    );
}

/// `--ecn`'s refusals name the option.
#[test]
fn refusals_name_the_option() {
    let ns = harness::Netserver::start(&[]);
    let port = ns.port().to_string();
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(bin("netperf"));
        cmd.args(["-H", "127.0.0.1", "-p", &port, "-l", "1"])
            .args(args);
        run_with_deadline(cmd, Duration::from_secs(30))
    };
    for (args, why) in [
        (
            &["-t", "TCP_RR", "--", "--ecn", "ect0"][..],
            "--ecn: UDP_STREAM, UDP_RR, TCP_STREAM and TCP_MAERTS measure it",
        ),
        (
            &["-t", "UDP_STREAM", "--", "--ecn", "ce"][..],
            "--ecn: 'ce': a sender marks with ect0 or ect1",
        ),
        (
            &["-t", "UDP_RR", "--", "--ecn", "ect0", "--flows", "2"][..],
            "--ecn: UDP_RR's codepoints are counted on one flow",
        ),
        (
            &["-t", "UDP_STREAM", "--", "--ecn", "ect0", "--io-uring"][..],
            "--ecn: io_uring's calls do not read",
        ),
        (
            &["-t", "TCP_STREAM", "--", "--ecn", "ect1"][..],
            "--ecn ect1: TCP marks ECT(1) only with AccECN",
        ),
    ] {
        let out = run(args);
        assert!(!out.status.success(), "{args:?}: {out}");
        assert!(out.stderr.contains(why), "{args:?}: {out}");
    }
}
