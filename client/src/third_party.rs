//! Third-party tests: a `netserver --fleet` runs netperf's test, with
//! this library's lifecycle, against another netserver on a client's
//! behalf and answers with the run's JSON document (`netperf mesh`).
//!
//! What makes it safe to offer: the request is typed
//! ([`proto::ThirdPartyTest`]): it can say which test, how long, how many
//! iterations and the shape of its traffic (sizes, buffers, flows, pacing),
//! and nothing that would reach beyond the two netservers (a data address
//! of its own, a file read or written, an output, another dialect, a key).
//! The netserver makes its [`Plan`] from that value alone, with no
//! command line in between (this module is the typed request's speaker, as
//! netperf's grammar is the command line's); the test proves this
//! netserver's key to the other one, and requires its proof back, before
//! any data moves, and its data goes to the address that proved it. No
//! netserver answers a stranger's request to send data somewhere (netperf
//! 2.7's netserver does: HP's flaw F4).

use std::{
    io::Write,
    sync::{Arc, Mutex},
};

use anyhow::{Result, anyhow};
use optparse::value::AddrFamily;
use proto::{ThirdParty, ThirdPartyLength, ThirdPartyTest};

use crate::{
    output::Out,
    plan::{
        self, AuthSource, Confidence, DialectChoice, Length, OneWayAsk, Plan, Shape, TestName,
        UnderLoad,
    },
};

/// The plan a third-party request asks for, checked: its typed test with
/// the other netserver as the host, `key` as the key, and the JSON
/// document as the output. Each field means what netperf's option of the
/// same name means (a test in the netperf program holds the two equal).
pub fn plan(req: &ThirdParty, key: engine::auth::Key) -> Result<Plan> {
    req.check().map_err(|e| anyhow!(e))?;
    let t = &req.test;
    let mut plan = Plan::new(format!(
        "netperf -H {} -p {} {}",
        req.host,
        req.port,
        test_words(t).join(" ")
    ));
    plan.host = Some(req.host.clone());
    plan.port = req.port;
    plan.name = TestName::from_name(t.test.name())
        .ok_or_else(|| anyhow!("-t {}: not a test this netserver runs", t.test.name()))?;
    plan.length = match t.length {
        ThirdPartyLength::Seconds(s) => Length::Seconds(u64::from(s)),
        ThirdPartyLength::Count(n) => Length::Count(n),
    };
    // (as netperf's rules: -I alone runs 3 to 10 iterations, -i alone at
    // 99% and 5%)
    let given = |p: (Option<u32>, Option<u32>)| (p != (None, None)).then_some(p);
    let level_width = (t.confidence != (None, None)).then_some(t.confidence);
    if let (iterations, Some(_)) | (iterations @ Some(_), _) = (given(t.iterations), level_width) {
        let wide = |n: Option<u32>| n.map(i64::from);
        plan.confidence = Some(Confidence::asked(
            iterations.map(|(max, min)| (wide(max), wide(min))),
            level_width,
            false,
        )?);
    }
    plan::label_socket_type(&mut plan);
    traffic(t, &mut plan);
    plan::resolve_shape(&mut plan, Shape::default())?;
    plan::finish(&mut plan)?;
    plan.auth = Some(AuthSource::Given(key));
    plan.dialect = DialectChoice::Native;
    // its rate sampled ten times over its length (at most each second):
    // the samples a mesh judges a pair by against an earlier mesh
    if let Length::Seconds(secs) = plan.length
        && secs > 0
        && plan.interim.is_none()
    {
        plan.interim = Some(((secs as f64 / 10.0).clamp(0.1, 1.0), false));
    }
    plan.json = true;
    plan.verbosity = plan.verbosity.min(1);
    Ok(plan)
}

/// The shape of the test's traffic, into the plan.
fn traffic(t: &ThirdPartyTest, plan: &mut Plan) {
    if let Some(v6) = t.ipv6 {
        plan.data_family = if v6 { AddrFamily::V6 } else { AddrFamily::V4 };
    }
    // netperf's sizes: 0 is the default size
    if let Some(n) = t.send_size {
        plan.local.send_size = Some(n).filter(|&n| n > 0);
    }
    if let Some(n) = t.recv_size {
        plan.remote.recv_size = Some(n).filter(|&n| n > 0);
    }
    for (side, (send, recv)) in [
        (&mut plan.local, t.local_bufs),
        (&mut plan.remote, t.remote_bufs),
    ] {
        if send.is_some() {
            side.send_buf = send;
        }
        if recv.is_some() {
            side.recv_buf = recv;
        }
    }
    if let Some(q) = t.rr_size.0 {
        plan.request_size = q;
        plan.request_size_given = true;
    }
    if let Some(r) = t.rr_size.1 {
        plan.response_size = r;
    }
    plan.burst = t.burst;
    if t.nodelay {
        plan.local.nodelay = true;
        plan.remote.nodelay = true;
    }
    if t.cong_control != (None, None) {
        if plan.name.takes_omni_options() {
            plan.local.cong_control.clone_from(&t.cong_control.0);
            plan.remote.cong_control.clone_from(&t.cong_control.1);
        } else {
            // netperf 2.7's classic TCP_CC has no -K: it reads it as -4
            plan.warnings.push(format!(
                "warning: -K is not an option of {}, ignored (netperf 2.7 reads it as -4)",
                plan.name
            ));
            plan.data_family = AddrFamily::V4;
        }
    }
    // (1 to proto's THIRD_PARTY_MAX_FLOWS, fewer than a plan's MAX_FLOWS,
    // as the request's check held)
    plan.flows = t.flows;
    if plan.name == TestName::Rpm && t.flows != 1 {
        plan.rpm = Some(UnderLoad {
            flows: t.flows,
            ramp: false,
            ..plan::RPM_LOAD
        });
    }
    plan.rate_bps = t.rate_bps;
    if t.one_way {
        plan.one_way = OneWayAsk::Asked;
    }
    plan.window = t.window;
}

/// netperf's words for the typed test alone (what a log or a record
/// shows of a request).
pub fn test_words(t: &ThirdPartyTest) -> Vec<String> {
    let mut w: Vec<String> = vec![
        "-t".into(),
        t.test.name().into(),
        "-l".into(),
        match t.length {
            ThirdPartyLength::Seconds(s) => s.to_string(),
            ThirdPartyLength::Count(n) => format!("-{n}"),
        },
    ];
    let pair = |(a, b): (Option<String>, Option<String>)| -> Option<String> {
        (a.is_some() || b.is_some())
            .then(|| format!("{},{}", a.unwrap_or_default(), b.unwrap_or_default()))
    };
    let text =
        |p: (Option<u32>, Option<u32>)| (p.0.map(|x| x.to_string()), p.1.map(|x| x.to_string()));
    let push = |w: &mut Vec<String>, opt: &str, v: Option<String>| {
        if let Some(v) = v {
            w.push(opt.into());
            w.push(v);
        }
    };
    push(&mut w, "-i", pair(text(t.iterations)));
    push(
        &mut w,
        "-I",
        pair((
            t.confidence.0.map(|x| x.to_string()),
            t.confidence.1.map(|x| x.to_string()),
        )),
    );
    w.push("--".into());
    if let Some(v6) = t.ipv6 {
        w.push(if v6 { "-6" } else { "-4" }.into());
    }
    push(&mut w, "-m", t.send_size.map(|n| n.to_string()));
    push(&mut w, "-M", t.recv_size.map(|n| n.to_string()));
    push(&mut w, "-s", pair(text(t.local_bufs)));
    push(&mut w, "-S", pair(text(t.remote_bufs)));
    push(&mut w, "-r", pair(text(t.rr_size)));
    push(&mut w, "-b", (t.burst > 0).then(|| t.burst.to_string()));
    if t.nodelay {
        w.push("-D".into());
    }
    push(&mut w, "-K", pair(t.cong_control.clone()));
    push(
        &mut w,
        "--flows",
        (t.flows != 1).then(|| t.flows.to_string()),
    );
    push(&mut w, "--rate", t.rate_bps.map(|r| r.to_string()));
    if t.one_way {
        w.push("--one-way".into());
    }
    if let Some(win) = t.window {
        push(&mut w, "--warmup", Some(ms_as_secs(win.warmup_ms)));
        push(&mut w, "--cooldown", Some(ms_as_secs(win.cooldown_ms)));
    }
    w
}

fn ms_as_secs(ms: u32) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
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
