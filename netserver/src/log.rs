//! The daemon's log: one line per event, to stderr (the journal, under
//! systemd) or a file. Text that came from a client is escaped, and each
//! cause of warnings is rate-limited so a hostile client cannot flood it.

use std::{
    collections::HashMap,
    fmt::Write as _,
    io::Write,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

/// Where log lines go.
pub type Sink = Box<dyn Write + Send>;

#[derive(Clone)]
pub struct Logger {
    inner: Arc<Mutex<Inner>>,
    verbosity: u8,
}

struct Inner {
    sink: Sink,
    /// Per cause: start of the current window and lines in it.
    windows: HashMap<&'static str, (Instant, u32, u64)>,
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

impl Logger {
    pub fn new(sink: Sink, verbosity: u8) -> Logger {
        Logger {
            inner: Arc::new(Mutex::new(Inner {
                sink,
                windows: HashMap::new(),
            })),
            verbosity,
        }
    }

    pub fn stderr(verbosity: u8) -> Logger {
        Logger::new(Box::new(std::io::stderr()), verbosity)
    }

    pub fn discard() -> Logger {
        Logger::new(Box::new(std::io::sink()), 0)
    }

    /// Write from now on to `sink` (SIGHUP, after logrotate moved the file).
    pub fn replace_sink(&self, sink: Sink) {
        if let Ok(mut i) = self.inner.lock() {
            let _ = i.sink.flush();
            i.sink = sink;
        }
    }

    pub fn verbosity(&self) -> u8 {
        self.verbosity
    }

    /// Log at `level` (0 = always, 1 = default, 2 = verbose).
    pub fn log(&self, level: u8, line: &str) {
        if level > self.verbosity {
            return;
        }
        if let Ok(mut inner) = self.inner.lock() {
            let _ = writeln!(inner.sink, "netserver: {line}");
            let _ = inner.sink.flush();
        }
    }

    /// Log a warning of some `cause`, at most [`BURST`] per 10 s per cause;
    /// the suppressed count is reported when the next window opens.
    pub fn warn_limited(&self, cause: &'static str, line: &str) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let now = Instant::now();
        let entry = inner.windows.entry(cause).or_insert((now, 0, 0));
        if now.duration_since(entry.0) >= WINDOW {
            let suppressed = entry.2;
            *entry = (now, 0, 0);
            if suppressed > 0 {
                let _ = writeln!(
                    inner.sink,
                    "netserver: ({suppressed} more '{cause}' messages suppressed)"
                );
            }
        }
        let entry = inner.windows.entry(cause).or_insert((now, 0, 0));
        if entry.1 < BURST {
            entry.1 += 1;
            let _ = writeln!(inner.sink, "netserver: {line}");
            let _ = inner.sink.flush();
        } else {
            entry.2 += 1;
        }
    }
}

/// Escape text that came from the network for a log line: printable ASCII
/// stays, everything else becomes `\xNN`, and it is cut at 80 characters.
pub fn escape(s: &str) -> String {
    let mut out = String::new();
    for (i, b) in s.bytes().enumerate() {
        if i >= 80 {
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

    #[test]
    fn escaping() {
        assert_eq!(escape("netperf 2.7"), "netperf 2.7");
        assert_eq!(escape("a\nb\x1b[31m"), "a\\x0ab\\x1b[31m");
        assert!(escape(&"x".repeat(200)).ends_with("..."));
    }

    #[test]
    fn warnings_are_rate_limited() {
        let buf = Buf::default();
        let log = Logger::new(Box::new(buf.clone()), 1);
        for i in 0..100 {
            log.warn_limited("flood", &format!("line {i}"));
        }
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), BURST as usize);
    }

    #[test]
    fn verbosity_filters() {
        let buf = Buf::default();
        let log = Logger::new(Box::new(buf.clone()), 1);
        log.log(2, "hidden");
        log.log(1, "shown");
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "netserver: shown\n");
    }
}
