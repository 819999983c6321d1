//! `netperf mesh`'s command line.

use std::{net::ToSocketAddrs, path::PathBuf};

use anyhow::{Context as _, Result, anyhow, bail};

/// The usage text.
pub const USAGE: &str = "\
Usage: netperf mesh (--hosts H1,H2,... | --hosts-from NAME | --pairs FILE) [options] [-- test options]

Runs a test between every ordered pair of netservers started with --fleet,
each test run by the sending netserver itself, in rounds in which no host
is in two tests at once.

  --hosts H1,H2,...      the netservers (a name or address, :PORT or [V6]:PORT to
                         name a port other than -p's)
  --hosts-from NAME      every address NAME resolves to (a Kubernetes headless
                         Service's pods)
  --pairs FILE           only these pairs: a line `FROM TO` each (names of
                         --hosts, or their 0-based numbers; with no --hosts, the
                         names the file uses)
  --pattern P            mesh (every ordered pair, the default), incast:HOST
                         (every other host sends to HOST at once), fanout:HOST
  --both                 run each pair's two directions at once, as one round
  -t TEST                TCP_STREAM (the default), TCP_MAERTS, UDP_STREAM, TCP_RR,
                         UDP_RR, TCP_CRR, RPM, OMNI ...
  -l SECS                each test's length (default 10)
  -i MAX,MIN, -I LVL,W   each pair a confidence run, as netperf's -i and -I
  -p PORT                the netservers' control port (default 12865)
  --key-file FILE        the fleet's key (the netservers' --key-file)
  --timeout SECS         slack past a test's length before it counts as failed
                         (default 30)
  --json FILE            every pair's whole result, its round, start and end, and
                         the outliers
  --csv FILE             a line a pair
  --plot FILE.svg        a heatmap
  --baseline OLD.json    each pair judged against the same pair of an earlier mesh's
                         --json by netperf compare's rule: the pairs that changed
                         beyond the noise named under the matrix and in --json's
                         changes; exit status as compare's (0 same, 1 slower,
                         2 faster, 3 unknown or not measured, 4 and up errors)
  --effect PCT           the smallest change --baseline names (default 10)
  --push URL             the results pushed to a Prometheus Pushgateway
                         (http://HOST:PORT): a gauge a pair, the changes, the
                         mesh's duration and its hosts down
  -h, --help             this text

A host that stops answering is asked again after each round; when it
answers again, its pairs run at the end (no host in two tests at once).
";

/// One netserver of the mesh.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// As given (the matrix's label).
    pub name: String,
    /// The name or address a netserver connects to.
    pub addr: String,
    pub port: u16,
}

/// Which pairs, in which rounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    Mesh,
    Incast(String),
    Fanout(String),
}

/// What one `netperf mesh` asks.
#[derive(Clone, Debug)]
pub struct MeshOptions {
    pub hosts: Vec<Host>,
    pub pairs_file: Option<PathBuf>,
    pub pattern: Pattern,
    pub both: bool,
    pub test: String,
    pub length: u32,
    pub key_file: Option<PathBuf>,
    pub timeout: u32,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    /// netperf's global options a pair's test takes too (`-i`, `-I`).
    pub global_options: Vec<String>,
    /// netperf's test options, after `--`.
    pub test_options: Vec<String>,
    /// `--baseline`: an earlier mesh's `--json` document.
    pub baseline: Option<PathBuf>,
    /// `--effect`: the smallest change `--baseline` names (a fraction).
    pub effect: f64,
    /// `--push`: a Prometheus Pushgateway's URL.
    pub push: Option<String>,
}

/// What the command line asks: a mesh, or its help.
#[derive(Debug)]
pub enum Asked {
    Help,
    Run(Box<MeshOptions>),
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address.
pub fn host(word: &str, port: u16) -> Result<Host> {
    let (addr, port) = if let Some(rest) = word.strip_prefix('[') {
        let (a, tail) = rest
            .split_once(']')
            .ok_or_else(|| anyhow!("--hosts: '{word}' opens a '[' it does not close"))?;
        match tail.strip_prefix(':') {
            Some(p) => (a.to_string(), parse_port(p, word)?),
            None if tail.is_empty() => (a.to_string(), port),
            None => bail!("--hosts: '{word}': what follows ']' is not :PORT"),
        }
    } else if word.matches(':').count() == 1 {
        let (a, p) = word.split_once(':').unwrap_or((word, ""));
        (a.to_string(), parse_port(p, word)?)
    } else {
        (word.to_string(), port)
    };
    if addr.is_empty() {
        bail!("--hosts: an empty host name");
    }
    Ok(Host {
        name: word.to_string(),
        addr,
        port,
    })
}

fn parse_port(p: &str, word: &str) -> Result<u16> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("--hosts: '{word}': '{p}' is not a port (1-65535)"),
    }
}

fn number(opt: &str, v: &str, least: u32) -> Result<u32> {
    match v.parse::<u32>() {
        Ok(n) if n >= least => Ok(n),
        _ => bail!("{opt}: '{v}' is not a whole number of at least {least}"),
    }
}

/// Parse `netperf mesh`'s arguments (after the word `mesh`).
pub fn parse(args: &[String]) -> Result<Asked> {
    let mut o = MeshOptions {
        hosts: Vec::new(),
        pairs_file: None,
        pattern: Pattern::Mesh,
        both: false,
        test: "TCP_STREAM".into(),
        length: 10,
        key_file: None,
        timeout: 30,
        json: None,
        csv: None,
        plot: None,
        global_options: Vec::new(),
        test_options: Vec::new(),
        baseline: None,
        effect: super::baseline::DEFAULT_EFFECT,
        push: None,
    };
    let (mut hosts, mut from_dns, mut port) = (None::<String>, None::<String>, 12865u16);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |opt: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| anyhow!("{opt}: needs a value"))
        };
        match a.as_str() {
            "-h" | "--help" => return Ok(Asked::Help),
            "--hosts" => hosts = Some(value(a)?),
            "--hosts-from" => from_dns = Some(value(a)?),
            "--pairs" => o.pairs_file = Some(PathBuf::from(value(a)?)),
            "--pattern" => o.pattern = pattern(&value(a)?)?,
            "--both" => o.both = true,
            "-t" => o.test = value(a)?,
            "-l" => o.length = number(a, &value(a)?, 1)?,
            "-p" => port = parse_port(&value(a)?, "-p")?,
            "--key-file" => o.key_file = Some(PathBuf::from(value(a)?)),
            "--timeout" => o.timeout = number(a, &value(a)?, 1)?,
            "--json" => o.json = Some(PathBuf::from(value(a)?)),
            "--csv" => o.csv = Some(PathBuf::from(value(a)?)),
            "--plot" => o.plot = Some(PathBuf::from(value(a)?)),
            "--baseline" => o.baseline = Some(PathBuf::from(value(a)?)),
            "--effect" => o.effect = crate::compare::effect(&value(a)?)?,
            "--push" => {
                let v = value(a)?;
                super::push::Target::parse(&v)?;
                o.push = Some(v);
            }
            // a confidence run of each pair, as netperf takes it
            "-i" | "-I" => {
                let v = value(a)?;
                o.global_options.extend([a.clone(), v]);
            }
            "--" => {
                o.test_options = it.by_ref().cloned().collect();
            }
            other => {
                bail!("mesh: '{other}' is not an option of netperf mesh (netperf mesh --help)")
            }
        }
    }
    if let Some(list) = hosts {
        for w in list.split(',').filter(|w| !w.is_empty()) {
            o.hosts.push(host(w, port)?);
        }
    }
    if let Some(name) = from_dns {
        o.hosts.extend(resolve_all(&name, port)?);
    }
    if o.hosts.is_empty() && o.pairs_file.is_none() {
        bail!("mesh: which netservers? --hosts H1,H2,..., --hosts-from NAME or --pairs FILE");
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(h) = o
        .hosts
        .iter()
        .find(|h| !seen.insert((h.addr.clone(), h.port)))
    {
        bail!("--hosts: '{}' is named twice", h.name);
    }
    Ok(Asked::Run(Box::new(o)))
}

fn pattern(v: &str) -> Result<Pattern> {
    match v.split_once(':') {
        None if v == "mesh" => Ok(Pattern::Mesh),
        Some(("incast", h)) if !h.is_empty() => Ok(Pattern::Incast(h.to_string())),
        Some(("fanout", h)) if !h.is_empty() => Ok(Pattern::Fanout(h.to_string())),
        _ => bail!("--pattern: '{v}' is not mesh, incast:HOST or fanout:HOST"),
    }
}

/// Every address `name` resolves to, sorted (a headless Service's pods).
fn resolve_all(name: &str, port: u16) -> Result<Vec<Host>> {
    let mut addrs: Vec<std::net::IpAddr> = (name, port)
        .to_socket_addrs()
        .with_context(|| format!("--hosts-from: cannot resolve '{name}'"))?
        .map(|a| a.ip())
        .collect();
    addrs.sort();
    addrs.dedup();
    if addrs.is_empty() {
        bail!("--hosts-from: '{name}' has no address");
    }
    Ok(addrs
        .into_iter()
        .map(|ip| Host {
            name: ip.to_string(),
            addr: ip.to_string(),
            port,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hosts_ports_and_test_options() {
        let Asked::Run(o) = parse(&args(&[
            "--hosts",
            "a,b:9000,[2001:2::1]:7,2001:2::2",
            "-t",
            "TCP_RR",
            "-l",
            "3",
            "-I",
            "99,5",
            "--",
            "-r",
            "1,1",
        ]))
        .expect("parsed") else {
            panic!("not a run");
        };
        let got: Vec<(&str, u16)> = o.hosts.iter().map(|h| (h.addr.as_str(), h.port)).collect();
        assert_eq!(
            got,
            [
                ("a", 12865),
                ("b", 9000),
                ("2001:2::1", 7),
                ("2001:2::2", 12865)
            ]
        );
        assert_eq!((o.test.as_str(), o.length), ("TCP_RR", 3));
        assert_eq!(o.test_options, ["-r", "1,1"]);
        assert_eq!(o.global_options, ["-I", "99,5"]);
    }

    #[test]
    fn bad_words_are_named() {
        for (a, word) in [
            (&["--hosts", "a,a"][..], "named twice"),
            (&["--hosts", "a:0"][..], "not a port"),
            (&["--hosts", "a", "--pattern", "ring"][..], "--pattern"),
            (&["--hosts", "a", "-l", "0"][..], "-l"),
            (&["--frobnicate"][..], "--frobnicate"),
            (&[][..], "which netservers"),
        ] {
            let e = parse(&args(a)).expect_err("refused").to_string();
            assert!(e.contains(word), "{a:?}: {e}");
        }
    }
}
