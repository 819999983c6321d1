//! Third-party tests: a `netserver --fleet` runs netperf's test, with
//! this library's lifecycle, against another netserver on a client's
//! behalf and answers with the run's JSON document (`netperf mesh`).
//!
//! What makes it safe to offer: the request's options are netperf's own,
//! parsed by the same grammar, less those that would reach beyond the two
//! netservers (a data address of its own, files read or written, another
//! dialect, keys); the test proves this netserver's key to the other one,
//! and requires its proof back, before any data moves, and its data goes
//! to the address that proved it. No netserver answers a stranger's
//! request to send data somewhere (netperf 2.7's netserver does: HP's
//! flaw F4).

use std::{
    io::Write,
    sync::{Arc, Mutex},
};

use anyhow::{Result, anyhow, bail};
use proto::ThirdParty;

use crate::{
    cli::{AuthSource, DialectChoice, Invocation, Plan},
    output::Out,
};

/// The plan a third-party request asks for, checked: its own options
/// parsed as netperf's, with the other netserver as `-H`/`-p`, `key` as
/// the key, and the JSON document as the output.
pub fn plan(req: &ThirdParty, key: engine::auth::Key) -> Result<Plan> {
    req.check().map_err(|e| anyhow!(e))?;
    let mut args = vec![
        "-H".to_string(),
        req.host.clone(),
        "-p".to_string(),
        req.port.to_string(),
    ];
    args.extend(req.args.iter().cloned());
    let mut plan = match crate::cli::parse(&args) {
        Ok(Invocation::Run(p)) => *p,
        Ok(_) => bail!("the options ask for no test (help, version or a listing)"),
        Err(e) => bail!("{e}"),
    };
    refuse_reaching_out(&plan, req)?;
    plan.auth = Some(AuthSource::Given(key));
    plan.dialect = DialectChoice::Native;
    plan.json = true;
    plan.verbosity = plan.verbosity.min(1);
    plan.command_line = format!("netperf {}", args.join(" "));
    Ok(plan)
}

/// Options that would take a third-party test beyond the two netservers
/// or this host's own business, each refused by name.
fn refuse_reaching_out(plan: &Plan, req: &ThirdParty) -> Result<()> {
    let before_test = || req.args.iter().take_while(|a| a.as_str() != "--");
    let names_server = before_test().any(|a| a.starts_with("-H") || a.starts_with("-p"));
    if names_server || plan.host.as_deref() != Some(&req.host) || plan.port != req.port {
        bail!("-H/-p: the request names the other netserver; its options may not");
    }
    let refused = [
        (
            plan.auth.is_some(),
            "-Z/--key-file/--token: the netserver proves its own key",
        ),
        (
            plan.data_host.is_some(),
            "-- -H: the test's data goes to the netserver that proved the key, no other address",
        ),
        (
            plan.fill_file.is_some(),
            "-F: a third-party test reads no file of the netserver's host",
        ),
        (
            // a list or a file of selectors: whichever, refused alike, so
            // that the answer says nothing of the host's files
            plan.selection.is_some(),
            "-- -o/-O/-k: a third-party test answers with its JSON document; it takes no output selection (a file of the netserver's host or a list)",
        ),
        (
            plan.local_host.is_some()
                || plan.data_local.is_some()
                || plan.local_port.is_some()
                || plan.local_data_port.is_some()
                || plan.port_range.is_some(),
            "-L/-- -L/-- -P/-- -p: a third-party test binds no address or port of the netserver's host",
        ),
        (
            plan.observer.is_some(),
            "--observer: a third-party test asks no other netserver to probe",
        ),
        (
            plan.plot.is_some() || plan.json_stream,
            "--plot/--json-stream: a third-party test answers with its JSON document only",
        ),
        (
            !matches!(plan.dialect, DialectChoice::Auto | DialectChoice::Native),
            "--dialect/--iperf3: third-party tests run between netservers of ours",
        ),
        (
            plan.debug > 0,
            "-d: a third-party test writes no debug lines",
        ),
        (
            plan.name.is_info(),
            "-t: an information request is no third-party test",
        ),
    ];
    if let Some((_, why)) = refused.iter().find(|(bad, _)| *bad) {
        bail!("{why}");
    }
    Ok(())
}

/// Run the plan and return its JSON document.
pub fn run(plan: &Plan) -> Result<String> {
    let buf = Shared::default();
    crate::run::run_to(plan, &Out::to(buf.clone()))?;
    let bytes = buf
        .0
        .lock()
        .map_err(|_| anyhow!("the JSON document was lost"))?
        .clone();
    String::from_utf8(bytes).map_err(|_| anyhow!("the JSON document is not UTF-8"))
}

/// The document, written from the run's threads.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(args: &[&str]) -> ThirdParty {
        ThirdParty {
            host: "198.18.0.2".into(),
            port: 12865,
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn key() -> engine::auth::Key {
        engine::auth::Key::from_passphrase("k").expect("a key")
    }

    #[test]
    fn a_test_and_its_options_become_a_keyed_json_plan() {
        let p = plan(
            &req(&["-t", "TCP_RR", "-l", "2", "--", "-r", "64,64"]),
            key(),
        )
        .expect("a plan");
        assert_eq!(p.host.as_deref(), Some("198.18.0.2"));
        assert_eq!(p.port, 12865);
        assert!(p.json);
        assert_eq!(p.request_size, 64);
        assert!(matches!(p.auth, Some(AuthSource::Given(_))));
        assert_eq!(p.dialect, DialectChoice::Native);
    }

    #[test]
    fn options_that_reach_beyond_the_two_netservers_are_refused_by_name() {
        for (args, word) in [
            (&["-H", "10.0.0.1"][..], "-H/-p"),
            (&["-p", "9"][..], "-H/-p"),
            (&["-Z", "x"][..], "-Z"),
            (&["--", "-H", "10.9.9.9"][..], "data goes"),
            (&["-F", "/etc/shadow"][..], "-F"),
            (&["--", "-k", "/dev/zero"][..], "-o/-O/-k"),
            (&["--", "-o", "/nonexistent/x"][..], "-o/-O/-k"),
            (&["--", "-O", "THROUGHPUT"][..], "-o/-O/-k"),
            (&["-L", "127.0.0.5"][..], "binds no address"),
            (&["--", "-L", "127.0.0.5"][..], "binds no address"),
            (&["--", "-P", "5000,5001"][..], "binds no address"),
            (&["--observer", "127.0.0.1:9"][..], "--observer"),
            (&["--plot", "/tmp/x.svg"][..], "--plot"),
            (&["--iperf3"][..], "--dialect"),
            (&["-d"][..], "-d"),
        ] {
            let e = plan(&req(args), key()).expect_err("refused").to_string();
            assert!(e.contains(word), "{args:?}: {e}");
        }
    }

    #[test]
    fn bad_options_fail_as_netperf_words_them() {
        let e = plan(&req(&["-t", "NO_SUCH_TEST"]), key()).expect_err("refused");
        assert!(e.to_string().contains("NO_SUCH_TEST"), "{e}");
    }
}
