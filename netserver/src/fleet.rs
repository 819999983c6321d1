//! Third-party tests (`--fleet`): on the request of a client that proved
//! the key, this netserver runs netperf's test as a client, with the
//! client library's own lifecycle, against another netserver that must
//! prove the same key; the run's JSON document goes back to the client.
//! One at a time on a daemon: a mesh puts no host in two tests at once,
//! and a second request while one runs is refused as busy.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::SystemTime,
};

use proto::{ErrorCode, ErrorMsg, ThirdParty};
use serde_json::json;

/// Whether a third-party test runs on this daemon.
#[derive(Debug, Default)]
pub(crate) struct Busy(AtomicBool);

/// A third-party test running on its own thread.
#[derive(Debug)]
pub(crate) struct Running {
    pub req: ThirdParty,
    pub start: SystemTime,
    /// Its tests, to stop when its client goes away.
    stop: client::interrupt::StopGroup,
    outcome: Arc<Mutex<Option<Result<String, ErrorMsg>>>>,
}

impl Running {
    /// Stop it now (its client went away): its own tests, no other.
    pub fn stop(&self) {
        self.stop.stop();
    }

    /// Its JSON document or its error, once it ended.
    pub fn try_outcome(&self) -> Option<Result<String, ErrorMsg>> {
        self.outcome.lock().ok()?.take()
    }

    /// The `--record` line of a third-party test that ended.
    pub fn record_line(&self, session: u64, peer: std::net::SocketAddr, ok: bool) -> String {
        json!({
            "time": crate::log::rfc3339(SystemTime::now()),
            "start": crate::log::rfc3339(self.start),
            "session": session,
            "peer": peer.to_string(),
            "dialect": "native",
            "role": "third-party",
            "target": format!("{}:{}", self.req.host, self.req.port),
            "args": client::third_party::test_words(&self.req.test),
            "outcome": if ok { "completed" } else { "failed" },
        })
        .to_string()
    }
}

/// Start `req` against its netserver with `key`; `done` is called from
/// its thread when it ended. Refused when one runs already.
pub(crate) fn start(
    req: ThirdParty,
    key: engine::auth::Key,
    busy: &Arc<Busy>,
    done: impl FnOnce() + Send + 'static,
) -> Result<Running, ErrorMsg> {
    let mut plan = client::third_party::plan(&req, key).map_err(|e| {
        ErrorMsg::new(
            ErrorCode::InvalidRequest,
            format!("third-party test refused: {e:#}"),
        )
    })?;
    if busy.0.swap(true, Ordering::AcqRel) {
        return Err(ErrorMsg::new(
            ErrorCode::Busy,
            "third-party test refused: this netserver runs one already (a mesh puts no host in two tests at once)",
        ));
    }
    let stop = client::interrupt::StopGroup::new();
    plan.stop_group = Some(stop.clone());
    let outcome = Arc::new(Mutex::new(None));
    let (slot, target) = (outcome.clone(), format!("{}:{}", req.host, req.port));
    // the test's thread frees the daemon for the next when the test ends
    // (a client that went away does not end it sooner: -l bounds it)
    let ended = busy.clone();
    let spawned = thread::Builder::new()
        .name("third-party".into())
        .spawn(move || {
            let r = client::third_party::run(&plan).map_err(|e| {
                ErrorMsg::new(
                    ErrorCode::TestFailed,
                    format!("third-party test against {target} failed: {e:#}"),
                )
            });
            if let Ok(mut s) = slot.lock() {
                *s = Some(r);
            }
            ended.0.store(false, Ordering::Release);
            done();
        });
    let running = Running {
        req,
        start: SystemTime::now(),
        stop,
        outcome,
    };
    match spawned {
        Ok(_) => Ok(running),
        Err(e) => {
            busy.0.store(false, Ordering::Release);
            Err(ErrorMsg::new(
                ErrorCode::Resource,
                format!("third-party test refused: no thread for it: {e}"),
            ))
        }
    }
}
