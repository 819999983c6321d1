//! Test schedules for `netperf mesh`.
//!
//! Hosts are numbered `0..n`. A schedule is a list of [`Round`]s; the tests of
//! one round run at the same time, and rounds run one after the other. The
//! full mesh is built from a round-robin tournament (circle method) so that,
//! in each round, every host takes part in at most one match and no link is
//! shared by two concurrent tests.

/// One one-way throughput test: `from` sends to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pair {
    /// Index of the sending host.
    pub from: usize,
    /// Index of the receiving host.
    pub to: usize,
}

/// A set of tests that run at the same time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    /// Position of this round in its schedule, counting from 0.
    pub index: usize,
    /// The tests run concurrently in this round.
    pub tests: Vec<Pair>,
}

/// How the two directions of each match of a full mesh are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Directions {
    /// One direction per round: each tournament round becomes two rounds,
    /// first `a -> b` for every match, then `b -> a`.
    InTurn,
    /// Both directions in the same round, so each host sends and receives at
    /// the same time (a bidirectional load test).
    Both,
}

/// Round-robin tournament of `n` hosts by the circle method.
///
/// For even `n` this gives `n - 1` rounds of `n / 2` disjoint matches; for odd
/// `n`, `n` rounds of `(n - 1) / 2` matches (one host rests each round). Every
/// unordered pair of hosts meets exactly once and no host plays twice in a
/// round. Fewer than two hosts give no rounds.
#[must_use]
pub fn tournament(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    // With odd n a dummy host `n` is added; whoever meets it rests.
    let m = if n % 2 == 0 { n } else { n + 1 };
    let fixed = m - 1;
    let ring = m - 1;
    let mut rounds = Vec::with_capacity(ring);
    for r in 0..ring {
        let mut matches = Vec::with_capacity(m / 2);
        if fixed < n {
            // Alternate which side of the fixed host's match goes first.
            matches.push(if r % 2 == 0 { (fixed, r) } else { (r, fixed) });
        }
        for i in 1..m / 2 {
            let a = (r + i) % ring;
            let b = (r + ring - i) % ring;
            matches.push((a, b));
        }
        rounds.push(matches);
    }
    rounds
}

fn push_round(rounds: &mut Vec<Round>, tests: Vec<Pair>) {
    let index = rounds.len();
    rounds.push(Round { index, tests });
}

/// Every ordered pair of `n` hosts, scheduled from a [`tournament`].
///
/// With [`Directions::InTurn`] each tournament round becomes two consecutive
/// rounds (`a -> b` for every match, then `b -> a`), giving `2(n - 1)` rounds
/// for even `n`; with [`Directions::Both`] one round holds both directions of
/// each match. Round indices count from 0.
#[must_use]
pub fn full_mesh(n: usize, d: Directions) -> Vec<Round> {
    let matches = tournament(n);
    let mut rounds = Vec::with_capacity(matches.len() * 2);
    for round in matches {
        let forward = round.iter().map(|&(a, b)| Pair { from: a, to: b });
        let backward = round.iter().map(|&(a, b)| Pair { from: b, to: a });
        match d {
            Directions::InTurn => {
                push_round(&mut rounds, forward.collect());
                push_round(&mut rounds, backward.collect());
            }
            Directions::Both => {
                let tests = round
                    .iter()
                    .flat_map(|&(a, b)| [Pair { from: a, to: b }, Pair { from: b, to: a }])
                    .collect();
                push_round(&mut rounds, tests);
            }
        }
    }
    rounds
}

/// One round in which every other host sends to `target` at once (incast).
///
/// Gives no rounds when `target` is not a host or there is no other host.
#[must_use]
pub fn incast(n: usize, target: usize) -> Vec<Round> {
    if target >= n || n < 2 {
        return Vec::new();
    }
    let tests = (0..n)
        .filter(|&h| h != target)
        .map(|h| Pair {
            from: h,
            to: target,
        })
        .collect();
    vec![Round { index: 0, tests }]
}

/// One round in which `source` sends to every other host at once (fan-out).
///
/// Gives no rounds when `source` is not a host or there is no other host.
#[must_use]
pub fn fanout(n: usize, source: usize) -> Vec<Round> {
    if source >= n || n < 2 {
        return Vec::new();
    }
    let tests = (0..n)
        .filter(|&h| h != source)
        .map(|h| Pair {
            from: source,
            to: h,
        })
        .collect();
    vec![Round { index: 0, tests }]
}

/// Packs a user's list of pairs into rounds where no host is in two tests.
///
/// Each pair goes into the first round after the last round that already
/// uses its sender or receiver. Tests sharing a host therefore keep the
/// list's order, while independent tests are moved forward to share rounds.
/// Duplicate pairs are kept and run once each.
#[must_use]
pub fn given(pairs: &[Pair]) -> Vec<Round> {
    let size = pairs
        .iter()
        .map(|p| p.from.max(p.to) + 1)
        .max()
        .unwrap_or(0);
    // next_free[h]: first round after every round already using host h.
    let mut next_free = vec![0usize; size];
    let mut rounds: Vec<Round> = Vec::new();
    for &pair in pairs {
        let r = next_free[pair.from].max(next_free[pair.to]);
        if r == rounds.len() {
            push_round(&mut rounds, Vec::new());
        }
        rounds[r].tests.push(pair);
        next_free[pair.from] = r + 1;
        next_free[pair.to] = r + 1;
    }
    rounds
}

fn resolve_host(word: &str, hosts: &[String], line: usize) -> Result<usize, String> {
    if let Some(i) = hosts.iter().position(|h| h == word) {
        return Ok(i);
    }
    match word.parse::<usize>() {
        Ok(i) if i < hosts.len() => Ok(i),
        Ok(i) => Err(format!(
            "line {line}: host index `{i}` is out of range (there are {} hosts, numbered from 0)",
            hosts.len()
        )),
        Err(_) => Err(format!("line {line}: unknown host `{word}`")),
    }
}

/// Parses a pairs file into a list of [`Pair`]s.
///
/// One pair per line, written `FROM TO`, `FROM,TO` or `FROM->TO`; text after
/// `#` and blank lines are ignored. `FROM` and `TO` are host names exactly as
/// in `hosts`, or 0-based host indices (a name takes precedence).
///
/// # Errors
///
/// Returns a message naming the line number and the offending word when a
/// line does not hold exactly two hosts, a host is unknown or out of range,
/// or a pair goes from a host to itself.
pub fn parse_pairs(text: &str, hosts: &[String]) -> Result<Vec<Pair>, String> {
    let mut pairs = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let Some((content, words)) = line_words(raw) else {
            continue;
        };
        if let Some(extra) = words.get(2) {
            return Err(format!(
                "line {line}: unexpected `{extra}` after the pair (expected `FROM TO`)"
            ));
        }
        if words.len() < 2 {
            return Err(format!(
                "line {line}: `{content}` is not a pair (expected `FROM TO`, `FROM,TO` or `FROM->TO`)"
            ));
        }
        if words.iter().any(|w| w.is_empty()) {
            return Err(format!("line {line}: empty host name in `{content}`"));
        }
        let from = resolve_host(words[0], hosts, line)?;
        let to = resolve_host(words[1], hosts, line)?;
        if from == to {
            return Err(format!(
                "line {line}: `{}` -> `{}` is a pair from a host to itself",
                words[0], words[1]
            ));
        }
        pairs.push(Pair { from, to });
    }
    Ok(pairs)
}

/// A pairs file's line, its comment cut: its content and its words
/// (`FROM TO`, `FROM,TO` or `FROM->TO`); `None` for a blank line.
pub fn line_words(raw: &str) -> Option<(&str, Vec<&str>)> {
    let content = raw.split('#').next().unwrap_or("").trim();
    if content.is_empty() {
        return None;
    }
    let words = if content.contains("->") {
        content.split("->").map(str::trim).collect()
    } else if content.contains(',') {
        content.split(',').map(str::trim).collect()
    } else {
        content.split_whitespace().collect()
    };
    Some((content, words))
}

/// Verifies that no host appears twice in any round of a schedule.
///
/// The one exception allowed is the two directions of the same match in one
/// round (`a -> b` and `b -> a`), which is what [`Directions::Both`] builds.
/// Incast and fan-out rounds deliberately put one host in many tests and so
/// fail this check. Hosts must be below `n` and never paired with themselves.
///
/// # Errors
///
/// Returns a message naming the first offending round and host.
pub fn check(n: usize, rounds: &[Round]) -> Result<(), String> {
    const FREE: usize = usize::MAX;
    let mut sends_to = vec![FREE; n];
    let mut receives_from = vec![FREE; n];
    let mut touched: Vec<usize> = Vec::new();
    for (r, round) in rounds.iter().enumerate() {
        for p in &round.tests {
            if p.from >= n || p.to >= n {
                return Err(format!(
                    "round {r}: test {} -> {} names a host outside 0..{n}",
                    p.from, p.to
                ));
            }
            if p.from == p.to {
                return Err(format!("round {r}: host {} sends to itself", p.from));
            }
            if sends_to[p.from] != FREE {
                return Err(format!("round {r}: host {} sends in two tests", p.from));
            }
            if receives_from[p.to] != FREE {
                return Err(format!("round {r}: host {} receives in two tests", p.to));
            }
            sends_to[p.from] = p.to;
            receives_from[p.to] = p.from;
            touched.push(p.from);
            touched.push(p.to);
        }
        for &h in &touched {
            let (s, rcv) = (sends_to[h], receives_from[h]);
            if s != FREE && rcv != FREE && s != rcv {
                return Err(format!(
                    "round {r}: host {h} is in two tests (sends to {s}, receives from {rcv})"
                ));
            }
        }
        for &h in &touched {
            sends_to[h] = FREE;
            receives_from[h] = FREE;
        }
        touched.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn verify_tournament(n: usize) {
        let rounds = tournament(n);
        let expected_rounds = if n % 2 == 0 { n - 1 } else { n };
        assert_eq!(rounds.len(), expected_rounds, "n={n}");
        let mut met = vec![false; n * n];
        let mut in_round = vec![usize::MAX; n];
        for (r, matches) in rounds.iter().enumerate() {
            assert_eq!(matches.len(), n / 2, "n={n} round {r}");
            for &(a, b) in matches {
                assert!(a < n && b < n && a != b, "n={n}: bad match ({a},{b})");
                for h in [a, b] {
                    assert_ne!(in_round[h], r, "n={n}: host {h} twice in round {r}");
                    in_round[h] = r;
                }
                let key = a.min(b) * n + a.max(b);
                assert!(!met[key], "n={n}: ({a},{b}) met twice");
                met[key] = true;
            }
        }
        for a in 0..n {
            for b in a + 1..n {
                assert!(met[a * n + b], "n={n}: ({a},{b}) never met");
            }
        }
    }

    #[test]
    fn tournament_small_and_large() {
        assert!(tournament(0).is_empty());
        assert!(tournament(1).is_empty());
        for n in 2..=12 {
            verify_tournament(n);
        }
        verify_tournament(999);
        verify_tournament(1000);
    }

    #[test]
    fn full_mesh_in_turn_1000_hosts() {
        let n = 1000;
        let start = Instant::now();
        let rounds = full_mesh(n, Directions::InTurn);
        assert_eq!(rounds.len(), 1998);
        let mut seen = vec![false; n * n];
        for (i, round) in rounds.iter().enumerate() {
            assert_eq!(round.index, i);
            assert_eq!(round.tests.len(), 500);
            for p in &round.tests {
                let key = p.from * n + p.to;
                assert!(!seen[key], "{p:?} twice");
                seen[key] = true;
            }
        }
        for a in 0..n {
            for b in 0..n {
                assert_eq!(seen[a * n + b], a != b, "ordered pair ({a},{b})");
            }
        }
        check(n, &rounds).unwrap();
        println!(
            "full_mesh(1000, InTurn) built and checked in {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn full_mesh_in_turn_odd() {
        let rounds = full_mesh(5, Directions::InTurn);
        assert_eq!(rounds.len(), 10);
        assert!(rounds.iter().all(|r| r.tests.len() == 2));
        check(5, &rounds).unwrap();
        // Consecutive rounds hold the two directions of the same matches.
        for w in rounds.chunks(2) {
            let back: Vec<Pair> = w[0]
                .tests
                .iter()
                .map(|p| Pair {
                    from: p.to,
                    to: p.from,
                })
                .collect();
            assert_eq!(back, w[1].tests);
        }
    }

    #[test]
    fn full_mesh_both_directions() {
        for n in [4, 6, 7] {
            let rounds = full_mesh(n, Directions::Both);
            assert_eq!(rounds.len(), if n % 2 == 0 { n - 1 } else { n });
            let mut seen = vec![false; n * n];
            for round in &rounds {
                assert_eq!(round.tests.len(), 2 * (n / 2));
                for p in &round.tests {
                    assert!(!seen[p.from * n + p.to]);
                    seen[p.from * n + p.to] = true;
                    assert!(round.tests.contains(&Pair {
                        from: p.to,
                        to: p.from
                    }));
                }
            }
            assert_eq!(seen.iter().filter(|&&s| s).count(), n * (n - 1));
            check(n, &rounds).unwrap();
        }
        assert!(full_mesh(1, Directions::Both).is_empty());
    }

    #[test]
    fn incast_and_fanout() {
        let inc = incast(5, 2);
        assert_eq!(inc.len(), 1);
        assert_eq!(inc[0].index, 0);
        assert_eq!(inc[0].tests.len(), 4);
        assert!(inc[0].tests.iter().all(|p| p.to == 2 && p.from != 2));
        let fan = fanout(5, 0);
        assert_eq!(fan.len(), 1);
        assert_eq!(fan[0].tests.len(), 4);
        assert!(fan[0].tests.iter().all(|p| p.from == 0 && p.to != 0));
        assert!(incast(5, 5).is_empty());
        assert!(fanout(1, 0).is_empty());
        assert!(check(5, &inc).is_err());
    }

    #[test]
    fn given_splits_conflicts_and_keeps_duplicates() {
        let p = |from, to| Pair { from, to };
        let pairs = [p(0, 1), p(0, 2), p(3, 4), p(1, 0), p(0, 1), p(2, 3)];
        let rounds = given(&pairs);
        check(5, &rounds).unwrap();
        let tests: Vec<Vec<Pair>> = rounds.iter().map(|r| r.tests.clone()).collect();
        assert_eq!(
            tests,
            vec![
                vec![p(0, 1), p(3, 4)],
                vec![p(0, 2)],
                vec![p(1, 0), p(2, 3)],
                vec![p(0, 1)],
            ]
        );
        for (i, r) in rounds.iter().enumerate() {
            assert_eq!(r.index, i);
        }
        assert_eq!(
            rounds.iter().map(|r| r.tests.len()).sum::<usize>(),
            pairs.len()
        );
        assert!(given(&[]).is_empty());
    }

    fn names() -> Vec<String> {
        ["alpha", "beta", "gamma", "7"]
            .iter()
            .map(|s| (*s).to_string())
            .collect()
    }

    #[test]
    fn parse_pairs_accepts_all_forms() {
        let text =
            "# pairs\n\nalpha beta\nbeta,gamma  # comment\n gamma -> alpha \n0 2\n7 1\n3\t0\r\n";
        let pairs = parse_pairs(text, &names()).unwrap();
        let p = |from, to| Pair { from, to };
        assert_eq!(
            pairs,
            vec![p(0, 1), p(1, 2), p(2, 0), p(0, 2), p(3, 1), p(3, 0)]
        );
    }

    #[test]
    fn parse_pairs_errors() {
        let hosts = names();
        let err = parse_pairs("alpha beta\ndelta alpha\n", &hosts).unwrap_err();
        assert!(err.contains("line 2") && err.contains("delta"), "{err}");
        let err = parse_pairs("alpha 9\n", &hosts).unwrap_err();
        assert!(err.contains("line 1") && err.contains('9'), "{err}");
        let err = parse_pairs("\n# x\nbeta beta\n", &hosts).unwrap_err();
        assert!(err.contains("line 3") && err.contains("itself"), "{err}");
        let err = parse_pairs("alpha beta gamma\n", &hosts).unwrap_err();
        assert!(err.contains("line 1") && err.contains("gamma"), "{err}");
        let err = parse_pairs("alpha\n", &hosts).unwrap_err();
        assert!(err.contains("line 1") && err.contains("alpha"), "{err}");
        let err = parse_pairs("alpha,\n", &hosts).unwrap_err();
        assert!(err.contains("line 1"), "{err}");
        let err = parse_pairs("0 -> 0\n", &hosts).unwrap_err();
        assert!(err.contains("itself"), "{err}");
        let err = parse_pairs("Alpha beta\n", &hosts).unwrap_err();
        assert!(err.contains("Alpha"), "{err}");
    }

    #[test]
    fn check_rejects_conflicts() {
        let p = |from, to| Pair { from, to };
        let bad = vec![Round {
            index: 0,
            tests: vec![p(0, 1), p(1, 2)],
        }];
        assert!(check(3, &bad).unwrap_err().contains("host 1"));
        let twice = vec![Round {
            index: 0,
            tests: vec![p(0, 1), p(0, 2)],
        }];
        assert!(check(3, &twice).is_err());
        let out = vec![Round {
            index: 0,
            tests: vec![p(0, 3)],
        }];
        assert!(check(3, &out).is_err());
        let ok = vec![Round {
            index: 0,
            tests: vec![p(0, 1), p(1, 0)],
        }];
        assert!(check(3, &ok).is_ok());
    }
}
