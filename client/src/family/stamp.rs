//! One-way delay probes beside a test (`UDP_STAMP`): a probe every
//! [`Stamped::every`] on one UDP flow, each answer's four times kept
//! ([`proto::stamp::Stamps`]) until whoever runs it halts it. What the
//! times mean is `report::one_way`'s.

use std::{
    net::UdpSocket,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::{Result, bail};
use engine::rr;
use proto::{Capabilities, Feature, SideResults, stamp::Stamps};

use super::lifecycle::{Family, Local, Ours, Prepared, Run};
use crate::plan::Plan;

/// The probes of a run: how often, what came back, and the halt its
/// runner raises when the test beside it is over.
#[derive(Debug)]
pub struct Stamped {
    pub every: Duration,
    kept: Mutex<Vec<Stamps>>,
    halt: AtomicBool,
}

impl Stamped {
    pub fn new(every: Duration) -> Arc<Stamped> {
        Arc::new(Stamped {
            every,
            kept: Mutex::new(Vec::new()),
            halt: AtomicBool::new(false),
        })
    }

    /// End the probing.
    pub fn halt(&self) {
        self.halt.store(true, Ordering::Relaxed);
    }

    pub fn halted(&self) -> bool {
        self.halt.load(Ordering::Relaxed)
    }

    /// Answers kept so far.
    pub fn answered(&self) -> usize {
        self.kept.lock().map(|k| k.len()).unwrap_or(0)
    }

    /// What was kept, taken.
    pub fn take(&self) -> Vec<Stamps> {
        self.kept
            .lock()
            .map(|mut k| std::mem::take(&mut *k))
            .unwrap_or_default()
    }
}

/// The probing family.
pub(crate) struct Stamp {
    socks: Vec<UdpSocket>,
    probes: Arc<Stamped>,
}

impl Stamp {
    pub(crate) fn probing(probes: Arc<Stamped>) -> Stamp {
        Stamp {
            socks: Vec::new(),
            probes,
        }
    }
}

impl Family for Stamp {
    fn needs(&self, _plan: &Plan) -> Vec<Feature> {
        vec![Feature::Stamps]
    }

    fn resolve(&self, plan: &Plan, _p: &Prepared) -> Result<Ours> {
        Ok(super::rr::rr_sizes(plan))
    }

    fn connect(&mut self, r: &Run<'_>, p: Prepared) -> Result<()> {
        self.socks = super::udp::open_flows(r, p)?;
        Ok(())
    }

    fn run(&mut self, r: &Run<'_>, _ours: &Ours) -> Result<Local> {
        let Some(s) = self.socks.first() else {
            bail!("no data socket for the probes");
        };
        let probes = &self.probes;
        let out = rr::stamp_requester(
            super::udp::link(r.plan, s, r.to)?,
            probes.every,
            r.stop,
            &|| probes.halted(),
            &mut |st| {
                if let Ok(mut k) = probes.kept.lock() {
                    k.push(st);
                }
            },
            &r.ctx.live,
        )?;
        let mut local = super::crr::merge(vec![Ok(out)], false)?;
        local.addr = s.local_addr().ok();
        Ok(local)
    }

    fn check(
        &self,
        _plan: &Plan,
        local: &Local,
        remote: &SideResults,
        _caps: &Capabilities,
    ) -> Result<()> {
        let (ours, theirs) = (local.counts.transactions, remote.transactions);
        if theirs < ours {
            bail!("probe counts disagree: {ours} answered, the netserver answered {theirs}");
        }
        Ok(())
    }
}
