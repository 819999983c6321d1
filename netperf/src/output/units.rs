//! netperf's output units (`-f`).

use crate::cli::Units;

impl Units {
    /// The label in table titles (netperf's `format_units()`).
    pub fn label(self) -> &'static str {
        match self {
            Units::Bytes('B') => "Bytes",
            Units::Bytes('K') => "KBytes",
            Units::Bytes('M') => "MBytes",
            Units::Bytes('G') => "GBytes",
            Units::Bits('b') => "10^0bits",
            Units::Bits('k') => "10^3bits",
            Units::Bits('m') => "10^6bits",
            Units::Bits('g') => "10^9bits",
            Units::Transactions => "Trans",
            _ => "KBytes",
        }
    }

    /// `amount` (bytes, or transactions for [`Units::Transactions`]) over
    /// `secs`, in these units per second. Bits are bits: netperf 2.7's `-f b`
    /// prints bytes under a bits label; we do not.
    pub fn rate(self, amount: f64, secs: f64) -> f64 {
        if secs <= 0.0 {
            return 0.0;
        }
        let per = match self {
            Units::Bytes('B') => 1.0,
            Units::Bytes('K') => 1024.0,
            Units::Bytes('M') => 1024.0 * 1024.0,
            Units::Bytes('G') => 1024.0 * 1024.0 * 1024.0,
            Units::Bits('b') => 1.0 / 8.0,
            Units::Bits('k') => 1000.0 / 8.0,
            Units::Bits('m') => 1e6 / 8.0,
            Units::Bits('g') => 1e9 / 8.0,
            Units::Transactions => 1.0,
            _ => 1024.0,
        };
        amount / per / secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(Units::Bits('m').rate(125_000_000.0, 1.0), 1000.0);
        assert_eq!(Units::Bits('g').rate(125_000_000.0, 1.0), 1.0);
        assert_eq!(Units::Bits('b').rate(1.0, 1.0), 8.0);
        assert_eq!(Units::Bytes('K').rate(2048.0, 2.0), 1.0);
        assert_eq!(Units::Bytes('M').rate(1048576.0, 1.0), 1.0);
        assert_eq!(Units::Transactions.rate(500.0, 0.5), 1000.0);
        assert_eq!(Units::Bits('m').rate(1.0, 0.0), 0.0);
    }

    #[test]
    fn labels() {
        assert_eq!(Units::Bits('m').label(), "10^6bits");
        assert_eq!(Units::Bytes('G').label(), "GBytes");
        assert_eq!(Units::Transactions.label(), "Trans");
    }
}
