//! Control sessions: in all, and from one client address.

use std::{collections::HashMap, net::IpAddr, sync::Mutex};

/// The caps on control sessions: in all, and from one client address.
#[derive(Clone, Copy, Debug)]
pub struct SessionCaps {
    pub sessions: usize,
    pub per_client: usize,
}

/// Counts of sessions, for the caps.
#[derive(Debug, Default)]
pub(crate) struct Census {
    state: Mutex<CensusState>,
}

#[derive(Debug, Default)]
struct CensusState {
    active: usize,
    pending: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// The session cap a new connection met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionCap {
    Sessions(usize),
    PerClient(usize),
}

impl SessionCap {
    /// Whose idle session may make room: anyone's at the daemon's cap,
    /// `ip`'s own at its per-address cap.
    pub(crate) fn only(self, ip: IpAddr) -> Option<IpAddr> {
        match self {
            SessionCap::Sessions(_) => None,
            SessionCap::PerClient(_) => Some(ip),
        }
    }
}

impl Census {
    /// Whether [`Census::admit`] would admit `ip` now (nothing reserved).
    pub(crate) fn would_admit(&self, ip: IpAddr, cfg: SessionCaps) -> Result<(), SessionCap> {
        let Ok(s) = self.state.lock() else {
            return Err(SessionCap::Sessions(cfg.sessions));
        };
        if s.active >= cfg.sessions {
            return Err(SessionCap::Sessions(cfg.sessions));
        }
        if s.per_client.get(&ip).copied().unwrap_or(0) >= cfg.per_client {
            return Err(SessionCap::PerClient(cfg.per_client));
        }
        Ok(())
    }

    pub(crate) fn admit(&self, ip: IpAddr, cfg: SessionCaps) -> Result<(), SessionCap> {
        let Ok(mut s) = self.state.lock() else {
            return Err(SessionCap::Sessions(cfg.sessions));
        };
        if s.active >= cfg.sessions {
            return Err(SessionCap::Sessions(cfg.sessions));
        }
        let n = s.per_client.get(&ip).copied().unwrap_or(0);
        if n >= cfg.per_client {
            return Err(SessionCap::PerClient(cfg.per_client));
        }
        s.active += 1;
        s.pending += 1;
        *s.per_client.entry(ip).or_insert(0) += 1;
        Ok(())
    }

    pub(crate) fn established(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.pending = s.pending.saturating_sub(1);
        }
    }

    pub(crate) fn leave(&self, ip: IpAddr, was_pending: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.active = s.active.saturating_sub(1);
            if was_pending {
                s.pending = s.pending.saturating_sub(1);
            }
            if let Some(n) = s.per_client.get_mut(&ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    s.per_client.remove(&ip);
                }
            }
        }
    }
}
