//! `netperf mesh`'s test words (`-t`, `-l`, `-i`, `-I`, the options after
//! `--`) as the typed third-party request a netserver runs
//! ([`proto::ThirdPartyTest`]), each read as netperf reads it. An option a
//! third-party test cannot take is refused by name here, before any
//! netserver is asked; the netserver makes its plan from the typed value
//! alone ([`client::third_party::plan`]).

use anyhow::{Result, anyhow, bail};
use optparse::value;
use proto::{ThirdPartyKind, ThirdPartyLength, ThirdPartyTest};

/// The options after `--` a third-party test takes.
const TEST_OPTIONS: &str =
    "-m, -M, -s, -S, -r, -b, -D, -K, -4, -6, --flows, --rate, --one-way, --warmup, --cooldown";

/// The typed request for `test` of `length` seconds (negative: a count,
/// as `-l`), with netperf's global options `global` (`-i`, `-I`) and its
/// test options `options` (after `--`), each read as netperf reads it. An
/// option a third-party test cannot take is refused by name: nothing
/// else can be carried.
pub fn request(
    test: &str,
    length: i64,
    global: &[String],
    options: &[String],
) -> Result<ThirdPartyTest> {
    let Some(kind) = ThirdPartyKind::from_name(test) else {
        bail!(
            "-t {test}: a third-party test is one of {}",
            ThirdPartyKind::ALL.map(ThirdPartyKind::name).join(", ")
        );
    };
    let mut t = ThirdPartyTest {
        test: kind,
        length: match u64::try_from(length) {
            Ok(s) => ThirdPartyLength::Seconds(u32::try_from(s).unwrap_or(u32::MAX)),
            Err(_) => ThirdPartyLength::Count(length.unsigned_abs()),
        },
        ..ThirdPartyTest::default()
    };
    let g = optparse::parse(super::global::OPTIONS, global).map_err(|e| anyhow!("{e}"))?;
    for occ in &g.options {
        let v = occ.value.as_deref().unwrap_or("");
        match occ.id {
            "iterations" => t.iterations = pair_of(&occ.spelled, v, int)?,
            "confidence" => t.confidence = pair_of(&occ.spelled, v, float)?,
            _ => bail!(
                "{}: a third-party test takes -i and -I of netperf's global options",
                occ.spelled
            ),
        }
    }
    let o = optparse::parse(super::test_opts::OPTIONS, options).map_err(|e| anyhow!("{e}"))?;
    for occ in &o.options {
        test_option(
            &mut t,
            &occ.spelled,
            occ.id,
            occ.value.as_deref().unwrap_or(""),
        )?;
    }
    t.check().map_err(|e| anyhow!(e))?;
    Ok(t)
}

/// One test option into the typed request, or why it cannot be one.
fn test_option(t: &mut ThirdPartyTest, o: &str, id: &str, v: &str) -> Result<()> {
    match id {
        "send_size" => t.send_size = Some(size(o, v)?),
        "recv_size" => t.recv_size = Some(size(o, v)?),
        "local_bufs" => t.local_bufs = pair_of(o, v, buffer)?,
        "remote_bufs" => t.remote_bufs = pair_of(o, v, buffer)?,
        "rr_size" => t.rr_size = pair_of(o, v, |o, x| size(o, x).map(Some))?,
        "burst" => t.burst = int(o, v)?.unwrap_or(0),
        "nodelay" => t.nodelay = true,
        "cong_control" => {
            let (l, r) = value::pair(v);
            t.cong_control = (l.map(str::to_string), r.map(str::to_string));
        }
        "ipv4" => t.ipv6 = Some(false),
        "ipv6" => t.ipv6 = Some(true),
        "flows" => t.flows = int(o, v)?.unwrap_or(1),
        "rate" => {
            t.rate_bps = Some(value::bits_per_second(v).map_err(|e| anyhow!("{o}: {e}"))?);
        }
        "one_way" => t.one_way = true,
        "warmup" | "cooldown" => {
            let secs = value::float(v).map_err(|e| anyhow!("{o}: {e}"))?;
            if !(0.0..=3600.0).contains(&secs) {
                bail!("{o}: '{v}' is not between 0 and 3600 seconds");
            }
            let ms = (secs * 1000.0).round() as u32;
            let w = t.window.get_or_insert_with(proto::Window::default);
            if id == "warmup" {
                w.warmup_ms = ms;
            } else {
                w.cooldown_ms = ms;
            }
        }
        "data_host" => bail!(
            "-- -H: the test's data goes to the netserver that proved the key, no other address"
        ),
        // a list or a file of selectors: whichever, refused alike, so
        // that the answer says nothing of a host's files
        "keyval" | "csv" | "human" => bail!(
            "-- -o/-O/-k: a third-party test answers with its JSON document; it takes no output selection (a file of the netserver's host or a list)"
        ),
        "local_data" | "data_port" | "port_range" => bail!(
            "-- -L/-- -P/-- -p: a third-party test binds no address or port of the netserver's host"
        ),
        _ => bail!("-- {o}: not an option a third-party test takes (it takes {TEST_OPTIONS})"),
    }
    Ok(())
}

/// A size with netperf's suffixes (`64K`).
fn size(o: &str, v: &str) -> Result<u32> {
    value::u32_size(v).map_err(|e| anyhow!("{o}: {e}"))
}

/// A socket buffer as netperf sets it: 0 or more (a negative one is left
/// as the kernel has it: none asked).
fn buffer(o: &str, v: &str) -> Result<Option<u32>> {
    let n = value::int(v).map_err(|e| anyhow!("{o}: {e}"))?;
    Ok(u32::try_from(n).ok())
}

fn int(o: &str, v: &str) -> Result<Option<u32>> {
    let n = value::int(v).map_err(|e| anyhow!("{o}: {e}"))?;
    Ok(Some(u32::try_from(n.max(0)).unwrap_or(u32::MAX)))
}

fn float(o: &str, v: &str) -> Result<Option<f64>> {
    value::float(v).map(Some).map_err(|e| anyhow!("{o}: {e}"))
}

/// netperf's `a,b` pair (a lone value sets both), each side read by `one`.
fn pair_of<T>(
    o: &str,
    v: &str,
    one: impl Fn(&str, &str) -> Result<Option<T>>,
) -> Result<(Option<T>, Option<T>)> {
    let (a, b) = value::pair(v);
    Ok((
        a.map(|x| one(o, x)).transpose()?.flatten(),
        b.map(|x| one(o, x)).transpose()?.flatten(),
    ))
}

#[cfg(test)]
mod tests {
    use client::third_party::plan;
    use proto::ThirdParty;

    use super::*;
    use crate::cli::{AuthSource, DialectChoice, Invocation};

    fn words_of(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn req(test: ThirdPartyTest) -> ThirdParty {
        ThirdParty {
            host: "198.18.0.2".into(),
            port: 12865,
            test,
        }
    }

    fn key() -> engine::auth::Key {
        engine::auth::Key::from_passphrase("k").expect("a key")
    }

    #[test]
    fn a_test_and_its_options_become_a_keyed_json_plan() {
        let t = request("TCP_RR", 2, &[], &words_of(&["-r", "64,64", "-D"])).unwrap();
        assert_eq!(t.rr_size, (Some(64), Some(64)));
        let p = plan(&req(t), key()).expect("a plan");
        assert_eq!(p.host.as_deref(), Some("198.18.0.2"));
        assert_eq!(p.port, 12865);
        assert!(p.json);
        assert_eq!(p.request_size, 64);
        assert!(p.local.nodelay && p.remote.nodelay);
        assert!(matches!(p.auth, Some(AuthSource::Given(_))));
        assert_eq!(p.dialect, DialectChoice::Native);
    }

    /// What a typed request says is what netperf's words would have said:
    /// the plan from the request equals the plan from the words.
    #[test]
    fn the_typed_request_means_what_netperfs_words_mean() {
        for (test, len, global, opts) in [
            (
                "TCP_STREAM",
                3,
                &[][..],
                &["-m", "16K", "-s", "128K", "-S", ",256K"][..],
            ),
            ("TCP_MAERTS", 1, &[], &["-M", "32K", "--flows", "4", "-6"]),
            ("UDP_STREAM", 1, &[], &["-m", "1024", "--rate", "200m"]),
            (
                "TCP_RR",
                -1000,
                &["-i", "10,3", "-I", "99,5"],
                &["-r", "1,1", "-b", "4"],
            ),
            (
                "TCP_RR",
                5,
                &[],
                &["--one-way", "--warmup", "0.5", "-K", "reno"],
            ),
            // -I alone: 3 to 10 iterations; -i alone: 99% and 5%
            ("TCP_RR", 2, &["-I", "95,10"], &[]),
            ("UDP_RR", 2, &["-i", "5"], &[]),
            ("TCP_CC", 2, &[], &["-K", "reno"]),
        ] {
            let t = request(test, len, &words_of(global), &words_of(opts)).unwrap();
            let typed = plan(&req(t), key()).unwrap();
            let mut all = words_of(&["-H", "198.18.0.2", "-p", "12865", "-t", test, "-l"]);
            all.push(len.to_string());
            all.extend(words_of(global));
            all.push("--".into());
            all.extend(words_of(opts));
            let Ok(Invocation::Run(direct)) = crate::cli::parse(&all) else {
                panic!("{all:?}")
            };
            assert_eq!(
                format!("{:?}", typed.local),
                format!("{:?}", direct.local),
                "{all:?}"
            );
            assert_eq!(
                format!("{:?}", typed.remote),
                format!("{:?}", direct.remote),
                "{all:?}"
            );
            assert_eq!(
                (
                    typed.test,
                    typed.length,
                    typed.flows,
                    typed.rate_bps,
                    typed.burst
                ),
                (
                    direct.test,
                    direct.length,
                    direct.flows,
                    direct.rate_bps,
                    direct.burst
                ),
                "{all:?}"
            );
            assert_eq!(
                (
                    typed.request_size,
                    typed.response_size,
                    typed.window,
                    typed.one_way
                ),
                (
                    direct.request_size,
                    direct.response_size,
                    direct.window,
                    direct.one_way
                ),
                "{all:?}"
            );
            assert_eq!(
                format!("{:?}", typed.confidence),
                format!("{:?}", direct.confidence)
            );
            assert_eq!(typed.data_family, direct.data_family, "{all:?}");
        }
    }

    #[test]
    fn options_that_reach_beyond_the_two_netservers_are_refused_by_name() {
        for (opts, word) in [
            (&["-H", "10.9.9.9"][..], "no other address"),
            (&["-k", "/dev/zero"][..], "-o/-O/-k"),
            (&["-o", "/nonexistent/x"][..], "-o/-O/-k"),
            (&["-O", "THROUGHPUT"][..], "-o/-O/-k"),
            (&["-L", "127.0.0.5"][..], "binds no address"),
            (&["-P", "5000,5001"][..], "binds no address"),
            (&["--observer", "127.0.0.1:9"][..], "--observer"),
            (&["--zerocopy"][..], "--zerocopy"),
        ] {
            let e = request("TCP_STREAM", 1, &[], &words_of(opts))
                .expect_err("refused")
                .to_string();
            assert!(e.contains(word), "{opts:?}: {e}");
        }
        for global in [
            &["-F", "/etc/shadow"][..],
            &["-Z", "x"],
            &["--plot", "x.svg"],
        ] {
            let e = request("TCP_STREAM", 1, &words_of(global), &[])
                .expect_err("refused")
                .to_string();
            assert!(e.contains(global[0]), "{global:?}: {e}");
        }
        let e = request("OMNI", 1, &[], &[])
            .expect_err("refused")
            .to_string();
        assert!(e.contains("TCP_STREAM"), "{e}");
    }

    /// The netserver checks what it is sent: a host that would read as an
    /// option, a name that is no congestion control's, a length of 0.
    #[test]
    fn a_request_out_of_its_bounds_is_refused() {
        let mut bad_host = req(ThirdPartyTest::default());
        bad_host.host = "-Zkey".into();
        let mut bad_cc = req(ThirdPartyTest::default());
        bad_cc.test.cong_control = (Some("reno,-F".into()), None);
        let mut zero = req(ThirdPartyTest::default());
        zero.test.length = ThirdPartyLength::Seconds(0);
        for r in [bad_host, bad_cc, zero] {
            assert!(plan(&r, key()).is_err(), "{r:?}");
        }
    }
}
