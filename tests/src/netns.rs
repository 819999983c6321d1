//! Two test hosts in network namespaces joined by a veth pair, for tests
//! that hold our figures against the kernel's own counters.
//!
//! Host A (the server side) is 198.18.0.1 and 2001:2::1; host B (the client
//! side) 198.18.0.2 and 2001:2::2. Names carry the test process's pid and a
//! counter, so tests can run in parallel; everything is deleted on drop,
//! even when the test fails.
//!
//! These tests need root, `ip` and `nft`. When they cannot run they say so
//! loudly and skip, unless `NETPERF_REQUIRE_NETNS=1`, when they fail.

use std::{
    path::Path,
    process::{Command, Output, Stdio},
    sync::atomic::{AtomicU32, Ordering},
};

static NEXT: AtomicU32 = AtomicU32::new(0);

pub const A4: &str = "198.18.0.1";
pub const B4: &str = "198.18.0.2";
pub const A6: &str = "2001:2::1";
pub const B6: &str = "2001:2::2";

/// The pair of hosts.
#[derive(Debug)]
pub struct Hosts {
    pub a: String,
    pub b: String,
    /// veth interface in A and in B.
    pub dev_a: String,
    pub dev_b: String,
}

fn have(tool: &str) -> bool {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(tool).exists())
}

fn why_not() -> Option<String> {
    for tool in ["ip", "nft", "tc"] {
        if !have(tool) {
            return Some(format!(
                "'{tool}' is not installed (apt-get install iproute2 nftables)"
            ));
        }
    }
    static TRIED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    TRIED.get_or_init(try_a_namespace).clone()
}

/// Whether this process may make a network namespace with a veth pair in
/// it (root without CAP_SYS_ADMIN and CAP_NET_ADMIN, a normal user, a
/// container without them may not), found by trying: why not, if not.
fn try_a_namespace() -> Option<String> {
    let ns = format!("npprobe{}", std::process::id());
    let run = |args: &[&str]| {
        Command::new(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{args:?}: {e}"))
            .and_then(|o| {
                if o.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "`{}` failed: {}",
                        args.join(" "),
                        String::from_utf8_lossy(&o.stderr).trim()
                    ))
                }
            })
    };
    let made = run(&["ip", "netns", "add", &ns]).and_then(|()| {
        run(&[
            "ip", "-n", &ns, "link", "add", "npprobea", "type", "veth", "peer", "name", "npprobeb",
        ])
    });
    let _ = run(&["ip", "netns", "del", &ns]);
    made.err()
}

/// Run a command; panic with its output if it fails.
pub fn sh(args: &[&str]) -> Output {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether namespace tests can run here; if not, say so loudly (and fail
/// under `NETPERF_REQUIRE_NETNS=1`).
fn may_run(test: &str) -> bool {
    let Some(reason) = why_not() else {
        return true;
    };
    if std::env::var("NETPERF_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("network-namespace test {test} cannot run: {reason} (NETPERF_REQUIRE_NETNS=1)");
    }
    eprintln!("!!! SKIPPED network-namespace test {test}: {reason}");
    eprintln!("!!! set NETPERF_REQUIRE_NETNS=1 to make this a failure");
    false
}

/// A command that runs `program` inside namespace `ns`.
fn in_namespace(ns: &str, program: &Path) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(program);
    c
}

/// A name tag unique to this process and call.
fn tag() -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}{}", std::process::id() % 100_000, n)
}

/// Several hosts on one switch: a bridge in its own namespace, each host
/// in another, at 198.18.0.(11 + i)/24. Deleted on drop.
#[derive(Debug)]
pub struct Mesh {
    pub hosts: Vec<String>,
    pub addrs: Vec<String>,
    switch: String,
}

impl Mesh {
    pub fn new(test: &str, n: usize) -> Option<Mesh> {
        if !may_run(test) {
            return None;
        }
        let t = tag();
        let mut m = Mesh {
            hosts: Vec::new(),
            addrs: Vec::new(),
            switch: format!("npS{t}"),
        };
        sh(&["ip", "netns", "add", &m.switch]);
        let sw = |args: &[&str]| {
            let mut full = vec!["ip", "-n", m.switch.as_str()];
            full.extend_from_slice(args);
            sh(&full);
        };
        sw(&["link", "add", "br0", "type", "bridge"]);
        sw(&["link", "set", "br0", "up"]);
        for i in 0..n {
            let host = format!("npH{t}x{i}");
            let addr = format!("198.18.0.{}", 11 + i);
            sh(&["ip", "netns", "add", &host]);
            m.hosts.push(host.clone());
            let (dev, port) = (format!("h{i}"), format!("p{i}"));
            sh(&[
                "ip", "-n", &m.switch, "link", "add", &port, "type", "veth", "peer", "name", &dev,
                "netns", &host,
            ]);
            sw(&["link", "set", &port, "master", "br0"]);
            sw(&["link", "set", &port, "up"]);
            sh(&["ip", "-n", &host, "link", "set", "lo", "up"]);
            sh(&[
                "ip",
                "-n",
                &host,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                &dev,
            ]);
            sh(&["ip", "-n", &host, "link", "set", &dev, "up"]);
            m.addrs.push(addr);
        }
        Some(m)
    }

    /// A command that runs `program` inside host `i`.
    pub fn command(&self, i: usize, program: &Path) -> Command {
        in_namespace(&self.hosts[i], program)
    }

    /// `netserver --fleet --key-file KEY` on host `i`'s address, port
    /// 12865, with `extra` options.
    pub fn fleet_netserver(&self, i: usize, key: &Path, extra: &[&str]) -> crate::Netserver {
        let mut c = self.command(i, &crate::bin("netserver"));
        c.args([
            "-D",
            "-p",
            "12865",
            "-L",
            &self.addrs[i],
            "--fleet",
            "--key-file",
        ])
        .arg(key)
        .args(extra);
        crate::Netserver::spawn(c)
    }

    /// Host `i`'s port a token bucket each way: `out` Mbit/s from it (its
    /// own interface's egress), `into` Mbit/s to it (the switch port's).
    pub fn shape(&self, i: usize, out: u32, into: u32) {
        for (ns, dev, mbit) in [
            (&self.hosts[i], format!("h{i}"), out),
            (&self.switch, format!("p{i}"), into),
        ] {
            sh(&[
                "ip",
                "netns",
                "exec",
                ns,
                "tc",
                "qdisc",
                "replace",
                "dev",
                &dev,
                "root",
                "tbf",
                "rate",
                &format!("{mbit}mbit"),
                "burst",
                "64kb",
                "limit",
                "250000",
            ]);
        }
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        delete_namespaces(self.hosts.iter().chain(std::iter::once(&self.switch)));
    }
}

/// Best effort, quietly: these namespaces are gone.
fn delete_namespaces<'a>(names: impl Iterator<Item = &'a String>) {
    for ns in names {
        let _ = Command::new("ip")
            .args(["netns", "del", ns])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Hosts {
    /// Make the two hosts, or explain (loudly) why not. `None` means skip.
    pub fn new(test: &str) -> Option<Hosts> {
        if !may_run(test) {
            return None;
        }
        let tag = tag();
        let h = Hosts {
            a: format!("npA{tag}"),
            b: format!("npB{tag}"),
            dev_a: format!("va{tag}"),
            dev_b: format!("vb{tag}"),
        };
        // From here on Drop cleans up whatever was made.
        sh(&["ip", "netns", "add", &h.a]);
        sh(&["ip", "netns", "add", &h.b]);
        sh(&[
            "ip", "link", "add", &h.dev_a, "netns", &h.a, "type", "veth", "peer", "name", &h.dev_b,
            "netns", &h.b,
        ]);
        for (ns, dev, v4, v6) in [(&h.a, &h.dev_a, A4, A6), (&h.b, &h.dev_b, B4, B6)] {
            h.exec(ns, &["ip", "link", "set", "lo", "up"]);
            h.exec(ns, &["ip", "addr", "add", &format!("{v4}/24"), "dev", dev]);
            h.exec(
                ns,
                &[
                    "ip",
                    "-6",
                    "addr",
                    "add",
                    &format!("{v6}/64"),
                    "dev",
                    dev,
                    "nodad",
                ],
            );
            h.exec(ns, &["ip", "link", "set", dev, "up"]);
        }
        Some(h)
    }

    /// Run a command inside namespace `ns`; panic if it fails.
    pub fn exec(&self, ns: &str, args: &[&str]) -> Output {
        let mut full = vec!["ip", "netns", "exec", ns];
        full.extend_from_slice(args);
        sh(&full)
    }

    /// A command that runs `program` inside `ns`.
    pub fn command(&self, ns: &str, program: &Path) -> Command {
        in_namespace(ns, program)
    }

    /// `netserver -D -p 0 -L addr` and `extra`, in host A.
    pub fn netserver(&self, addr: &str, extra: &[&str]) -> crate::Netserver {
        let mut cmd = self.command(&self.a, &crate::bin("netserver"));
        cmd.args(["-D", "-p", "0", "-L", addr]).args(extra);
        crate::Netserver::spawn(cmd)
    }

    /// A UDP counter inside `ns`: of the `Udp:` line of /proc/net/snmp for
    /// IPv4, of `Udp6<name>` in /proc/net/snmp6 for IPv6.
    pub fn udp_counter(&self, ns: &str, name: &str, ipv6: bool) -> u64 {
        if ipv6 {
            let text =
                String::from_utf8(self.exec(ns, &["cat", "/proc/net/snmp6"]).stdout).unwrap();
            let key = format!("Udp6{name}");
            return text
                .lines()
                .find_map(|l| {
                    let mut w = l.split_whitespace();
                    (w.next()? == key).then(|| w.next()?.parse().ok())?
                })
                .unwrap_or_else(|| panic!("no {key} in /proc/net/snmp6"));
        }
        let text = String::from_utf8(self.exec(ns, &["cat", "/proc/net/snmp"]).stdout).unwrap();
        let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
        let header = lines.next().unwrap();
        let values = lines.next().unwrap();
        let i = header.split_whitespace().position(|h| h == name).unwrap();
        values.split_whitespace().nth(i).unwrap().parse().unwrap()
    }

    /// Load an nftables ruleset into `ns`.
    pub fn nft(&self, ns: &str, ruleset: &str) {
        nft(ns, ruleset);
    }

    /// The packet count of the named nftables counter in `ns`.
    pub fn nft_counter(&self, ns: &str, table: &str, name: &str) -> u64 {
        nft_counter(ns, table, name)
    }
}

/// Load an nftables ruleset into `ns`.
pub fn nft(ns: &str, ruleset: &str) {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("nft");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(ruleset.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "nft rejected:\n{ruleset}");
}

/// The packet count of the named nftables counter (of an `inet` table) in
/// `ns`.
pub fn nft_counter(ns: &str, table: &str, name: &str) -> u64 {
    let out = sh(&[
        "ip", "netns", "exec", ns, "nft", "list", "counter", "inet", table, name,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let after = text
        .split("packets ")
        .nth(1)
        .unwrap_or_else(|| panic!("no packet count in {text}"));
    after.split_whitespace().next().unwrap().parse().unwrap()
}

impl Drop for Hosts {
    fn drop(&mut self) {
        delete_namespaces([&self.a, &self.b].into_iter());
    }
}

/// A client and a server with a router between them, each in its own
/// namespace, for a bottleneck that is not the sender's own qdisc (where
/// TCP's small queues and pacing would keep the queue short): the server S
/// at 198.18.0.1/25 behind the router's 198.18.0.126, the client C at
/// 198.18.0.130/25 behind its 198.18.0.129. Deleted on drop.
#[derive(Debug)]
pub struct Routed {
    pub client: String,
    pub router: String,
    pub server: String,
    /// Namespaces added since (an observer's).
    pub extra: Vec<String>,
}

/// [`Routed::observer`]'s address, and the server's on the observer's
/// own link to it (where the observer does not share the router).
pub const OBSERVER: &str = "198.18.0.194";

/// [`Routed`]'s server and client addresses.
pub const ROUTED_SERVER: &str = "198.18.0.1";
pub const ROUTED_CLIENT: &str = "198.18.0.130";
/// The router's interfaces toward the server and toward the client.
pub const TO_SERVER: &str = "rs";
pub const TO_CLIENT: &str = "rc";

impl Routed {
    pub fn new(test: &str) -> Option<Routed> {
        if !may_run(test) {
            return None;
        }
        let t = tag();
        let r = Routed {
            client: format!("npC{t}"),
            router: format!("npR{t}"),
            server: format!("npS{t}"),
            extra: Vec::new(),
        };
        for ns in [&r.client, &r.router, &r.server] {
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        let link = |ns: &str, dev: &str, peer: &str, addr: &str, raddr: &str| {
            sh(&[
                "ip", "-n", &r.router, "link", "add", peer, "type", "veth", "peer", "name", dev,
                "netns", ns,
            ]);
            sh(&["ip", "-n", ns, "addr", "add", addr, "dev", dev]);
            sh(&["ip", "-n", &r.router, "addr", "add", raddr, "dev", peer]);
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
            sh(&["ip", "-n", &r.router, "link", "set", peer, "up"]);
        };
        link(
            &r.server,
            "s0",
            TO_SERVER,
            "198.18.0.1/25",
            "198.18.0.126/25",
        );
        link(
            &r.client,
            "c0",
            TO_CLIENT,
            "198.18.0.130/26",
            "198.18.0.129/26",
        );
        sh(&[
            "ip",
            "-n",
            &r.server,
            "route",
            "add",
            "default",
            "via",
            "198.18.0.126",
        ]);
        sh(&[
            "ip",
            "-n",
            &r.client,
            "route",
            "add",
            "default",
            "via",
            "198.18.0.129",
        ]);
        sh(&[
            "ip",
            "netns",
            "exec",
            &r.router,
            "sysctl",
            "-q",
            "-w",
            "net.ipv4.ip_forward=1",
        ]);
        Some(r)
    }

    /// A command that runs `program` inside `ns`.
    pub fn command(&self, ns: &str, program: &Path) -> Command {
        in_namespace(ns, program)
    }

    /// The router's egress on `dev` a token bucket of `mbit` Mbit/s whose
    /// queue holds `limit` bytes.
    pub fn bottleneck(&self, dev: &str, mbit: u32, limit: u64) {
        sh(&[
            "ip",
            "netns",
            "exec",
            &self.router,
            "tc",
            "qdisc",
            "replace",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            &format!("{mbit}mbit"),
            "burst",
            "64kb",
            "limit",
            &limit.to_string(),
        ]);
    }

    /// A fourth host, the observer, at 198.18.0.194/27 behind the
    /// router's 198.18.0.193 (it reaches the client through the router).
    /// With `shares`, it reaches the server through the router too (and
    /// a queue on the router's egress toward the server); else over a
    /// link of its own straight to the server (198.18.0.226 to its
    /// 198.18.0.225), past the router's queues. Its namespace, deleted
    /// with the rest.
    pub fn observer(&mut self, shares: bool) -> String {
        let ns = format!("{}o", self.router);
        sh(&["ip", "netns", "add", &ns]);
        sh(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
        let link = |a_ns: &str, a: &str, b_ns: &str, b: &str| {
            sh(&[
                "ip", "-n", a_ns, "link", "add", a, "type", "veth", "peer", "name", b, "netns",
                b_ns,
            ]);
            sh(&["ip", "-n", a_ns, "link", "set", a, "up"]);
            sh(&["ip", "-n", b_ns, "link", "set", b, "up"]);
        };
        // `ip -n NS WORDS...`
        let ip = |in_ns: &str, words: &str| {
            let mut args = vec!["ip", "-n", in_ns];
            args.extend(words.split_whitespace());
            sh(&args);
        };
        link(&self.router, "ro", &ns, "o0");
        ip(&self.router, "addr add 198.18.0.193/27 dev ro");
        ip(&ns, "addr add 198.18.0.194/27 dev o0");
        ip(&ns, "route add default via 198.18.0.193");
        if !shares {
            link(&self.server, "sx", &ns, "o1");
            ip(&self.server, "addr add 198.18.0.225/27 dev sx");
            ip(&ns, "addr add 198.18.0.226/27 dev o1");
            ip(
                &ns,
                &format!("route add {ROUTED_SERVER}/32 via 198.18.0.225"),
            );
        }
        self.extra.push(ns.clone());
        ns
    }

    /// `netserver -D -p 0 -L 198.18.0.1` in the server's namespace.
    pub fn netserver(&self) -> crate::Netserver {
        let mut cmd = self.command(&self.server, &crate::bin("netserver"));
        cmd.args(["-D", "-p", "0", "-L", ROUTED_SERVER]);
        crate::Netserver::spawn(cmd)
    }
}

impl Drop for Routed {
    fn drop(&mut self) {
        delete_namespaces(
            [&self.client, &self.router, &self.server]
                .into_iter()
                .chain(&self.extra),
        );
    }
}

/// One host whose loopback carries whole pages: a namespace with `lo` at
/// MTU 61512, so that an IPv6 segment (40 bytes of IP header, 32 of TCP
/// with timestamps) carries 61440 bytes, 15 pages, and a receiver can map
/// them (`--rx-zerocopy`). Deleted on drop.
#[derive(Debug)]
pub struct PageLoop {
    pub ns: String,
}

impl PageLoop {
    /// The MTU that makes an IPv6 loopback segment 15 pages.
    pub const MTU: &'static str = "61512";

    pub fn new(test: &str) -> Option<PageLoop> {
        if !may_run(test) {
            return None;
        }
        let l = PageLoop {
            ns: format!("npL{}", tag()),
        };
        sh(&["ip", "netns", "add", &l.ns]);
        sh(&[
            "ip",
            "-n",
            &l.ns,
            "link",
            "set",
            "lo",
            "mtu",
            Self::MTU,
            "up",
        ]);
        Some(l)
    }

    /// A command that runs `program` inside the host.
    pub fn command(&self, program: &Path) -> Command {
        in_namespace(&self.ns, program)
    }

    /// `netserver -D -p 0 -L ::1` and `extra`, inside the host.
    pub fn netserver(&self, extra: &[&str]) -> crate::Netserver {
        let mut cmd = self.command(&crate::bin("netserver"));
        cmd.args(["-D", "-p", "0", "-L", "::1"]).args(extra);
        crate::Netserver::spawn(cmd)
    }
}

impl Drop for PageLoop {
    fn drop(&mut self) {
        delete_namespaces(std::iter::once(&self.ns));
    }
}
