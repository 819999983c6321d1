//! The policy's counts kept across a restart (`[daemon] state_file`): a
//! JSON file written whole to a temporary name beside it and renamed over
//! it, so that a crash leaves the last whole state; written each minute,
//! and at a clean stop.

use std::{
    fs,
    io::{self, Write},
    path::Path,
};

use serde::{Deserialize, Serialize};

use super::ledger::{Scope, Usage};

/// What the file holds.
#[derive(Serialize, Deserialize, Debug, Default, PartialEq)]
pub struct State {
    /// The wall clock's seconds when it was written.
    pub written: u64,
    pub uses: Vec<(Scope, Usage)>,
    /// Tokens' tests used, by id, and when each token expires.
    #[serde(default)]
    pub tokens: Vec<(u64, u64, u64)>,
}

/// Write `state` to `path` atomically (a temporary file, synced, renamed
/// over it), private to the daemon's user.
pub fn save(path: &Path, state: &State) -> io::Result<()> {
    let json = serde_json::to_vec(state).map_err(io::Error::other)?;
    let tmp = path.with_extension("tmp");
    let _ = fs::remove_file(&tmp);
    let mut f = engine::sys::open_private_new(&tmp)?;
    f.write_all(&json)?;
    f.sync_all()?;
    fs::rename(&tmp, path)
}

/// Read what `path` holds: nothing if there is no file yet; an error
/// naming the file if it cannot be read or is not a state.
pub fn load(path: &Path) -> Result<State, String> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| format!("{}: not a policy state file: {e}", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(State::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_comes_back_as_written() {
        let dir = std::env::temp_dir().join(format!("np-state-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        assert_eq!(load(&path).unwrap(), State::default());
        let s = State {
            written: 7,
            uses: vec![(
                Scope::Prefix("10.0.0.0".parse().unwrap(), 24),
                Usage {
                    day_tests: 3,
                    ..Usage::default()
                },
            )],
            tokens: vec![(5, 2, 99)],
        };
        save(&path, &s).unwrap();
        assert_eq!(load(&path).unwrap(), s);
        fs::write(&path, b"{not json").unwrap();
        assert!(load(&path).unwrap_err().contains("not a policy state file"));
        let _ = fs::remove_dir_all(&dir);
    }
}
