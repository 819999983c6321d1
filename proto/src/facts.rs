//! What a host is, for comparing two runs (`netperf compare`): what can
//! change a figure besides the change being measured. Each end reads its
//! own (the engine's per-OS layer); the netserver tells the client its
//! facts before a test's results when the client's hello names `facts`.

use serde::{Deserialize, Serialize};

/// A host's facts. Each `None` where its platform does not tell.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    pub platform: String,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    pub cpus: u32,
    /// CPU 0's frequency governor (`performance`, `powersave`, ...).
    pub governor: Option<String>,
    /// The interface that carries traffic from the given address, its
    /// MTU and speed (Mbit/s, where the driver says).
    pub interface: Option<String>,
    pub mtu: Option<u32>,
    pub speed_mbps: Option<u64>,
    /// The interface's offloads, as its driver has them now: TCP
    /// segmentation (TSO), generic segmentation (GSO) and generic receive
    /// (GRO).
    #[serde(default)]
    pub tso: Option<bool>,
    #[serde(default)]
    pub gso: Option<bool>,
    #[serde(default)]
    pub gro: Option<bool>,
    /// TCP's default congestion control, and the socket buffer sysctls
    /// (net.ipv4.tcp_rmem and tcp_wmem: min default max; net.core.rmem_max
    /// and wmem_max).
    pub congestion_control: Option<String>,
    pub tcp_rmem: Option<String>,
    pub tcp_wmem: Option<String>,
    pub rmem_max: Option<String>,
    pub wmem_max: Option<String>,
}

/// The longest text a netserver's facts may carry in one field: a fact
/// is a short line (a CPU's model name is under 100 bytes).
pub const MAX_FACT_LEN: usize = 256;

impl HostFacts {
    /// Facts as a peer sent them, each text field no longer than
    /// [`MAX_FACT_LEN`] (cut at a character boundary): what a peer tells
    /// of itself is shown and compared, never trusted to be short.
    #[must_use]
    pub fn bounded(mut self) -> HostFacts {
        let cut = |s: &mut String| {
            if s.len() > MAX_FACT_LEN {
                let mut end = MAX_FACT_LEN;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                s.truncate(end);
            }
        };
        cut(&mut self.platform);
        for f in [
            &mut self.kernel,
            &mut self.cpu_model,
            &mut self.governor,
            &mut self.interface,
            &mut self.congestion_control,
            &mut self.tcp_rmem,
            &mut self.tcp_wmem,
            &mut self.rmem_max,
            &mut self.wmem_max,
        ]
        .into_iter()
        .flatten()
        {
            cut(f);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peers_long_facts_are_cut_at_a_character() {
        let f = HostFacts {
            platform: "é".repeat(200),
            kernel: Some("k".repeat(1000)),
            ..HostFacts::default()
        }
        .bounded();
        assert_eq!(f.platform.len(), MAX_FACT_LEN);
        assert_eq!(f.kernel.as_deref().map(str::len), Some(MAX_FACT_LEN));
        let short = HostFacts {
            cpu_model: Some("a CPU".into()),
            ..HostFacts::default()
        };
        assert_eq!(short.clone().bounded(), short);
    }
}
