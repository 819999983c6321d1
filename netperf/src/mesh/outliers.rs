//! Outlier detection on a mesh throughput matrix.
//!
//! The input is an `n`×`n` matrix where `values[from][to]` is the throughput
//! measured from host `from` to host `to` (higher is better). `None`, a
//! non-finite number and the diagonal count as "not measured". Medians of an
//! even number of values are the mean of the two middle values. `MAD` below is
//! the median absolute deviation from the median, multiplied by 1.4826 so that
//! it estimates the standard deviation of normally distributed data.
//!
//! The rule, with parameters `k` (default 3.0) and `min_drop` (default 0.25):
//!
//! 1. **Hosts.** For each host, its *sending median* is the median of its row
//!    (the links it sends on) and its *receiving median* the median of its
//!    column (the links it receives on), over measured links only; a host with
//!    no measured link in a direction has no median there. Over the hosts that
//!    have a sending median, let `M` be the median of those sending medians
//!    and `MAD` their scaled MAD. A host is flagged *Sending* when its sending
//!    median is below `M − max(k·MAD, min_drop·M)`. Receiving is judged the
//!    same way with the receiving medians. `M` is reported as "typical".
//! 2. **Links.** The links considered are the measured links whose sender is
//!    not flagged Sending and whose receiver is not flagged Receiving. Over
//!    these links only, each host gets a row median and a column median again,
//!    and a link `from → to` gets `expected = min(row median of from, column
//!    median of to)` and `ratio = value / expected` (links with `expected ≤ 0`
//!    are skipped). Over all ratios, let `R` be their median and `MAD_R` their
//!    scaled MAD. A link is flagged when its ratio is below
//!    `R − max(k·MAD_R, min_drop·R)`.
//! 3. **Too little data.** With fewer than 3 hosts nothing is flagged. A
//!    direction (sending or receiving) in which fewer than 3 hosts have a
//!    median flags no host, and fewer than 3 ratios flag no link.
//!
//! The `min_drop` floor means that nothing is flagged for being less than 25%
//! (by default) below typical, however uniform the rest of the mesh is; `k·MAD`
//! widens the margin when the mesh itself is noisy.
//!
//! Findings come sorted: host findings first (by host, Sending before
//! Receiving), then link findings by `from`, then `to`.

/// A direction of traffic as seen from one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// The host's outgoing links (its row of the matrix).
    Sending,
    /// The host's incoming links (its column of the matrix).
    Receiving,
}

/// Something in the matrix that is markedly slower than the rest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Finding {
    /// A host whose links in one direction are slow as a whole.
    Host {
        /// Index of the host.
        host: usize,
        /// Which of its directions is slow.
        direction: Direction,
        /// The host's median throughput in that direction.
        median: f64,
        /// The median of all hosts' medians in that direction.
        typical: f64,
    },
    /// A single slow link between otherwise healthy hosts.
    Link {
        /// Index of the sending host.
        from: usize,
        /// Index of the receiving host.
        to: usize,
        /// The measured throughput.
        value: f64,
        /// What the link was expected to reach, from its hosts' medians.
        expected: f64,
    },
}

/// Parameters of the outlier rule (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// How many scaled MADs below the median a value must be to be flagged.
    pub k: f64,
    /// Smallest relative drop below the median that can be flagged (0.25 =
    /// 25%), so a very uniform mesh does not flag small dips.
    pub min_drop: f64,
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            k: 3.0,
            min_drop: 0.25,
        }
    }
}

/// Median of a list of numbers (mean of the middle two for even length).
fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        Some(sorted[mid])
    } else {
        Some(f64::midpoint(sorted[mid - 1], sorted[mid]))
    }
}

/// Median and low-outlier flags of a list of optional values, or `None` when
/// fewer than 3 values are present.
fn low_outliers(values: &[Option<f64>], rule: &Rule) -> Option<(f64, Vec<bool>)> {
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    if present.len() < 3 {
        return None;
    }
    let m = median(&present)?;
    let deviations: Vec<f64> = present.iter().map(|v| (v - m).abs()).collect();
    let mad = 1.4826 * median(&deviations)?;
    let threshold = m - (rule.k * mad).max(rule.min_drop * m);
    let flags = values
        .iter()
        .map(|v| v.is_some_and(|v| v < threshold))
        .collect();
    Some((m, flags))
}

/// The measured value of a link, treating the diagonal, missing cells and
/// non-finite numbers as not measured.
fn measured(values: &[Vec<Option<f64>>], from: usize, to: usize) -> Option<f64> {
    if from == to {
        return None;
    }
    values
        .get(from)
        .and_then(|row| row.get(to))
        .copied()
        .flatten()
        .filter(|v| v.is_finite())
}

/// Row and column medians over the links accepted by `keep`.
fn line_medians(
    values: &[Vec<Option<f64>>],
    keep: &dyn Fn(usize, usize) -> bool,
) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    let n = values.len();
    let pick = |from: usize, to: usize| measured(values, from, to).filter(|_| keep(from, to));
    let rows = (0..n)
        .map(|i| median(&(0..n).filter_map(|j| pick(i, j)).collect::<Vec<_>>()))
        .collect();
    let cols = (0..n)
        .map(|j| median(&(0..n).filter_map(|i| pick(i, j)).collect::<Vec<_>>()))
        .collect();
    (rows, cols)
}

/// Applies the outlier rule of the module documentation to a throughput
/// matrix and returns the slow hosts and links, sorted.
#[must_use]
pub fn find(values: &[Vec<Option<f64>>], rule: &Rule) -> Vec<Finding> {
    let n = values.len();
    if n < 3 {
        return Vec::new();
    }
    let mut findings = Vec::new();

    // 1. Host level.
    let (send_med, recv_med) = line_medians(values, &|_, _| true);
    let send = low_outliers(&send_med, rule);
    let recv = low_outliers(&recv_med, rule);
    let send_flag = send
        .as_ref()
        .map_or_else(|| vec![false; n], |s| s.1.clone());
    let recv_flag = recv
        .as_ref()
        .map_or_else(|| vec![false; n], |r| r.1.clone());
    for host in 0..n {
        for (direction, stats, meds) in [
            (Direction::Sending, &send, &send_med),
            (Direction::Receiving, &recv, &recv_med),
        ] {
            if let (Some((typical, flags)), Some(median)) = (stats, meds[host])
                && flags[host]
            {
                findings.push(Finding::Host {
                    host,
                    direction,
                    median,
                    typical: *typical,
                });
            }
        }
    }

    // 2. Link level, over links not out of flagged senders / into flagged receivers.
    let keep = |from: usize, to: usize| !send_flag[from] && !recv_flag[to];
    let (rows, cols) = line_medians(values, &keep);
    let mut links = Vec::new();
    let mut ratios = Vec::new();
    for (from, row_median) in rows.iter().enumerate() {
        for (to, col_median) in cols.iter().enumerate() {
            let Some(value) = measured(values, from, to).filter(|_| keep(from, to)) else {
                continue;
            };
            let (Some(r), Some(c)) = (row_median, col_median) else {
                continue;
            };
            let expected = r.min(*c);
            if expected > 0.0 {
                links.push((from, to, value, expected));
                ratios.push(Some(value / expected));
            }
        }
    }
    if let Some((_, flags)) = low_outliers(&ratios, rule) {
        for (&(from, to, value, expected), flagged) in links.iter().zip(flags) {
            if flagged {
                findings.push(Finding::Link {
                    from,
                    to,
                    value,
                    expected,
                });
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small deterministic pseudo-random generator (64-bit LCG).
    struct Lcg(u64);

    impl Lcg {
        /// A number in [0, 1).
        fn next(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let high = u32::try_from(self.0 >> 32).unwrap();
            f64::from(high) / 4_294_967_296.0
        }

        /// A factor in [0.95, 1.05).
        fn noise(&mut self) -> f64 {
            0.95 + 0.1 * self.next()
        }
    }

    fn healthy(n: usize, seed: u64) -> Vec<Vec<Option<f64>>> {
        let mut rng = Lcg(seed);
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| (i != j).then(|| 100.0 * rng.noise()))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn healthy_mesh_flags_nothing() {
        for seed in 0..200 {
            let m = healthy(6, seed);
            assert_eq!(find(&m, &Rule::default()), vec![], "seed {seed}");
        }
    }

    #[test]
    fn slow_receiver_is_flagged_alone() {
        for seed in 0..50 {
            let mut m = healthy(6, seed);
            for (i, row) in m.iter_mut().enumerate() {
                if i != 3 {
                    row[3] = row[3].map(|v| v / 3.0);
                }
            }
            let f = find(&m, &Rule::default());
            assert_eq!(f.len(), 1, "seed {seed}: {f:?}");
            assert!(
                matches!(f[0], Finding::Host { host: 3, direction: Direction::Receiving, median, typical }
                    if median < 40.0 && typical > 90.0),
                "{f:?}"
            );
        }
    }

    #[test]
    fn slow_sender_is_flagged_alone() {
        for seed in 0..50 {
            let mut m = healthy(6, seed);
            for v in m[1].iter_mut().flatten() {
                *v /= 2.0;
            }
            let f = find(&m, &Rule::default());
            assert_eq!(f.len(), 1, "seed {seed}: {f:?}");
            assert!(
                matches!(
                    f[0],
                    Finding::Host {
                        host: 1,
                        direction: Direction::Sending,
                        ..
                    }
                ),
                "{f:?}"
            );
        }
    }

    #[test]
    fn bad_link_is_flagged_alone() {
        for seed in 0..50 {
            let mut m = healthy(6, seed);
            m[2][4] = m[2][4].map(|v| v / 3.0);
            let f = find(&m, &Rule::default());
            assert_eq!(f.len(), 1, "seed {seed}: {f:?}");
            assert!(
                matches!(f[0], Finding::Link { from: 2, to: 4, value, expected }
                    if value < 40.0 && expected > 90.0),
                "{f:?}"
            );
        }
    }

    #[test]
    fn missing_cells_are_tolerated() {
        let mut m = healthy(6, 7);
        m[0][1] = None;
        m[3][5] = None;
        m[5][0] = Some(f64::NAN);
        assert_eq!(find(&m, &Rule::default()), vec![]);
        for (i, row) in m.iter_mut().enumerate() {
            if i != 4 {
                row[4] = row[4].map(|v| v / 3.0);
            }
        }
        let f = find(&m, &Rule::default());
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(matches!(
            f[0],
            Finding::Host {
                host: 4,
                direction: Direction::Receiving,
                ..
            }
        ));
        // Almost nothing measured: no medians to compare, no findings, no panic.
        let mut sparse = vec![vec![None; 5]; 5];
        sparse[0][1] = Some(10.0);
        sparse[2][3] = Some(1.0);
        assert_eq!(find(&sparse, &Rule::default()), vec![]);
        // Ragged rows are read as missing cells.
        let ragged = vec![vec![None, Some(1.0)], vec![Some(1.0)], vec![]];
        assert_eq!(find(&ragged, &Rule::default()), vec![]);
    }

    #[test]
    fn two_hosts_flag_nothing() {
        let m = vec![vec![None, Some(100.0)], vec![Some(1.0), None]];
        assert_eq!(find(&m, &Rule::default()), vec![]);
        assert_eq!(find(&[], &Rule::default()), vec![]);
    }

    #[test]
    fn findings_are_sorted_hosts_first() {
        let mut m = healthy(8, 11);
        for v in m[5].iter_mut().flatten() {
            *v /= 3.0;
        }
        for (i, row) in m.iter_mut().enumerate() {
            if i != 2 {
                row[2] = row[2].map(|v| v / 3.0);
            }
        }
        m[6][0] = m[6][0].map(|v| v / 4.0);
        m[1][3] = m[1][3].map(|v| v / 4.0);
        let f = find(&m, &Rule::default());
        assert_eq!(f.len(), 4, "{f:?}");
        assert!(matches!(
            f[0],
            Finding::Host {
                host: 2,
                direction: Direction::Receiving,
                ..
            }
        ));
        assert!(matches!(
            f[1],
            Finding::Host {
                host: 5,
                direction: Direction::Sending,
                ..
            }
        ));
        assert!(matches!(f[2], Finding::Link { from: 1, to: 3, .. }));
        assert!(matches!(f[3], Finding::Link { from: 6, to: 0, .. }));
    }

    #[test]
    fn median_and_rule_default() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(
            Rule::default(),
            Rule {
                k: 3.0,
                min_drop: 0.25
            }
        );
    }
}
