//! What the daemon counts for `--metrics`: one registry of the Prometheus
//! project's client, updated where things happen (sessions in the control
//! loop, tests as they start and end) with atomic counters that cost a
//! test nothing, and the gauges of what the daemon holds (sessions,
//! memory, descriptors) read when a scraper asks. [`crate::scrape`] serves
//! the text.

use std::sync::{Arc, Mutex};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
        info::Info,
    },
    registry::{Registry, Unit},
};
use proto::{SideResults, TestKind, dialect::Dialect};

/// Why a session (or a test) was turned away: the `reason` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// At `--max-sessions`.
    Busy,
    /// At `--max-per-client`.
    PerAddress,
    /// It failed to authenticate, or its address's attempts were waiting.
    Auth,
    /// A test would not fit the buffer memory budget.
    Memory,
    /// A test would hold more file descriptors than a test may, or than
    /// are free for tests.
    Descriptors,
    /// Closed to make room for another (the idlest session, the oldest
    /// silent connection).
    Evicted,
    /// It spoke a protocol (or a dialect) this netserver does not serve.
    Protocol,
    /// It waited its turn (`--schedule exclusive`) as long as it may.
    Queue,
    /// `--policy`: a test asked more than one test may.
    Policy,
    /// `--policy`: its address's (or the daemon's) budget is used up.
    Quota,
    /// `--policy`: its prefix's budget is used up.
    Prefix,
    /// `--policy`: its token's budget, scope or time is used up.
    Token,
}

impl Refused {
    fn label(self) -> &'static str {
        match self {
            Refused::Busy => "busy",
            Refused::PerAddress => "per_address",
            Refused::Auth => "auth",
            Refused::Memory => "memory",
            Refused::Descriptors => "descriptors",
            Refused::Evicted => "evicted",
            Refused::Protocol => "protocol",
            Refused::Queue => "queue",
            Refused::Policy => "policy",
            Refused::Quota => "quota",
            Refused::Prefix => "prefix",
            Refused::Token => "token",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TestLabels {
    test: &'static str,
    dialect: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TestLabel {
    test: &'static str,
}

/// A dialect's label value.
pub fn dialect_label(d: Dialect) -> &'static str {
    match d {
        Dialect::Native => "native",
        Dialect::Netperf2 => "netperf2",
        Dialect::Iperf3 => "iperf3",
    }
}

type HistogramFamily = Family<TestLabel, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // 10 ms to about 11 min, doubling
    Histogram::new(exponential_buckets(0.01, 2.0, 17))
}

/// Every figure the endpoint serves.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    accepted: Counter,
    active: Gauge,
    refused: Family<ReasonLabel, Counter>,
    started: Family<TestLabels, Counter>,
    completed: Family<TestLabels, Counter>,
    failed: Family<TestLabels, Counter>,
    tests_active: Gauge,
    sent_bytes: Family<TestLabel, Counter>,
    received_bytes: Family<TestLabel, Counter>,
    sent_datagrams: Family<TestLabel, Counter>,
    received_datagrams: Family<TestLabel, Counter>,
    duration: HistogramFamily,
    memory_used: Gauge,
    memory_limit: Gauge,
    open_fds: Gauge,
    max_fds: Gauge,
    fds_used: Gauge,
    fds_limit: Gauge,
    sockets_used: Gauge,
    sockets_limit: Gauge,
    waiting: Gauge,
    /// The tests running in the current host's turn, and the turns begun
    /// (`--schedule exclusive`).
    turn_tests: Gauge,
    turns: Counter,
    /// How long tests waited for their turn (`--schedule exclusive`).
    turn_waits: Histogram,
    /// The policy's counts (`--policy`): scopes remembered, and the
    /// daemon's tests and bytes today.
    policy_scopes: Gauge,
    policy_tests: Gauge,
    policy_bytes: Gauge,
    log_dropped: Counter,
    record_dropped: Counter,
    /// STAMP test packets reflected, and those dropped by reason
    /// (`--stamp`).
    stamp_reflected: Counter,
    stamp_dropped: Family<ReasonLabel, Counter>,
    /// One scrape encodes at a time (the registry is read-only; this keeps
    /// the gauges read for it together).
    encoding: Mutex<()>,
}

/// What the daemon holds when a scraper asks.
#[derive(Clone, Copy, Debug, Default)]
pub struct Held {
    pub sessions: u64,
    pub memory_used: u64,
    pub memory_limit: u64,
    /// Descriptors the running tests reserved, and what tests may hold.
    pub fds_used: u64,
    pub fds_limit: u64,
    /// Kernel socket memory the running tests reserved, and the budget.
    pub sockets_used: u64,
    pub sockets_limit: u64,
    /// Tests waiting their turn (`--schedule exclusive`).
    pub waiting: u64,
    /// Tests running in the current host's turn, and turns begun.
    pub turn_tests: u64,
    pub turns: u64,
    /// The policy's scopes remembered, the daemon's tests and bytes today.
    pub policy_scopes: u64,
    pub policy_tests: u64,
    pub policy_bytes: u64,
    pub log_dropped: u64,
    pub record_dropped: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            registry: Registry::default(),
            accepted: Counter::default(),
            active: Gauge::default(),
            refused: Family::default(),
            started: Family::default(),
            completed: Family::default(),
            failed: Family::default(),
            tests_active: Gauge::default(),
            sent_bytes: Family::default(),
            received_bytes: Family::default(),
            sent_datagrams: Family::default(),
            received_datagrams: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            memory_used: Gauge::default(),
            memory_limit: Gauge::default(),
            open_fds: Gauge::default(),
            max_fds: Gauge::default(),
            fds_used: Gauge::default(),
            fds_limit: Gauge::default(),
            sockets_used: Gauge::default(),
            sockets_limit: Gauge::default(),
            waiting: Gauge::default(),
            turn_tests: Gauge::default(),
            turns: Counter::default(),
            turn_waits: Histogram::new(exponential_buckets(0.1, 2.0, 12)),
            policy_scopes: Gauge::default(),
            policy_tests: Gauge::default(),
            policy_bytes: Gauge::default(),
            log_dropped: Counter::default(),
            record_dropped: Counter::default(),
            stamp_reflected: Counter::default(),
            stamp_dropped: Family::default(),
            encoding: Mutex::new(()),
        };
        registry.register(
            "netserver_build",
            "This netserver's version and its control protocol's",
            Info::new(vec![
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                ("protocol", proto::PROTOCOL_VERSION.to_string()),
            ]),
        );
        m.register_counts(&mut registry);
        m.register_held(&mut registry);
        registry.register(
            "netserver_log_lines_dropped",
            "Log lines dropped because the log's reader did not keep up",
            m.log_dropped.clone(),
        );
        registry.register(
            "netserver_turns",
            "Turns begun: each a client host's tests at once (--schedule exclusive)",
            m.turns.clone(),
        );
        registry.register(
            "netserver_stamp_reflected",
            "STAMP test packets reflected (--stamp)",
            m.stamp_reflected.clone(),
        );
        registry.register(
            "netserver_stamp_dropped",
            "STAMP test packets not reflected, by reason: rate (over --stamp-rate from one address), hmac (did not verify), short, long, send (the kernel would not take the reflection), prefix (not in --policy's [stamp] allow)",
            m.stamp_dropped.clone(),
        );
        registry.register(
            "netserver_record_lines_dropped",
            "--record lines dropped because the file's writer did not keep up",
            m.record_dropped.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The counters of sessions and tests, and the bytes their tests moved.
    fn register_counts(&self, registry: &mut Registry) {
        registry.register(
            "netserver_sessions_accepted",
            "Control sessions admitted (before their hello and authentication, which may still refuse them)",
            self.accepted.clone(),
        );
        registry.register(
            "netserver_sessions_active",
            "Control sessions open now",
            self.active.clone(),
        );
        registry.register(
            "netserver_sessions_refused",
            "Sessions (or tests) turned away, by reason",
            self.refused.clone(),
        );
        registry.register(
            "netserver_tests_started",
            "Tests whose data path was set up",
            self.started.clone(),
        );
        registry.register(
            "netserver_tests_completed",
            "Tests whose results went out",
            self.completed.clone(),
        );
        registry.register(
            "netserver_tests_failed",
            "Tests that started and ended without results",
            self.failed.clone(),
        );
        registry.register(
            "netserver_tests_active",
            "Tests running now",
            self.tests_active.clone(),
        );
        registry.register_with_unit(
            "netserver_sent",
            "Bytes this netserver's side of completed tests sent",
            Unit::Bytes,
            self.sent_bytes.clone(),
        );
        registry.register_with_unit(
            "netserver_received",
            "Bytes this netserver's side of completed tests received",
            Unit::Bytes,
            self.received_bytes.clone(),
        );
        registry.register(
            "netserver_sent_datagrams",
            "Datagrams this netserver's side of completed UDP tests sent",
            self.sent_datagrams.clone(),
        );
        registry.register(
            "netserver_received_datagrams",
            "Datagrams this netserver's side of completed UDP tests received",
            self.received_datagrams.clone(),
        );
        registry.register_with_unit(
            "netserver_test_duration",
            "Measured interval of completed tests",
            Unit::Seconds,
            self.duration.clone(),
        );
    }

    /// The gauges of what the daemon holds, read when a scraper asks.
    fn register_held(&self, registry: &mut Registry) {
        let bytes = Some(Unit::Bytes);
        registry.register_with_unit(
            "netserver_turn_wait",
            "How long tests waited for their turn before it came (--schedule exclusive)",
            Unit::Seconds,
            self.turn_waits.clone(),
        );
        let held: [(&str, &str, Option<Unit>, &Gauge); 13] = [
            (
                "netserver_policy_scopes",
                "Client addresses, prefixes and tokens whose use the policy remembers (--policy; at most max_entries)",
                None,
                &self.policy_scopes,
            ),
            (
                "netserver_policy_tests_today",
                "Tests all clients started in the policy's day (--policy)",
                None,
                &self.policy_tests,
            ),
            (
                "netserver_policy_bytes_today",
                "Bytes all clients' tests moved in the policy's day (--policy; [daemon] bytes_per_day)",
                bytes.clone(),
                &self.policy_bytes,
            ),
            (
                "netserver_tests_waiting",
                "Tests waiting their turn (--schedule exclusive)",
                None,
                &self.waiting,
            ),
            (
                "netserver_turn_tests",
                "Tests running in the turn of the client host that holds it (--schedule exclusive: a turn is a host's, its tests at once)",
                None,
                &self.turn_tests,
            ),
            (
                "netserver_memory_budget_used",
                "Buffer memory the running tests reserved",
                bytes.clone(),
                &self.memory_used,
            ),
            (
                "netserver_memory_budget_limit",
                "Buffer memory all running tests together may reserve (--memory-budget)",
                bytes.clone(),
                &self.memory_limit,
            ),
            (
                "process_open_fds",
                "File descriptors the process holds",
                None,
                &self.open_fds,
            ),
            (
                "process_max_fds",
                "File descriptors the process may hold",
                None,
                &self.max_fds,
            ),
            (
                "netserver_socket_budget_used",
                "Kernel socket memory the running tests' sockets may hold, as reserved",
                bytes.clone(),
                &self.sockets_used,
            ),
            (
                "netserver_socket_budget_limit",
                "Kernel socket memory all running tests together may hold (--socket-budget)",
                bytes,
                &self.sockets_limit,
            ),
            (
                "netserver_descriptors_used",
                "File descriptors the running tests reserved",
                None,
                &self.fds_used,
            ),
            (
                "netserver_descriptors_limit",
                "File descriptors all running tests together may reserve (what the open-files limit leaves beside the control plane's reserve)",
                None,
                &self.fds_limit,
            ),
        ];
        for (name, help, unit, gauge) in held {
            match unit {
                Some(u) => registry.register_with_unit(name, help, u, gauge.clone()),
                None => registry.register(name, help, gauge.clone()),
            }
        }
    }

    /// A test waited `secs` for its turn, which came.
    pub fn turn_waited(&self, secs: f64) {
        self.turn_waits.observe(secs);
    }

    pub fn session_accepted(&self) {
        self.accepted.inc();
    }

    /// STAMP test packets reflected (`--stamp`).
    pub fn stamp_reflected(&self, n: u64) {
        self.stamp_reflected.inc_by(n);
    }

    /// STAMP test packets dropped, and why.
    pub fn stamp_dropped(&self, reason: &'static str, n: u64) {
        self.stamp_dropped
            .get_or_create(&ReasonLabel { reason })
            .inc_by(n);
    }

    pub fn refused(&self, why: Refused) {
        self.refused
            .get_or_create(&ReasonLabel {
                reason: why.label(),
            })
            .inc();
    }

    /// A test started: its tally, which counts it completed or failed.
    pub fn test_started(self: &Arc<Self>, kind: TestKind, dialect: Dialect) -> Tally {
        let labels = TestLabels {
            test: kind.name(),
            dialect: dialect_label(dialect),
        };
        self.started.get_or_create(&labels).inc();
        self.tests_active.inc();
        Tally {
            metrics: self.clone(),
            labels: Some(labels),
        }
    }

    /// The text a scraper gets (OpenMetrics), with the gauges of what is
    /// held now.
    pub fn encode(&self, held: Held) -> String {
        let _one = self.encoding.lock();
        self.active.set(to_i64(held.sessions));
        self.memory_used.set(to_i64(held.memory_used));
        self.memory_limit.set(to_i64(held.memory_limit));
        self.fds_used.set(to_i64(held.fds_used));
        self.fds_limit.set(to_i64(held.fds_limit));
        self.sockets_used.set(to_i64(held.sockets_used));
        self.sockets_limit.set(to_i64(held.sockets_limit));
        self.waiting.set(to_i64(held.waiting));
        self.turn_tests.set(to_i64(held.turn_tests));
        catch_up(&self.turns, held.turns);
        self.policy_scopes.set(to_i64(held.policy_scopes));
        self.policy_tests.set(to_i64(held.policy_tests));
        self.policy_bytes.set(to_i64(held.policy_bytes));
        let (open, max) = engine::sys::descriptors();
        // (uncountable: the last count stands)
        if let Some(open) = open {
            self.open_fds.set(to_i64(open));
        }
        self.max_fds.set(to_i64(max));
        catch_up(&self.log_dropped, held.log_dropped);
        catch_up(&self.record_dropped, held.record_dropped);
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// The Prometheus text format (0.0.4) of an OpenMetrics text, for a
/// scraper that did not ask for OpenMetrics (`promtool`, `curl`, older
/// scrapers): a counter's family is named with its `_total`, an info's
/// is a gauge named with its `_info`, and there are no `# UNIT` and
/// `# EOF` lines.
pub fn prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                k => (name.to_string(), k),
            };
            if let Some(h) = help.take() {
                let text = h.split_once(' ').map_or("", |(_, t)| t);
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Bring a counter kept elsewhere (the log's) up to its count.
fn catch_up(c: &Counter, total: u64) {
    let now = c.get();
    if total > now {
        c.inc_by(total - now);
    }
}

/// A running test's place in the counts: completed with its results, or
/// failed when dropped without them.
#[derive(Debug)]
pub struct Tally {
    metrics: Arc<Metrics>,
    labels: Option<TestLabels>,
}

impl Tally {
    /// Its results went out.
    pub fn completed(mut self, kind: TestKind, r: &SideResults) {
        let Some(labels) = self.labels.take() else {
            return;
        };
        let m = &self.metrics;
        m.tests_active.dec();
        m.completed.get_or_create(&labels).inc();
        let test = TestLabel { test: labels.test };
        m.sent_bytes.get_or_create(&test).inc_by(r.bytes_sent);
        m.received_bytes
            .get_or_create(&test)
            .inc_by(r.bytes_received);
        if kind.protocol() == proto::Protocol::Udp {
            let received = r.udp.as_ref().map_or(r.recv_calls, |u| u.received);
            m.sent_datagrams.get_or_create(&test).inc_by(r.send_calls);
            m.received_datagrams.get_or_create(&test).inc_by(received);
        }
        m.duration
            .get_or_create(&test)
            .observe(r.elapsed_ns as f64 / 1e9);
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if let Some(labels) = self.labels.take() {
            self.metrics.tests_active.dec();
            self.metrics.failed.get_or_create(&labels).inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_units_and_tallies() {
        let m = Arc::new(Metrics::new());
        m.session_accepted();
        m.refused(Refused::PerAddress);
        let t = m.test_started(TestKind::UdpStream, Dialect::Native);
        let r = SideResults {
            bytes_received: 4096,
            recv_calls: 5,
            udp: Some(proto::UdpRecvStats {
                received: 4,
                out_of_order: 0,
                duplicates: 0,
                foreign: 0,
                rcvbuf_drops: 0,
                drops_source: proto::DropSource::Socket,
                jitter_ns: 0,
            }),
            elapsed_ns: 1_500_000_000,
            ..Default::default()
        };
        let running = m.encode(Held::default());
        assert!(running.contains("netserver_tests_active 1\n"), "{running}");
        t.completed(TestKind::UdpStream, &r);
        drop(m.test_started(TestKind::TcpRr, Dialect::Netperf2));
        let text = m.encode(Held {
            sessions: 3,
            memory_limit: 1 << 20,
            ..Default::default()
        });
        for line in [
            "netserver_sessions_accepted_total 1\n",
            "netserver_sessions_active 3\n",
            "netserver_sessions_refused_total{reason=\"per_address\"} 1\n",
            "netserver_tests_started_total{test=\"UDP_STREAM\",dialect=\"native\"} 1\n",
            "netserver_tests_completed_total{test=\"UDP_STREAM\",dialect=\"native\"} 1\n",
            "netserver_tests_failed_total{test=\"TCP_RR\",dialect=\"netperf2\"} 1\n",
            "netserver_tests_active 0\n",
            "netserver_received_bytes_total{test=\"UDP_STREAM\"} 4096\n",
            "netserver_received_datagrams_total{test=\"UDP_STREAM\"} 4\n",
            "netserver_test_duration_seconds_count{test=\"UDP_STREAM\"} 1\n",
            "netserver_memory_budget_limit_bytes 1048576\n",
            "netserver_build_info{version=\"",
            "# EOF\n",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
        let plain = prometheus_text(&text);
        for line in [
            "# TYPE netserver_sessions_accepted_total counter\n",
            "# HELP netserver_sessions_accepted_total Control sessions admitted (before",
            "# TYPE netserver_build_info gauge\n",
            "# TYPE netserver_test_duration_seconds histogram\n",
            "netserver_sessions_accepted_total 1\n",
        ] {
            assert!(plain.contains(line), "no {line:?} in\n{plain}");
        }
        assert!(!plain.contains("# EOF") && !plain.contains("# UNIT"));
    }
}
