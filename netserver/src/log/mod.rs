//! The daemon's log: one line per event, to stderr (the journal, under
//! systemd) or a file. Text that came from a client is escaped, and each
//! cause of warnings is rate-limited so a hostile client cannot flood it.
//!
//! Lines are written by a thread of their own (started with the first
//! line), so that a log whose reader stalls (a paused terminal, a full
//! pipe, a slow disk) never holds up the control loop or a test: a line
//! with no room in the queue is counted, and the count is written when
//! there is room again.

mod budget;

pub use budget::Limits;

use std::{
    collections::HashMap,
    fmt::Write as _,
    io::Write,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc::{self, SyncSender, TrySendError},
    },
    thread,
    time::{Duration, Instant, SystemTime},
};

/// Where log lines go.
pub type Sink = Box<dyn Write + Send>;

/// How lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// `netserver: ` and the text (the default).
    #[default]
    Text,
    /// One JSON object a line (`--log-format json`).
    Json,
    /// Each line as given (`--record`'s lines, JSON already).
    Raw,
}

/// What one log line is about, beyond its text: the JSON log's fields.
#[derive(Debug, Default)]
pub struct Event<'a> {
    /// What happened, in a word or two (`test-completed`, `refused`, ...).
    pub event: &'static str,
    pub session: Option<u64>,
    pub peer: Option<SocketAddr>,
    pub dialect: Option<&'static str>,
    pub test: Option<&'static str>,
    pub outcome: Option<&'static str>,
    pub reason: Option<&'a str>,
    pub figures: Option<serde_json::Value>,
}

#[derive(Clone)]
pub struct Logger {
    inner: Arc<Mutex<Inner>>,
    verbosity: u8,
    format: Format,
    /// Lines dropped in all, for the metrics.
    dropped_total: Arc<AtomicU64>,
}

struct Inner {
    out: Out,
    format: Format,
    dropped_total: Arc<AtomicU64>,
    /// The bytes lines may take ([`Limits`]).
    budget: budget::Budget,
    /// Lines over the budget since the last note of them.
    over_budget: u64,
    /// Per cause: start of the current window and lines in it.
    windows: HashMap<&'static str, (Instant, u32, u64)>,
}

enum Out {
    /// No line yet: the writer starts with the first.
    Idle(Sink),
    /// Lines go to the writer thread; `dropped` found no room.
    Queued { tx: SyncSender<Msg>, dropped: u64 },
    /// Nothing is written (or the writer could not be started).
    Gone,
}

enum Msg {
    Line(String),
    Replace(Sink),
    /// Answered once every line before it is written.
    Sync(mpsc::Sender<()>),
}

impl std::fmt::Debug for Logger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logger")
            .field("verbosity", &self.verbosity)
            .finish()
    }
}

/// Lines per cause per window before the rest are counted, not printed.
const BURST: u32 = 10;
const WINDOW: Duration = Duration::from_secs(10);
/// Lines waiting for the writer, at most.
const QUEUE: usize = 4096;

impl Inner {
    /// Start the writer thread, if it has not started.
    fn start_writer(&mut self) {
        if let Out::Idle(_) = self.out {
            let Out::Idle(sink) = std::mem::replace(&mut self.out, Out::Gone) else {
                return;
            };
            let (tx, rx) = mpsc::sync_channel(QUEUE);
            let spawned = thread::Builder::new()
                .name("log".into())
                .stack_size(64 * 1024)
                .spawn(move || write_lines(sink, &rx));
            if spawned.is_ok() {
                self.out = Out::Queued { tx, dropped: 0 };
            }
        }
    }

    /// Queue one line as it is; with no room, count it as dropped.
    fn push(&mut self, line: String) {
        self.start_writer();
        let format = self.format;
        let Out::Queued { tx, dropped } = &mut self.out else {
            return;
        };
        if *dropped > 0 {
            let text = format!("{dropped} log lines dropped: the log's reader did not keep up");
            let note = match format {
                Format::Text => Some(format!("({text})")),
                Format::Json => Some(json_line(
                    "warn",
                    &Event {
                        event: "log-dropped",
                        figures: Some(serde_json::json!({ "dropped": *dropped })),
                        ..Event::default()
                    },
                    &text,
                )),
                // a record holds records only: the metrics count these
                Format::Raw => None,
            };
            match note {
                Some(n) => {
                    if tx.try_send(Msg::Line(n)).is_ok() {
                        *dropped = 0;
                    }
                }
                None => *dropped = 0,
            }
        }
        if let Err(TrySendError::Full(_)) = tx.try_send(Msg::Line(line)) {
            *dropped += 1;
            self.dropped_total.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Queue one event's line, in the log's format.
    fn line(&mut self, severity: &str, ev: &Event<'_>, text: &str) {
        let line = match self.format {
            Format::Text => format!("netserver: {text}"),
            Format::Json => json_line(severity, ev, text),
            Format::Raw => text.to_string(),
        };
        self.within_budget(line, ev.peer.map(|p| p.ip()));
    }

    /// Queue `line` (about `peer`) if the budget allows, else count it;
    /// the count is noted once a line of the daemon's own fits again.
    fn within_budget(&mut self, line: String, peer: Option<std::net::IpAddr>) {
        let now = Instant::now();
        if !self.budget.take(line.len(), peer, now) {
            self.over_budget += 1;
            self.dropped_total.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.over_budget > 0 && self.format != Format::Raw {
            let n = self.over_budget;
            let text = format!(
                "{n} log lines dropped: over the log's budget (a client address's share, the daemon's rate, or --max-file-size)"
            );
            let note = match self.format {
                Format::Json => json_line(
                    "warn",
                    &Event {
                        event: "log-over-budget",
                        figures: Some(serde_json::json!({ "dropped": n })),
                        ..Event::default()
                    },
                    &text,
                ),
                _ => format!("netserver: ({text})"),
            };
            if self.budget.take(note.len(), None, now) {
                self.over_budget = 0;
                self.push(note);
            }
        } else if self.format == Format::Raw {
            // a record holds records only: the metrics count these
            self.over_budget = 0;
        }
        self.push(line);
    }
}

/// An event as one JSON object.
fn json_line(severity: &str, ev: &Event<'_>, text: &str) -> String {
    let mut o = serde_json::Map::new();
    o.insert("ts".into(), rfc3339(SystemTime::now()).into());
    o.insert("level".into(), severity.into());
    o.insert(
        "event".into(),
        if ev.event.is_empty() {
            "message"
        } else {
            ev.event
        }
        .into(),
    );
    if let Some(s) = ev.session {
        o.insert("session".into(), s.into());
    }
    if let Some(p) = ev.peer {
        o.insert("peer".into(), p.to_string().into());
    }
    let words = [
        ("dialect", ev.dialect),
        ("test", ev.test),
        ("outcome", ev.outcome),
        ("reason", ev.reason),
    ];
    for (k, v) in words {
        if let Some(v) = v {
            o.insert(k.into(), v.into());
        }
    }
    if let Some(f) = &ev.figures {
        o.insert("figures".into(), f.clone());
    }
    o.insert("msg".into(), text.into());
    serde_json::Value::Object(o).to_string()
}

/// A time as RFC 3339 in UTC, to the millisecond.
pub fn rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // days since 1970-01-01 to a civil date (Gregorian, proleptic)
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// The writer thread: until every logger is gone.
fn write_lines(mut sink: Sink, rx: &mpsc::Receiver<Msg>) {
    for msg in rx {
        match msg {
            Msg::Line(l) => {
                let _ = writeln!(sink, "{l}");
                let _ = sink.flush();
            }
            Msg::Replace(new) => {
                let _ = sink.flush();
                sink = new;
            }
            Msg::Sync(done) => {
                let _ = done.send(());
            }
        }
    }
}

impl Logger {
    pub fn new(sink: Sink, verbosity: u8) -> Logger {
        Logger::with_format(sink, verbosity, Format::Text)
    }

    /// A log whose lines are in `format`.
    pub fn with_format(sink: Sink, verbosity: u8, format: Format) -> Logger {
        let dropped_total = Arc::new(AtomicU64::new(0));
        Logger {
            inner: Arc::new(Mutex::new(Inner {
                out: Out::Idle(sink),
                format,
                dropped_total: dropped_total.clone(),
                budget: budget::Budget::new(Limits::default(), 0),
                over_budget: 0,
                windows: HashMap::new(),
            })),
            verbosity,
            format,
            dropped_total,
        }
    }

    pub fn stderr(verbosity: u8) -> Logger {
        Logger::new(Box::new(std::io::stderr()), verbosity)
    }

    pub fn discard() -> Logger {
        let dropped_total = Arc::new(AtomicU64::new(0));
        Logger {
            inner: Arc::new(Mutex::new(Inner {
                out: Out::Gone,
                format: Format::Text,
                dropped_total: dropped_total.clone(),
                budget: budget::Budget::new(Limits::default(), 0),
                over_budget: 0,
                windows: HashMap::new(),
            })),
            verbosity: 0,
            format: Format::Text,
            dropped_total,
        }
    }

    /// Hold its lines to `limits` (a file's size, of which it holds
    /// `already` bytes, and rates in all and by client address) instead of
    /// the defaults.
    pub fn with_limits(self, limits: Limits, already: u64) -> Logger {
        if let Ok(mut i) = self.inner.lock() {
            i.budget = budget::Budget::new(limits, already);
        }
        self
    }

    /// The format its lines are in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Lines dropped so far because the writer did not keep up.
    pub fn dropped(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }

    /// Write from now on to `sink` (SIGHUP, after logrotate moved the file),
    /// which holds `already` bytes. Whether it took: a writer stuck on its
    /// old sink for 2 s keeps it.
    pub fn replace_sink(&self, sink: Sink, already: u64) -> bool {
        if let Ok(mut i) = self.inner.lock() {
            i.budget.new_file(already);
            if let Out::Idle(old) = &mut i.out {
                *old = sink;
                return true;
            }
        }
        self.send_within(Msg::Replace(sink), Duration::from_secs(2))
    }

    /// Queue `msg` even when the queue is full, waiting for room at most
    /// `limit` (without holding the lock meanwhile, so that other lines are
    /// dropped and counted, not held up).
    fn send_within(&self, mut msg: Msg, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            {
                let Ok(mut i) = self.inner.lock() else {
                    return false;
                };
                let Out::Queued { tx, .. } = &mut i.out else {
                    return false;
                };
                match tx.try_send(msg) {
                    Ok(()) => return true,
                    Err(TrySendError::Full(m)) => msg = m,
                    Err(TrySendError::Disconnected(_)) => return false,
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Start the writer thread now (the daemon, once it has detached: a
    /// process that forks must not have started it), rather than with the
    /// first line.
    pub fn start(&self) {
        if let Ok(mut i) = self.inner.lock() {
            i.start_writer();
        }
    }

    /// Wait (at most `limit`) until every line logged so far is written:
    /// before the process exits.
    pub fn sync(&self, limit: Duration) {
        let start = Instant::now();
        let (tx, rx) = mpsc::channel();
        if self.send_within(Msg::Sync(tx), limit) {
            let _ = rx.recv_timeout(limit.saturating_sub(start.elapsed()));
        }
    }

    pub fn verbosity(&self) -> u8 {
        self.verbosity
    }

    /// Log at `level` (0 = always, 1 = default, 2 = verbose).
    pub fn log(&self, level: u8, line: &str) {
        self.event(level, &Event::default(), line);
    }

    /// Log an event at `level`: its text, and in the JSON log its fields.
    pub fn event(&self, level: u8, ev: &Event<'_>, text: &str) {
        if level > self.verbosity {
            return;
        }
        let severity = match level {
            0 => "error",
            1 => "info",
            _ => "debug",
        };
        if let Ok(mut inner) = self.inner.lock() {
            inner.line(severity, ev, text);
        }
    }

    /// Write one line as it is (a `--record` line about a test of
    /// `peer`'s), whatever the verbosity, within the budget.
    pub fn raw(&self, line: String, peer: Option<std::net::IpAddr>) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.within_budget(line, peer);
        }
    }

    /// Log a warning of some `cause`, at most [`BURST`] per 10 s per cause;
    /// the suppressed count is reported when the next window opens.
    pub fn warn_limited(&self, cause: &'static str, line: &str) {
        self.warn_event(
            &Event {
                event: cause,
                ..Event::default()
            },
            line,
        );
    }

    /// [`Logger::warn_limited`] of an event whose fields are known; its
    /// cause is its `event`.
    pub fn warn_event(&self, ev: &Event<'_>, line: &str) {
        let cause = ev.event;
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let now = Instant::now();
        let entry = inner.windows.entry(cause).or_insert((now, 0, 0));
        if now.duration_since(entry.0) >= WINDOW {
            let suppressed = entry.2;
            *entry = (now, 0, 0);
            if suppressed > 0 {
                let note = Event {
                    event: "suppressed",
                    reason: Some(cause),
                    figures: Some(serde_json::json!({ "suppressed": suppressed })),
                    ..Event::default()
                };
                inner.line(
                    "warn",
                    &note,
                    &format!("({suppressed} more '{cause}' messages suppressed)"),
                );
            }
        }
        let entry = inner.windows.entry(cause).or_insert((now, 0, 0));
        if entry.1 < BURST {
            entry.1 += 1;
            inner.line("warn", ev, line);
        } else {
            entry.2 += 1;
        }
    }
}

/// Escape text that came from the network for a log line: printable ASCII
/// stays, everything else becomes `\xNN`, and it is cut at 300 characters.
pub fn escape(s: &str) -> String {
    let mut out = String::new();
    for (i, b) in s.bytes().enumerate() {
        if i >= 300 {
            out.push_str("...");
            break;
        }
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A sink that blocks every write until its gate opens.
    struct Stalled {
        gate: Arc<(Mutex<bool>, std::sync::Condvar)>,
        buf: Buf,
    }
    impl Write for Stalled {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let (open, cv) = &*self.gate;
            let mut o = open.lock().unwrap();
            while !*o {
                o = cv.wait(o).unwrap();
            }
            self.buf.write(b)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_log_holds_up_no_one() {
        let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let buf = Buf::default();
        let log = Logger::new(
            Box::new(Stalled {
                gate: gate.clone(),
                buf: buf.clone(),
            }),
            1,
        );
        // nothing can be written, yet every call returns
        for i in 0..QUEUE + 1000 {
            log.log(1, &format!("line {i}"));
        }
        // waiting for it (at the daemon's exit) is bounded too, and a new
        // sink cannot be handed to a writer that is stuck
        log.sync(Duration::from_millis(100));
        assert!(!log.replace_sink(Box::new(std::io::sink()), 0));
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        log.sync(Duration::from_secs(5));
        log.log(1, "after");
        log.sync(Duration::from_secs(5));
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(text.starts_with("netserver: line 0\n"), "{}", &text[..80]);
        assert!(
            text.contains("log lines dropped"),
            "no count of the dropped"
        );
        assert!(text.ends_with("netserver: after\n"));
    }

    #[test]
    fn json_lines_carry_the_fields_and_the_text() {
        let buf = Buf::default();
        let log = Logger::with_format(Box::new(buf.clone()), 1, Format::Json);
        log.event(
            1,
            &Event {
                event: "test-completed",
                session: Some(4),
                peer: Some("127.0.0.1:5000".parse().unwrap()),
                test: Some("TCP_RR"),
                figures: Some(serde_json::json!({ "transactions": 12 })),
                ..Event::default()
            },
            "done \"quoted\"",
        );
        log.warn_limited("busy", "refused");
        log.sync(Duration::from_secs(5));
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["event"], "test-completed");
        assert_eq!(lines[0]["session"], 4);
        assert_eq!(lines[0]["peer"], "127.0.0.1:5000");
        assert_eq!(lines[0]["figures"]["transactions"], 12);
        assert_eq!(lines[0]["msg"], "done \"quoted\"");
        assert_eq!(lines[0]["level"], "info");
        assert_eq!(lines[1]["event"], "busy");
        assert_eq!(lines[1]["level"], "warn");
    }

    #[test]
    fn rfc3339_dates() {
        let at = |s: u64| rfc3339(SystemTime::UNIX_EPOCH + Duration::from_millis(s));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(at(1_796_169_599_000), "2026-12-01T23:59:59.000Z");
    }

    #[test]
    fn escaping() {
        assert_eq!(escape("netperf 2.7"), "netperf 2.7");
        assert_eq!(escape("a\nb\x1b[31m"), "a\\x0ab\\x1b[31m");
        assert!(escape(&"x".repeat(400)).ends_with("..."));
    }

    #[test]
    fn warnings_are_rate_limited() {
        let buf = Buf::default();
        let log = Logger::new(Box::new(buf.clone()), 1);
        for i in 0..100 {
            log.warn_limited("flood", &format!("line {i}"));
        }
        log.sync(Duration::from_secs(5));
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), BURST as usize);
    }

    #[test]
    fn verbosity_filters() {
        let buf = Buf::default();
        let log = Logger::new(Box::new(buf.clone()), 1);
        log.log(2, "hidden");
        log.log(1, "shown");
        log.sync(Duration::from_secs(5));
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "netserver: shown\n");
    }
}
