//! The Windows builds of netperf and netserver (x86_64-pc-windows-gnu,
//! linked by mingw-w64), run under Wine against the Linux builds.
//!
//! The binaries are built beforehand (`.ci/run` does it:
//! `cargo build --target x86_64-pc-windows-gnu -p rsnetperf -p
//! rsnetperf-server`); the harness copies them into `target/wine/` beside a
//! shim DLL and runs them there with one Wine prefix for every test.
//!
//! The shim is test scaffolding, never shipped: Rust's standard library
//! asks `bcryptprimitives.dll` for `ProcessPrng`, which Wine 8 lacks (the
//! program would not start, status c0000135); a DLL of a few lines built
//! here with the mingw compiler exports it over `BCryptGenRandom`, and
//! Wine loads it from the program's own directory first.
//!
//! When Wine, the compiler or the binaries are missing the tests say so
//! loudly and skip, unless `NETPERF_REQUIRE_WINE=1` (set by `.ci/run`),
//! when they fail.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use crate::{Netserver, Output, run_with_deadline};

/// The Windows binaries, ready to run under Wine.
#[derive(Debug)]
pub struct Wine {
    wine: PathBuf,
    dir: PathBuf,
    prefix: PathBuf,
    /// Held while the test runs: shared by the tests that may share the
    /// prefix's wineserver, exclusive for one that must have it alone.
    _running: nix::fcntl::Flock<fs::File>,
}

const SHIM: &str = r#"#include <windows.h>
#include <bcrypt.h>
/* Wine 8 has no ProcessPrng, which Rust's std imports: this one draws from
   BCryptGenRandom. Test scaffolding, never shipped. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    return BCryptGenRandom(NULL, data, (ULONG)len, BCRYPT_USE_SYSTEM_PREFERRED_RNG) == 0;
}
"#;

/// The target directory (the parent of `target/debug`).
fn target_dir() -> PathBuf {
    crate::bin("netperf")
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("target/<profile>/netperf")
}

fn find_wine() -> Option<PathBuf> {
    ["/usr/lib/wine/wine64", "/usr/bin/wine64", "/usr/bin/wine"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn skip_or_fail(test: &str, why: &str) -> Option<Wine> {
    if std::env::var("NETPERF_REQUIRE_WINE").as_deref() == Ok("1") {
        panic!("Wine test {test} cannot run: {why} (NETPERF_REQUIRE_WINE=1)");
    }
    eprintln!("!!! SKIPPED Wine test {test}: {why}");
    eprintln!("!!! set NETPERF_REQUIRE_WINE=1 to make this a failure");
    None
}

impl Wine {
    /// The binaries in place, or why not (loudly; a failure under
    /// `NETPERF_REQUIRE_WINE=1`).
    pub fn new(test: &str) -> Option<Wine> {
        Wine::with(test, nix::fcntl::FlockArg::LockShared)
    }

    /// As [`Wine::new`], with no other Wine test running meanwhile (in
    /// this process or another): for a test that measures what the
    /// prefix's one wineserver (Windows' kernel, as Wine has it) does.
    pub fn alone(test: &str) -> Option<Wine> {
        Wine::with(test, nix::fcntl::FlockArg::LockExclusive)
    }

    fn with(test: &str, running: nix::fcntl::FlockArg) -> Option<Wine> {
        let Some(wine) = find_wine() else {
            return skip_or_fail(test, "wine is not installed (apt-get install wine wine64)");
        };
        let built = target_dir().join("x86_64-pc-windows-gnu").join("debug");
        let exes = ["netperf.exe", "netserver.exe"];
        if let Some(missing) = exes.iter().find(|e| !built.join(e).exists()) {
            return skip_or_fail(
                test,
                &format!(
                    "{} is missing: cargo build --target x86_64-pc-windows-gnu -p rsnetperf -p rsnetperf-server",
                    built.join(missing).display()
                ),
            );
        }
        let dir = target_dir().join("wine");
        fs::create_dir_all(&dir).expect("target/wine");
        // (taken before the preparation's lock, always in that order)
        let file = fs::File::create(dir.join(".running")).expect("target/wine/.running");
        let _running = nix::fcntl::Flock::lock(file, running)
            .map_err(|(_, e)| e)
            .expect("locking target/wine/.running");
        // one process at a time prepares the directory and the prefix
        let lock = fs::File::create(dir.join(".lock")).expect("target/wine/.lock");
        let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| e)
            .expect("locking target/wine");
        for e in exes {
            let (from, to) = (built.join(e), dir.join(e));
            if modified(&from) > modified(&to) {
                fs::copy(&from, &to).expect("copying a Windows binary");
            }
        }
        let dll = dir.join("bcryptprimitives.dll");
        if !dll.exists() {
            let src = dir.join("shim.c");
            fs::write(&src, SHIM).expect("shim.c");
            let built = Command::new("x86_64-w64-mingw32-gcc")
                .args(["-shared", "-O2", "-o"])
                .arg(&dll)
                .arg(&src)
                .arg("-lbcrypt")
                .status();
            if !built.is_ok_and(|s| s.success()) {
                return skip_or_fail(
                    test,
                    "x86_64-w64-mingw32-gcc cannot build the shim DLL (apt-get install gcc-mingw-w64-x86-64)",
                );
            }
        }
        let w = Wine {
            wine,
            prefix: dir.join("prefix"),
            _running,
            dir,
        };
        if !w.prefix.join("system.reg").exists() {
            // a new prefix takes a while to make: once, under the lock
            let out =
                run_with_deadline(w.command("netperf.exe", &["-V"]), Duration::from_secs(180));
            assert!(out.success(), "Wine could not start netperf.exe: {out}");
        }
        Some(w)
    }

    fn command(&self, exe: &str, args: &[&str]) -> Command {
        let mut c = Command::new(&self.wine);
        // ours from their directory; Wine's own programs (sc) by name
        let path = self.dir.join(exe);
        if path.exists() {
            c.arg(path);
        } else {
            c.arg(exe);
        }
        c.args(args)
            .env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all")
            .stdin(Stdio::null());
        c
    }

    /// `netperf.exe args`, to completion (at most a minute).
    pub fn netperf(&self, args: &[&str]) -> Output {
        run_with_deadline(self.command("netperf.exe", args), Duration::from_secs(90))
    }

    /// Any program of ours or of Wine's (`sc`), to completion.
    pub fn run(&self, exe: &str, args: &[&str]) -> Output {
        run_with_deadline(self.command(exe, args), Duration::from_secs(90))
    }

    /// A Wine program that waits (its input open) until dropped: Wine ends
    /// its services (and the service manager) once no other program of the
    /// prefix runs, which on Windows never happens.
    pub fn session(&self) -> Session {
        let mut c = self.command("cmd", &[]);
        c.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Session(c.spawn().expect("wine cmd"))
    }

    /// `netserver.exe -D -p 0 -L 127.0.0.1` and `extra`, until dropped.
    pub fn netserver(&self, extra: &[&str]) -> Netserver {
        let mut args = vec!["-D", "-p", "0", "-L", "127.0.0.1"];
        args.extend_from_slice(extra);
        Netserver::spawn(self.command("netserver.exe", &args))
    }
}

fn modified(p: &Path) -> Option<std::time::SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// A waiting Wine program (see [`Wine::session`]), ended on drop.
#[derive(Debug)]
pub struct Session(std::process::Child);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// CPU time, in ticks of 10 ms, that every wineserver on the machine has
/// used so far.
pub fn wineserver_ticks() -> u64 {
    let mut ticks = 0;
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let path = entry.path();
        let is_wineserver =
            fs::read(path.join("cmdline")).is_ok_and(|c| c.windows(10).any(|w| w == b"wineserver"));
        if is_wineserver {
            ticks += crate::cpu_ticks(&path);
        }
    }
    ticks
}
