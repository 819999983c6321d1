//! What a netserver's policy allows one test (`netserver --policy`), told
//! in its hello ([`proto::ServerLimits`]): the plan fitted to it before
//! the first request, each change said on stderr, or the run refused with
//! the reason before anything is asked. A netserver that tells no limits
//! (netperf 2.7's, ours without a policy) leaves the plan as it is.

use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use proto::{LimitsAsked, OverLimit, ServerLimits, TestKind};

use crate::plan::{Length, Plan};

/// `plan` fitted to `limits`, and what was changed, one line each.
pub fn fit(plan: &Plan, limits: ServerLimits) -> Result<(Plan, Vec<String>)> {
    let mut p = plan.clone();
    let mut notes = Vec::new();
    let load = p.under_load.or(p.rpm);
    if let Some(max) = limits.max_flows
        && let Some(l) = load.filter(|l| l.flows > max)
    {
        bail!(
            "the netserver allows at most {max} flows a test: the load asks {}",
            l.flows
        );
    }
    if let (Some(max), Some(_)) = (limits.max_rate, load) {
        bail!(
            "the netserver limits a test to {max} bits/s, and a load must fill the path: {} cannot run against it",
            if p.rpm.is_some() {
                "-t RPM"
            } else {
                "--under-load"
            }
        );
    }
    // a window's warmup and cooldown run beside the measured seconds: the
    // netserver counts them in the test's length
    let extra = match (p.length, p.window) {
        (Length::Seconds(s), Some(w)) if s > 0 => {
            w.total(Duration::from_secs(s)).as_secs_f64().ceil() as u64 - s
        }
        _ => 0,
    };
    let asked = LimitsAsked {
        seconds: match p.length {
            Length::Seconds(s) if s > 0 => Some(s + extra),
            Length::Seconds(s) => Some(s),
            Length::Count(_) => None,
        },
        flows: p.flows,
        client_sends: matches!(p.test, TestKind::TcpStream | TestKind::UdpStream),
        server_sends: matches!(p.test, TestKind::TcpMaerts | TestKind::UdpMaerts),
        rate_bps: p.rate_bps,
    };
    let fit = limits.fit(asked).map_err(|e| match e {
        OverLimit::Counted { max } => anyhow!(
            "the netserver limits tests to {max} s, which a count (-l -N) cannot promise: give -l a length in seconds"
        ),
        OverLimit::TooManyFlows { max, asked } => anyhow!(
            "the netserver allows at most {max} flows a test: --flows {asked} asked"
        ),
    })?;
    if let (Some(s), Some(max)) = (asked.seconds, fit.seconds)
        && s != max
    {
        if max <= extra {
            bail!(
                "the netserver limits tests to {max} s, which --warmup and --cooldown alone fill ({extra} s)"
            );
        }
        let asked = if s == 0 {
            "until interrupted".to_string()
        } else {
            format!("{s} s asked")
        };
        let window = if extra > 0 {
            format!(", with {extra} s of --warmup and --cooldown")
        } else {
            String::new()
        };
        notes.push(format!(
            "the netserver limits tests to {max} s: this one runs {max} s{window} ({asked})"
        ));
        p.length = Length::Seconds(max - extra);
    }
    if let Some(max) = fit.rate_bps
        && fit.rate_bps != p.rate_bps
    {
        notes.push(if asked.server_sends {
            format!("the netserver limits a test to {max} bits/s: it paces what it sends at that")
        } else {
            format!(
                "the netserver limits a test to {max} bits/s: this one is paced at it ({})",
                p.rate_bps
                    .map_or_else(|| "unpaced asked".to_string(), |r| format!("{r} asked"))
            )
        });
        p.rate_bps = Some(max);
    }
    Ok((p, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::UnderLoad;

    fn plan(test: TestKind, secs: u64) -> Plan {
        let mut p = Plan::new("netperf".into());
        p.test = test;
        p.length = Length::Seconds(secs);
        p
    }

    const LIMITS: ServerLimits = ServerLimits {
        max_seconds: Some(30),
        max_flows: Some(4),
        max_rate: Some(10_000_000),
    };

    /// The netserver counts a window's warmup and cooldown in the test's
    /// length: the measured seconds are shortened so that all of it fits.
    #[test]
    fn a_window_counts_in_the_length() {
        let mut p = plan(TestKind::TcpRr, 30);
        p.window = Some(proto::Window {
            warmup_ms: 5_000,
            cooldown_ms: 1_500,
        });
        let (fitted, notes) = fit(&p, LIMITS).unwrap();
        assert_eq!(fitted.length, Length::Seconds(23));
        assert_eq!(
            notes,
            [
                "the netserver limits tests to 30 s: this one runs 30 s, with 7 s of --warmup and --cooldown (37 s asked)"
            ]
        );
        p.length = Length::Seconds(20);
        assert_eq!(fit(&p, LIMITS).unwrap().0.length, Length::Seconds(20));
        p.window = Some(proto::Window {
            warmup_ms: 40_000,
            cooldown_ms: 0,
        });
        assert!(
            fit(&p, LIMITS)
                .unwrap_err()
                .to_string()
                .contains("alone fill")
        );
    }

    #[test]
    fn a_long_test_is_shortened_and_said() {
        let (p, notes) = fit(&plan(TestKind::TcpRr, 60), LIMITS).unwrap();
        assert_eq!(p.length, Length::Seconds(30));
        assert_eq!(
            notes,
            ["the netserver limits tests to 30 s: this one runs 30 s (60 s asked)"]
        );
        let (p, notes) = fit(&plan(TestKind::TcpRr, 10), LIMITS).unwrap();
        assert_eq!((p.length, notes.len()), (Length::Seconds(10), 0));
        let (p, _) = fit(&plan(TestKind::TcpRr, 0), LIMITS).unwrap();
        assert_eq!(p.length, Length::Seconds(30));
        let mut count = plan(TestKind::TcpRr, 0);
        count.length = Length::Count(1000);
        let e = fit(&count, LIMITS).unwrap_err().to_string();
        assert!(e.contains("a count (-l -N) cannot promise"), "{e}");
    }

    #[test]
    fn too_many_flows_are_refused_by_name() {
        let mut p = plan(TestKind::TcpStream, 10);
        p.flows = 8;
        let e = fit(&p, LIMITS).unwrap_err().to_string();
        assert_eq!(
            e,
            "the netserver allows at most 4 flows a test: --flows 8 asked"
        );
        let mut l = plan(TestKind::TcpRr, 10);
        l.under_load = Some(UnderLoad {
            flows: 8,
            ramp: false,
            up: true,
            down: false,
        });
        let open = ServerLimits {
            max_rate: None,
            ..LIMITS
        };
        assert!(
            fit(&l, open)
                .unwrap_err()
                .to_string()
                .contains("the load asks 8")
        );
    }

    #[test]
    fn a_stream_is_paced_at_the_rate() {
        let (p, notes) = fit(&plan(TestKind::UdpStream, 10), LIMITS).unwrap();
        assert_eq!(p.rate_bps, Some(10_000_000));
        assert!(
            notes[0].contains("paced at it (unpaced asked)"),
            "{notes:?}"
        );
        let mut slow = plan(TestKind::TcpStream, 10);
        slow.rate_bps = Some(1_000_000);
        let (p, notes) = fit(&slow, LIMITS).unwrap();
        assert_eq!((p.rate_bps, notes.len()), (Some(1_000_000), 0));
        let (p, notes) = fit(&plan(TestKind::TcpMaerts, 10), LIMITS).unwrap();
        assert_eq!(p.rate_bps, Some(10_000_000));
        assert!(notes[0].contains("paces what it sends"), "{notes:?}");
        // request/response is not paced
        let (p, _) = fit(&plan(TestKind::TcpRr, 10), LIMITS).unwrap();
        assert_eq!(p.rate_bps, None);
    }

    #[test]
    fn no_limits_change_nothing() {
        let mut p = plan(TestKind::TcpStream, 0);
        p.length = Length::Count(5);
        p.flows = 1000;
        let (q, notes) = fit(&p, ServerLimits::default()).unwrap();
        assert_eq!((q.length, q.flows, notes.len()), (p.length, 1000, 0));
    }
}
