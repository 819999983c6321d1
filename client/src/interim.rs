//! Interim results (`-D interval`) printed as they happen, in netperf
//! 2.7's "demo" formats: an [`Observer`] of the run's interim samples (the
//! family's sampler takes them).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{
    plan::{Plan, SelectorStyle, Units},
    report::{Observer, Sample},
};

/// How interim lines look, by output style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// "Interim result: ..." (the classic tables and `-O`).
    Human,
    /// `-o`.
    Csv,
    /// `-k`: the NETPERF_INTERIM_RESULT[i] keys.
    KeyVal,
}

/// netperf's interim lines on stdout, in the style of the run's output.
#[derive(Debug)]
pub struct Lines {
    pub style: Style,
    pub units: Units,
    pub out: crate::output::Out,
}

impl Lines {
    /// Printed with `-D`, unless the output is JSON.
    pub fn of(plan: &Plan, out: &crate::output::Out) -> Option<Lines> {
        (plan.interim.is_some() && !plan.json).then(|| Lines {
            style: match plan.selection.as_ref().map(|s| s.style) {
                Some(SelectorStyle::Csv) => Style::Csv,
                Some(SelectorStyle::KeyVal) => Style::KeyVal,
                _ => Style::Human,
            },
            units: plan.units(),
            out: out.clone(),
        })
    }

    /// One interim line (or block), netperf's exact format.
    pub fn format(&self, index: u32, rate: f64, interval_secs: f64, ending: SystemTime) -> String {
        let since = ending.duration_since(UNIX_EPOCH).unwrap_or_default();
        let (secs, ms) = (since.as_secs(), since.subsec_millis());
        let label = self.units.label();
        match self.style {
            Style::Human => format!(
                "Interim result: {rate:7.2} {label}/s over {interval_secs:.3} seconds ending at {secs}.{ms:03}\n"
            ),
            Style::Csv => format!("{rate:7.2},{label}/s,{interval_secs:.3},{secs}.{ms:03}\n"),
            Style::KeyVal => format!(
                "NETPERF_INTERIM_RESULT[{index}]={rate:.2}\n\
                 NETPERF_UNITS[{index}]={label}/s\n\
                 NETPERF_INTERVAL[{index}]={interval_secs:.3}\n\
                 NETPERF_ENDING[{index}]={secs}.{ms:03}\n"
            ),
        }
    }
}

impl Observer for Lines {
    fn sample(&self, s: &Sample) {
        let ending = UNIX_EPOCH + Duration::from_millis((s.ending * 1000.0).round() as u64);
        let line = self.format(s.index, s.rate, s.interval, ending);
        self.out.quietly(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(style: Style) -> Lines {
        Lines {
            style,
            units: Units::Bits('m'),
            out: crate::output::Out::to(std::io::sink()),
        }
    }

    #[test]
    fn formats_match_netperf() {
        let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_042);
        assert_eq!(
            spec(Style::Human).format(0, 9412.5, 0.2003, at),
            "Interim result: 9412.50 10^6bits/s over 0.200 seconds ending at 1700000000.042\n"
        );
        assert_eq!(
            spec(Style::Csv).format(0, 12.0, 0.2, at),
            "  12.00,10^6bits/s,0.200,1700000000.042\n"
        );
        assert_eq!(
            spec(Style::KeyVal).format(3, 9412.5, 0.2, at),
            "NETPERF_INTERIM_RESULT[3]=9412.50\nNETPERF_UNITS[3]=10^6bits/s\nNETPERF_INTERVAL[3]=0.200\nNETPERF_ENDING[3]=1700000000.042\n"
        );
    }
}
