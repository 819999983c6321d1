//! End-to-end tests: the real `netperf` against the real `netserver`, on
//! loopback (IPv4 and IPv6), output parsed as users' scripts parse it.
//! One test binary, one module per area.

mod accuracy;
mod attacks;
mod bottleneck;
mod bugs27;
mod compare;
mod confidence;
mod dropin;
mod ecn;
mod errors;
mod exhaustion;
mod fleet;
mod flent;
mod flows;
mod hardening;
mod iperf3;
mod lab;
mod mesh;
mod metrics;
mod netperf2;
mod netperf2_real;
mod omni;
mod one_way;
mod options;
mod output;
mod pictures;
mod policy;
mod rpm;
mod rr;
mod rxpath;
mod security;
mod server;
mod shape;
mod soak;
mod stamp;
mod stream;
mod udp;
mod under_load;
mod unprivileged;
mod wine;
