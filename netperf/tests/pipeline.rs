//! The run pipeline (iterations, confidence, every output) driven by a
//! fake source of measurements: no socket, no netserver. Known
//! measurements go in; what each output prints is checked against
//! netperf 2.7's lines and figures computed by hand.

use std::{
    io::Write,
    sync::{Arc, Mutex},
};

use netperf::{
    cli::{Invocation, Plan},
    family::Context,
    output::{Out, Server},
    report::{Measurement, Sample, Side},
    run::{Source, drive},
};
use proto::{SideResults, TestSpec};

/// The measurements a fake netserver hands out, one an iteration, in turn;
/// each iteration's interim samples are told to the run's observers as a
/// data phase would.
struct Fake(Vec<Measurement>, usize);

impl Source for Fake {
    fn server(&self) -> Server {
        Server {
            local: "127.0.0.1:40000".parse().unwrap(),
            remote: "127.0.0.1:12865".parse().unwrap(),
            software: "a fake netserver".into(),
            embedded: false,
        }
    }

    fn preflight(&mut self, plan: &Plan) -> anyhow::Result<TestSpec> {
        netperf::family::spec_for(plan, proto::Family::V4)
    }

    fn measure(&mut self, plan: &Plan, ctx: &Context) -> anyhow::Result<Measurement> {
        let mut m = self.0[self.1 % self.0.len()].clone();
        self.1 += 1;
        (m.local.asked, m.remote.asked) = (plan.local.clone(), plan.remote.clone());
        for s in &m.interim {
            for o in &ctx.observers {
                o.sample(s);
            }
        }
        Ok(m)
    }
}

/// What was printed into a buffer.
#[derive(Clone, Default)]
struct Printed(Arc<Mutex<Vec<u8>>>);

impl Write for Printed {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Run `words` (a command line without the program's name) over `runs`:
/// what it printed on stdout.
fn run(words: &str, runs: Vec<Measurement>) -> String {
    let args: Vec<String> = words.split_whitespace().map(String::from).collect();
    let Ok(Invocation::Run(plan)) = netperf::cli::parse(&args) else {
        panic!("{words}: no run");
    };
    // the program's pictures, as its main hands them to the library
    netperf::run::set_plotter(netperf::plot::reporter);
    netperf::run::set_tables(netperf::output::tables);
    let printed = Printed::default();
    drive(
        &plan,
        &mut Fake(runs, 0),
        Vec::new(),
        &Out::to(printed.clone()),
    )
    .unwrap();
    String::from_utf8(printed.0.lock().unwrap().clone()).unwrap()
}

/// A TCP_STREAM iteration of `secs` seconds in which the netserver
/// received `bytes`, with netperf 2.7's default buffers.
fn stream(bytes: u64, secs: f64) -> Measurement {
    let side = |counts| Side {
        counts,
        send_buf: 16384,
        recv_buf: 131072,
        send_size: 16384,
        recv_size: 131072,
        ..Side::default()
    };
    Measurement {
        elapsed: secs,
        local: side(SideResults {
            bytes_sent: bytes,
            send_calls: bytes / 16384,
            ..SideResults::default()
        }),
        remote: side(SideResults {
            bytes_received: bytes,
            recv_calls: bytes / 65536,
            ..SideResults::default()
        }),
        mss: Some(65483),
        ..Measurement::default()
    }
}

/// Three iterations of 1 s at 100, 110 and 120 10^6bits/s.
fn three() -> Vec<Measurement> {
    [12_500_000, 13_750_000, 15_000_000]
        .into_iter()
        .map(|b| stream(b, 1.0))
        .collect()
}

const STREAM_BANNER: &str = "MIGRATED TCP STREAM TEST from 0.0.0.0 (0.0.0.0) port 0 AF_INET to localhost (127.0.0.1) port 0 AF_INET : demo\n";

/// The classic table at -v 1: netperf 2.7's banner, titles and row.
#[test]
fn classic_stream_table_is_netperfs() {
    // 11436.35 10^6bits/s over 10 s
    let out = run("-t TCP_STREAM", vec![stream(14_295_437_500, 10.0)]);
    assert_eq!(
        out,
        format!(
            "{STREAM_BANNER}\
Recv   Send    Send                          \n\
Socket Socket  Message  Elapsed              \n\
Size   Size    Size     Time     Throughput  \n\
bytes  bytes   bytes    secs.    10^6bits/sec  \n\
\n\
131072  16384  16384    10.00    11436.35   \n"
        )
    );
}

/// -v 0 prints the figure alone, -v 2 netperf's block about the calls.
#[test]
fn classic_verbosity_0_and_2() {
    assert_eq!(
        run(
            "-t TCP_STREAM -P 0 -v 0",
            vec![stream(14_295_437_500, 10.0)]
        ),
        "11436.35 \n"
    );
    let out = run("-t TCP_STREAM -P 0 -v 2", vec![stream(1_638_400, 1.0)]);
    assert!(
        out.starts_with("131072  16384  16384    1.00       13.11   \n"),
        "{out}"
    );
    // 100 sends of 16384 bytes; 25 receives of 65536 at the netserver
    assert!(
        out.contains(
            "    8       8      0       0 1638400  16384.00       100   65536.00     25\n"
        ),
        "{out}"
    );
    assert!(out.ends_with("Size (bytes)\n 65483\n"), "{out}");
}

/// A request/response test's classic table.
#[test]
fn classic_rr_table_is_netperfs() {
    let mut m = stream(0, 1.0);
    m.local.transactions = 36552;
    (m.local.send_size, m.local.recv_size) = (1, 1);
    assert_eq!(
        run("-t TCP_RR", vec![m]),
        "MIGRATED TCP REQUEST/RESPONSE TEST from 0.0.0.0 (0.0.0.0) port 0 AF_INET to localhost (127.0.0.1) port 0 AF_INET : demo : first burst 0\n\
Local /Remote\n\
Socket Size   Request  Resp.   Elapsed  Trans.\n\
Send   Recv   Size     Size    Time     Rate         \n\
bytes  Bytes  bytes    bytes   secs.    per sec   \n\n\
16384  131072 1        1       1.00     36552.00   \n\
16384  131072\n"
    );
}

// 100, 110, 120: mean 110, s = 10, s/sqrt(3) = 5.7735; 99%, 2 degrees of
// freedom: t = 9.9248 (any t table), half-width 57.301, the full width
// 104.184% of the mean: not confident within 10% in 3 iterations.
const HALF_WIDTH: f64 = 57.301;

/// Iterations and confidence: the mean is printed, and netperf's warning.
#[test]
fn confidence_runs_print_the_mean_and_netperfs_warning() {
    let out = run("-t TCP_STREAM -P 0 -I 99,10 -i 3,3", three());
    assert_eq!(
        out,
        "!!! WARNING\n\
         !!! Desired confidence was not achieved within the specified iterations.\n\
         !!! This implies that there was variability in the test environment that\n\
         !!! must be investigated before going further.\n\
         !!! Confidence intervals: Throughput      : 104.184%\n\
         !!!                       Local CPU util  : 0.000%\n\
         !!!                       Remote CPU util : 0.000%\n\n\
         131072  16384  16384    1.00      110.00   \n"
    );
    // ours at -v 3: each iteration, and the interval
    let out = run("-t TCP_STREAM -P 0 -v 3 -I 99,10 -i 3,3", three());
    assert!(out.starts_with("Iteration 1: 100.00 10^6bits/sec, elapsed 1.00 s\nIteration 2: 110.00 10^6bits/sec, elapsed 1.00 s\nIteration 3: 120.00 10^6bits/sec, elapsed 1.00 s\n"), "{out}");
    assert!(
        out.ends_with("Confidence: 3 iterations, mean 110.00 10^6bits/sec +/- 57.30 (+/-52.092%) at 99% confidence; not within the requested width\n"),
        "{out}"
    );
}

/// -o, -O and -k.
#[test]
fn selectors_in_three_styles() {
    let out = run(
        "-t TCP_STREAM -I 99,10 -i 3,3 -- -o THROUGHPUT,THROUGHPUT_UNITS",
        three(),
    );
    assert_eq!(
        out,
        format!(
            "{}Throughput,Throughput Units\n110.00,10^6bits/s\n",
            STREAM_BANNER.replace(" : demo", " : +/-5.000% @ 99% conf.  : demo")
        )
    );
    let out = run(
        "-t TCP_STREAM -P 0 -- -O THROUGHPUT,THROUGHPUT_UNITS",
        three(),
    );
    assert_eq!(out, "100.00     10^6bits/s  \n");
    let out = run(
        "-t TCP_STREAM -- -O THROUGHPUT,THROUGHPUT_UNITS",
        vec![stream(13_750_000, 1.0)],
    );
    let blank = " ".repeat(23);
    assert_eq!(
        out,
        format!(
            "{STREAM_BANNER}Throughput Throughput  \n           Units       \n{blank}\n{blank}\n110.00     10^6bits/s  \n"
        )
    );
    let out = run(
        "-t TCP_STREAM -P 0 -I 99,10 -i 3,3 -- -k THROUGHPUT,CONFIDENCE_ITERATION,THROUGHPUT_CONFID,CONFIDENCE_LEVEL,CONFIDENCE_INTERVAL,LOCAL_SEND_SIZE,REQUEST_SIZE",
        three(),
    );
    assert_eq!(
        out,
        "THROUGHPUT=110.00\nCONFIDENCE_ITERATION=3\nTHROUGHPUT_CONFID=104.184\nCONFIDENCE_LEVEL=99\nCONFIDENCE_INTERVAL=10.000000\nLOCAL_SEND_SIZE=16384\nREQUEST_SIZE=-1\n"
    );
}

/// --json: the mean, every iteration, the verdict, the options in force.
#[test]
fn json_document() {
    let doc: serde_json::Value =
        serde_json::from_str(&run("-t TCP_STREAM -I 99,10 -i 3,3 --json", three())).unwrap();
    assert_eq!(doc["schema"], "rsnetperf-result/1");
    assert_eq!(doc["test"], "TCP_STREAM");
    assert_eq!(doc["result"]["value"], 110.0);
    assert_eq!(doc["result"]["units"], "10^6bits/s");
    let values: Vec<f64> = doc["iterations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["value"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [100.0, 110.0, 120.0]);
    let c = &doc["confidence"];
    assert_eq!(
        (c["iterations"].as_u64(), c["confident"].as_bool()),
        (Some(3), Some(false))
    );
    assert_eq!(c["mean"], 110.0);
    assert!(
        (c["half_width"].as_f64().unwrap() - HALF_WIDTH).abs() < 1e-3,
        "{c}"
    );
    assert_eq!(doc["options"]["length_seconds"], 10);
    assert_eq!(doc["options"]["max_iterations"], 3);
    assert_eq!(doc["options"]["local"]["send_align"], 8);
    assert_eq!(doc["control"]["server_software"], "a fake netserver");
    // the last iteration's counters
    assert_eq!(doc["remote"]["bytes_received"], 15_000_000);
}

/// --json-stream: start, each interim sample (numbered by its iteration)
/// and iteration, and the end holding the --json document.
#[test]
fn json_stream_lines() {
    let mut runs = three();
    for (i, m) in runs.iter_mut().enumerate() {
        m.interim = vec![Sample {
            index: i as u32,
            rate: 100.0,
            units: "10^6bits/s".into(),
            interval: 1.0,
            ending: 1_700_000_000.042,
            bytes: 12_500_000,
            calls: 763,
            flows: Vec::new(),
            tcp: Vec::new(),
        }];
    }
    let out = run("-t TCP_STREAM -I 99,10 -i 3,3 --json-stream", runs);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<String> = lines
        .iter()
        .map(|l| format!("{}{}", l["event"].as_str().unwrap(), l["iteration"]))
        .collect();
    assert_eq!(
        events,
        [
            "startnull",
            "interim1",
            "iteration1",
            "interim2",
            "iteration2",
            "interim3",
            "iteration3",
            "endnull"
        ]
    );
    assert_eq!(lines[2]["value"], 100.0);
    assert_eq!(lines[2]["units"], "10^6bits/s");
    let doc = &lines[7]["document"];
    assert_eq!(doc["result"]["value"], 110.0);
    assert_eq!(doc["interim"].as_array().unwrap().len(), 3);
}

/// -D: netperf's interim lines, as the samples come.
#[test]
fn interim_lines() {
    let mut m = stream(12_500_000, 1.0);
    m.interim = vec![Sample {
        index: 0,
        rate: 9412.5,
        units: "10^6bits/s".into(),
        interval: 0.2003,
        ending: 1_700_000_000.042,
        bytes: 0,
        calls: 0,
        flows: Vec::new(),
        tcp: Vec::new(),
    }];
    let out = run("-t TCP_STREAM -P 0 -D 0.2", vec![m.clone()]);
    assert_eq!(
        out,
        "Interim result: 9412.50 10^6bits/s over 0.200 seconds ending at 1700000000.042\n131072  16384  16384    1.00      100.00   \n"
    );
    let out = run("-t TCP_STREAM -P 0 -D 0.2 -- -k THROUGHPUT", vec![m]);
    assert_eq!(
        out,
        "NETPERF_INTERIM_RESULT[0]=9412.50\nNETPERF_UNITS[0]=10^6bits/s\nNETPERF_INTERVAL[0]=0.200\nNETPERF_ENDING[0]=1700000000.042\nTHROUGHPUT=100.00\n"
    );
}

/// --plot: the picture is drawn beside the table, in a scaled unit.
#[test]
fn plot_beside_the_table() {
    let svg = std::env::temp_dir().join(format!("pipeline-{}.svg", std::process::id()));
    let words = format!(
        "-t TCP_STREAM -P 0 -I 99,10 -i 3,3 --plot {}",
        svg.display()
    );
    let out = run(&words, three());
    assert!(
        out.ends_with("131072  16384  16384    1.00      110.00   \n"),
        "{out}"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let _ = std::fs::remove_file(&svg);
    assert!(text.contains("Result of each iteration"));
    assert!(text.contains("Mbit/s"), "the unit scaled to the figures");
    assert_eq!(
        text.matches("<circle").count(),
        3 + 1,
        "a dot an iteration, and the legend's"
    );
}
