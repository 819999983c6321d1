//! Who may test on the iperf3 port: iperf3's own authentication, as its
//! clients speak it (`iperf3 --username U --rsa-public-key-path PUB`), or
//! nobody where the daemon requires a key and no credentials are given.
//!
//! The client sends, in its parameters' `authtoken`, base64 of the RSA
//! encryption (with the server's public key) of the text
//! `user: U\npwd:  P\nts:   T`, T its clock's seconds. The server decrypts
//! it with its private key (OAEP with SHA-1, as iperf3 3.17 and later
//! encrypt; PKCS #1 v1.5, as earlier clients do, tried after it), refuses a
//! time more than the skew threshold away from its own, and looks the user
//! up in the users file: lines `U,H` with H the hex SHA-256 of `{U}P`
//! (iperf3's format; empty lines, lines without a comma and `#` lines are
//! skipped). The file is read again at each check, as iperf3 -s does, so
//! users are added without a restart.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use base64::Engine as _;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::DecodePrivateKey;
use sha2::{Digest, Sha256};

/// The longest authtoken read (a 16384-bit key's block is 2,731 base64
/// characters).
const MAX_TOKEN: usize = 4096;
/// The most bytes of the users file read.
const MAX_USERS_FILE: u64 = 1 << 20;

/// Who may test on the iperf3 port.
pub enum Iperf3Gate {
    /// Nobody: the daemon requires a key (`--key-file`), iperf3's clients
    /// cannot prove it, and no credentials were given.
    KeyRequired,
    /// Clients that authenticate as iperf3 does.
    Credentials {
        key: Box<rsa::PrivateKey>,
        users: PathBuf,
        /// Seconds the client's clock may be off ours.
        skew: u64,
    },
}

impl std::fmt::Debug for Iperf3Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Iperf3Gate::KeyRequired => f.write_str("Iperf3Gate::KeyRequired"),
            Iperf3Gate::Credentials { users, skew, .. } => f
                .debug_struct("Iperf3Gate::Credentials")
                .field("users", users)
                .field("skew", skew)
                .finish_non_exhaustive(),
        }
    }
}

impl Iperf3Gate {
    /// The gate of `--rsa-private-key-path` and `--authorized-users-path`:
    /// the key read and the users file readable now (errors name the
    /// option).
    pub fn credentials(key: &Path, users: &Path, skew: u64) -> Result<Iperf3Gate, String> {
        let pem = std::fs::read_to_string(key)
            .map_err(|e| format!("--rsa-private-key-path {}: {e}", key.display()))?;
        read_users(users).map_err(|e| format!("--authorized-users-path {e}"))?;
        // absolute, so that a detached daemon (cwd /) reads the same file
        let users = std::path::absolute(users).unwrap_or_else(|_| users.to_path_buf());
        Iperf3Gate::with_key(&pem, users, skew)
            .map_err(|e| format!("--rsa-private-key-path {}: {e}", key.display()))
    }

    /// The gate of a private key in PEM (PKCS #8 or PKCS #1, unencrypted)
    /// and a users file.
    pub fn with_key(pem: &str, users: PathBuf, skew: u64) -> Result<Iperf3Gate, String> {
        let parsed = rsa::PrivateKey::from_pkcs8_pem(pem)
            .map_err(|e| e.to_string())
            .or_else(|_| rsa::PrivateKey::from_pkcs1_pem(pem).map_err(|e| e.to_string()))
            .map_err(|e| {
                format!("not an unencrypted RSA private key in PEM (PKCS #8 or PKCS #1): {e}")
            })?;
        Ok(Iperf3Gate::Credentials {
            key: Box::new(parsed),
            users,
            skew,
        })
    }

    /// What the daemon says of it at start.
    pub fn describe(&self) -> String {
        match self {
            Iperf3Gate::KeyRequired => "iperf3 clients are refused: --key-file requires a key they cannot prove; give them credentials (--rsa-private-key-path and --authorized-users-path) or let them in with --allow-iperf3-unauthenticated".into(),
            Iperf3Gate::Credentials { users, .. } => format!(
                "iperf3 clients must authenticate (iperf3 --username, users in {})",
                users.display()
            ),
        }
    }

    fn check_at(&self, token: Option<&str>, now: i64) -> Result<String, String> {
        let Iperf3Gate::Credentials { key, users, skew } = self else {
            return Err(
                "this netserver requires a key (--key-file) and takes no iperf3 credentials".into(),
            );
        };
        let token = token.ok_or("no credentials (iperf3 --username and --rsa-public-key-path)")?;
        let (user, password, ts) = decode_token(key, token)?;
        let off = now.saturating_sub(ts).unsigned_abs();
        if off > *skew {
            return Err(format!(
                "user {user}: the client's clock is {off} s off this host's (at most {skew}: --time-skew-threshold)"
            ));
        }
        let hash = hex_sha256(&format!("{{{user}}}{password}"));
        let listed = read_users(users)?;
        // every line compared in full, whichever matches
        let found = listed.iter().fold(false, |found, (u, h)| {
            found | (same(u.as_bytes(), user.as_bytes()) & same(h.as_bytes(), hash.as_bytes()))
        });
        if found {
            Ok(user)
        } else {
            Err(format!(
                "user {user}: not in the users file, or a wrong password"
            ))
        }
    }
}

impl proto::iperf3::Iperf3Auth for Iperf3Gate {
    fn check(&self, authtoken: Option<&str>) -> Result<(), String> {
        self.check_at(authtoken, crate::policy::unix_now() as i64)
            .map(drop)
    }
}

/// The token's user, password and time.
fn decode_token(key: &rsa::PrivateKey, token: &str) -> Result<(String, String, i64), String> {
    if token.len() > MAX_TOKEN {
        return Err(format!(
            "a token of {} bytes, more than {MAX_TOKEN}",
            token.len()
        ));
    }
    // OpenSSL's base64 breaks lines: whitespace is not part of it
    let b64: String = token.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let sealed = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| "the token is not base64")?;
    let text = key
        .decrypt(rsa::Oaep::<sha1::Sha1>::new(), &sealed)
        .or_else(|_| key.decrypt(rsa::Pkcs1v15Encrypt, &sealed))
        .map_err(|_| "the token does not decrypt with this netserver's key")?;
    let text = String::from_utf8(text).map_err(|_| "the token's text is not UTF-8")?;
    // iperf3's "user: %s\npwd:  %s\nts:   %" PRId64, read as sscanf does
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    match words.as_slice() {
        ["user:", user, "pwd:", password, "ts:", ts, ..] => {
            let ts = ts
                .parse::<i64>()
                .map_err(|_| "the token's time is not a number")?;
            Ok((user.to_string(), password.to_string(), ts))
        }
        _ => Err("the token's text is not iperf3's".into()),
    }
}

/// The users file's entries (user, hash), as iperf3 reads them.
fn read_users(path: &Path) -> Result<Vec<(String, String)>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_USERS_FILE)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut parts = l.split(',');
            let user = parts.next()?;
            let hash = parts.next()?;
            Some((user.to_string(), hash.trim_end_matches('\r').to_string()))
        })
        .collect())
}

fn hex_sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Equal, in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1024-bit key made for these tests alone (PKCS #1, as `openssl
    /// genrsa -traditional` writes it).
    const TEST_KEY: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIICXAIBAAKBgQDJwbbkvcz8eDVgMIuK4z9kY3cWhUgdf7p4ATkDz0oX/D0NO+Zx\npvNH/GPyBtJVAGOe1EsLYMCbEnFeFDyAPhskdww/votkmneyozi+xyI2KDdgZuGX\nwzZ7Wc4xhRfpYz6RZWYt/ym1AMq1wkLFqeENHkyqWp0M6RO0My4DbKmjpQIDAQAB\nAoGAPlr3isS6eQEyBfOa/Sb07bLsGHLC8hMK75H5LBtB3B3iRJfRxiiCIip4PVIs\naYcAQxN7yh1yCbtufFQmyr/nJRXEB/z7qi8+yywOhjsuXiRADYkIsJhLiI0NyE18\n41E2cBE51oRWuxK8gbvpJ7WVvonDZYcoEo36CumXJA7Tf5UCQQD8M0nEvKgbdiVC\nSNfbrQjPG+jiOt1DDBZw/ILr5z+kfIeviMMq1l47w7595ylWnP2T/vTyLX+uKD+f\nfqTDBVsjAkEAzMvevtOP7sJT0r2/Vq2eQXuZx/ANG7+PVKZJ0BDKU6wK9Alg5J0o\nQ/BzPHw5Q+QrDHJYUNgUIvyiCyJZkdK2lwJADNN66/OARS1EBdP4jmaFbSsJNAA0\nYoWJ2qMs8VxoYzAmImo9Kr+OOVHiLTsFYi9HwjAUOwDPXocTfUQOkxCBqwJAPT3h\n+FKvwghepLCVXUhCAPcDP6TrZpbcN8YaYJwExQy3oc6EKRlOBzMKYtYLEeBTdz9i\nZZqYOvYtRwMYoeDPNQJBALOJ3ddPL5wWU8h8P9/0gNl8ED2ILCOQquu5NcdNKGvD\nO7eVCqn04uQQniULhlYzKbIngGU+FFSPA/XkL+yCE3Q=\n-----END RSA PRIVATE KEY-----\n";

    fn gate(dir: &Path) -> (Iperf3Gate, rsa::PublicKey) {
        let key_path = dir.join("private.pem");
        std::fs::write(&key_path, TEST_KEY).unwrap();
        let users = dir.join("users.csv");
        std::fs::write(
            &users,
            format!(
                "# comment\n\nnocomma\nalice,{}\nbob,{}\r\n",
                hex_sha256("{alice}wonder"),
                hex_sha256("{bob}builder")
            ),
        )
        .unwrap();
        let g = Iperf3Gate::credentials(&key_path, &users, 10).expect("a gate");
        let Iperf3Gate::Credentials { key, .. } = &g else {
            unreachable!()
        };
        let public = key.as_ref().as_ref().clone();
        (g, public)
    }

    fn token(public: &rsa::PublicKey, text: &str, oaep: bool) -> String {
        let mut rng = getrandom_sys::SysRng;
        let sealed = if oaep {
            public.encrypt(&mut rng, rsa::Oaep::<sha1::Sha1>::new(), text.as_bytes())
        } else {
            public.encrypt(&mut rng, rsa::Pkcs1v15Encrypt, text.as_bytes())
        }
        .expect("sealed");
        base64::engine::general_purpose::STANDARD.encode(sealed)
    }

    #[test]
    fn iperf3s_tokens_are_checked_as_iperf3_checks_them() {
        let dir = std::env::temp_dir().join(format!("np-iperf3-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (g, public) = gate(&dir);
        let now = 1_800_000_000;
        let text = |u: &str, p: &str, ts: i64| format!("user: {u}\npwd:  {p}\nts:   {ts}");
        // both paddings: 3.17 and later (OAEP), before (PKCS #1 v1.5)
        for oaep in [true, false] {
            let t = token(&public, &text("alice", "wonder", now), oaep);
            assert_eq!(g.check_at(Some(&t), now), Ok("alice".into()));
        }
        // a CRLF line in the file, a clock 10 s off: still in
        let t = token(&public, &text("bob", "builder", now - 10), true);
        assert_eq!(g.check_at(Some(&t), now), Ok("bob".into()));
        for (t, why) in [
            (None, "no credentials"),
            (
                Some(token(&public, &text("alice", "wrong", now), true)),
                "wrong password",
            ),
            (
                Some(token(&public, &text("carol", "x", now), true)),
                "not in the users file",
            ),
            (
                Some(token(&public, &text("alice", "wonder", now + 11), true)),
                "11 s off",
            ),
            (Some("not base64!".to_string()), "base64"),
            (Some("AAAA".to_string()), "does not decrypt"),
            (Some(token(&public, "hello", true)), "not iperf3's"),
            (Some("A".repeat(MAX_TOKEN + 1)), "more than"),
        ] {
            let e = g.check_at(t.as_deref(), now).expect_err(why);
            assert!(e.contains(why), "{why}: {e}");
        }
        let e = Iperf3Gate::KeyRequired.check_at(None, now).unwrap_err();
        assert!(e.contains("--key-file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
