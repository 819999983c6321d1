//! netperf's global options: everything before `--`.

use optparse::{Arity, OptDef};

/// Every global option netperf 2.7 takes, with its meaning here. Options
/// netperf only honours in special builds are accepted and have no effect,
/// as in a default netperf build.
pub const OPTIONS: &[OptDef] = &[
    OptDef::value(
        "local_align",
        'a',
        "send,recv",
        "Local send,recv buffer alignment (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "remote_align",
        'A',
        "send,recv",
        "Remote send,recv buffer alignment (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "interval_burst",
        'b',
        "burst",
        "Packets per interval (needs netperf's --enable-intervals; no effect)",
    )
    .hidden(),
    OptDef::value(
        "brand",
        'B',
        "brandstr",
        "Emit this string at the end of brief (-P 0) output",
    ),
    OptDef::flag(
        "local_cpu",
        'c',
        "Report local CPU usage (an optional rate argument is accepted)",
    )
    .with_arity(Arity::OptionalNumeric)
    .with_value_name("rate"),
    OptDef::flag(
        "remote_cpu",
        'C',
        "Report remote CPU usage (an optional rate argument is accepted)",
    )
    .with_arity(Arity::OptionalNumeric)
    .with_value_name("rate"),
    OptDef::flag("debug", 'd', "Increase debugging output"),
    OptDef::value(
        "demo",
        'D',
        "secs[,units]",
        "Display interim results every secs seconds (negative: precise timing)",
    ),
    OptDef::value(
        "format",
        'f',
        "G|M|K|g|m|k|B|b",
        "Output units: bytes (powers of 1024) or bits (powers of 1000)",
    ),
    OptDef::value(
        "fill",
        'F',
        "lfill[,rfill]",
        "Fill send buffers with data from this file",
    ),
    OptDef::flag("help", 'h', "Display this text"),
    OptDef::value(
        "host",
        'H',
        "name|ip[,fam]",
        "The netserver's host, and optionally its address family (4 or 6)",
    ),
    OptDef::value(
        "iterations",
        'i',
        "max,min",
        "Most and fewest iterations for a confidence interval (3 to 30)",
    ),
    OptDef::value(
        "confidence",
        'I',
        "lvl[,width]",
        "Confidence level (50 to 99.9) and interval width in percent",
    ),
    OptDef::flag(
        "histogram",
        'j',
        "Time each send and receive of stream tests too (the _RR tests are always timed)",
    ),
    OptDef::value(
        "local_dirty",
        'k',
        "dirty,clean",
        "Dirty-buffer counts (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "remote_dirty",
        'K',
        "dirty,clean",
        "Dirty-buffer counts (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "length",
        'l',
        "testlen",
        "Test length: seconds (>0), or bytes/transactions/datagrams (<0)",
    ),
    OptDef::value(
        "local_host",
        'L',
        "name|ip[,fam]",
        "Local address and family of the control connection",
    ),
    OptDef::value(
        "num_cpus",
        'n',
        "numcpu",
        "Number of CPUs for CPU utilisation",
    ),
    OptDef::flag("no_control", 'N', "No control connection (not supported)"),
    OptDef::value(
        "local_offset",
        'o',
        "send,recv",
        "Local buffer offsets (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "remote_offset",
        'O',
        "send,recv",
        "Remote buffer offsets (accepted; no effect)",
    )
    .hidden(),
    OptDef::value(
        "port",
        'p',
        "port[,lport]",
        "netserver's control port (12865), and our local control port",
    ),
    OptDef::value("headers", 'P', "0|1", "Don't/do display test headers"),
    OptDef::flag(
        "result_confidence_only",
        'r',
        "Declare confidence on the result alone, ignoring CPU",
    ),
    OptDef::value(
        "wait",
        's',
        "seconds",
        "Wait this long between test setup and test start",
    ),
    OptDef::flag("keepalive", 'S', "Set SO_KEEPALIVE on the data connections"),
    OptDef::value(
        "test",
        't',
        "testname",
        "Test to run: TCP_STREAM (default), TCP_MAERTS, UDP_STREAM, TCP_RR, UDP_RR, TCP_CRR",
    ),
    OptDef::value(
        "cpu_bind",
        'T',
        "lcpu,rcpu",
        "Bind netperf and netserver to these CPUs",
    ),
    OptDef::value(
        "verbosity",
        'v',
        "level",
        "Verbosity: 0 result only, 1 table (default), 2 more detail",
    ),
    OptDef::flag(
        "version",
        'V',
        "Display netperf 2.7's version line, and exit",
    ),
    OptDef::long_only(
        "our_version",
        "version",
        Arity::None,
        "",
        "Display this netperf's version and its control protocol's, and exit",
    ),
    OptDef::value(
        "width",
        'W',
        "send,recv",
        "Number of send,recv buffers in the ring",
    ),
    OptDef::value(
        "interval_wait",
        'w',
        "time",
        "Interval between bursts (needs netperf's --enable-intervals; no effect)",
    )
    .hidden(),
    OptDef::value(
        "priority",
        'y',
        "local,remote",
        "SO_PRIORITY of the data sockets",
    ),
    OptDef::value(
        "tos",
        'Y',
        "local,remote",
        "IP TOS (DSCP<<2) of the data sockets, in hex or decimal",
    ),
    OptDef::value(
        "passphrase",
        'Z',
        "passphrase",
        "Prove to netserver that we know this passphrase (never sent)",
    ),
    OptDef::flag("ipv4", '4', "Use IPv4 for control and data"),
    OptDef::flag("ipv6", '6', "Use IPv6 for control and data"),
    OptDef::long_only(
        "json",
        "json",
        Arity::None,
        "",
        "Print one JSON document with every option, result, interim sample and iteration",
    ),
    OptDef::long_only(
        "dialect",
        "dialect",
        Arity::Required,
        "auto|native|netperf2",
        "Control protocol: this suite's, netperf 2.7's (for its netserver), or found out (default)",
    ),
    OptDef::long_only(
        "key_file",
        "key-file",
        Arity::Required,
        "file",
        "Authenticate to netserver with the key in this file",
    ),
];
