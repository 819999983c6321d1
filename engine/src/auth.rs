//! Authentication of the control connection with a pre-shared key.
//!
//! Both ends prove they know the key without sending it: each sends a
//! random 32-byte nonce, and each proof is HMAC-SHA256 over a role label,
//! the protocol version and both nonces, compared in constant time. A
//! recorded transcript is useless: the other end's nonce is new every time.
//!
//! After the proofs, every control frame carries a sequence number and an
//! HMAC under a session key derived from both nonces ([`Channel`]), so
//! frames can be neither forged nor replayed nor reordered.

use std::{fs, path::Path};

use hmac::{Hmac, Mac};
use proto::{Authenticator, PROTOCOL_VERSION, Role};
use sha2::Sha256;

use crate::EngineError;

type HmacSha256 = Hmac<Sha256>;

/// A pre-shared key.
#[derive(Clone)]
pub struct Key(Vec<u8>);

/// Two keys are the same key (compared in constant time).
impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        proto::session::constant_time_eq(&self.0, &other.0)
    }
}

impl Eq for Key {}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A key from a passphrase (netperf's `-Z`).
    pub fn from_passphrase(p: &str) -> Result<Key, EngineError> {
        if p.is_empty() {
            return Err(EngineError::Invalid("-Z: the passphrase is empty".into()));
        }
        Ok(Key(p.as_bytes().to_vec()))
    }

    /// Whether the key is too long to guess at any rate (16 bytes or more:
    /// every key file's; a `-Z` passphrase that long): then an address's
    /// wrong attempts, held while their refusals wait their turn, may make
    /// room for its newcomers (a newcomer with the right key is never kept
    /// out), the verdicts that frees being worthless to a guesser.
    pub fn unguessable(&self) -> bool {
        self.0.len() >= 16
    }

    /// Read a key file: its contents, surrounding white space removed. The
    /// file must not be readable by its group or by others.
    pub fn from_file(path: &Path) -> Result<Key, EngineError> {
        let meta = fs::metadata(path)
            .map_err(|e| EngineError::io(format!("--key-file {}", path.display()), e))?;
        if let Some(mode) = crate::sys::open_to_others(&meta) {
            return Err(EngineError::Invalid(format!(
                "--key-file {}: the file is readable by its group or by others (mode {:o}); chmod 600 it",
                path.display(),
                mode & 0o777
            )));
        }
        let bytes = fs::read(path)
            .map_err(|e| EngineError::io(format!("--key-file {}", path.display()), e))?;
        let key = bytes.trim_ascii().to_vec();
        if key.len() < 16 {
            return Err(EngineError::Invalid(format!(
                "--key-file {}: the key is {} bytes; use at least 16 (e.g. head -c 32 /dev/urandom | base64)",
                path.display(),
                key.len()
            )));
        }
        Ok(Key(key))
    }

    /// The whole token for the public part `payload`: it and its
    /// signature under this key ([`crate::token`]).
    pub fn sign_token(&self, payload: &str) -> String {
        let mut m = self.mac();
        m.update(b"rsnetperf token\0");
        m.update(payload.as_bytes());
        let sig: [u8; 32] = m.finalize().into_bytes().into();
        format!(
            "{payload}_{}",
            crate::token::hex(sig.get(..16).unwrap_or_default())
        )
    }

    /// What `token` allows, if this key signed it (compared in constant
    /// time); its expiry, prefix and count are the caller's to enforce.
    pub fn verify_token(&self, token: &str) -> Option<crate::token::Token> {
        let (payload, _) = crate::token::split(token)?;
        let t = crate::token::Token::parse(payload).ok()?;
        let right = self.sign_token(payload);
        proto::session::constant_time_eq(right.as_bytes(), token.as_bytes()).then_some(t)
    }

    /// The key a token's holder proves it with: the whole token.
    pub fn from_token(token: &str) -> Key {
        Key(token.as_bytes().to_vec())
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes keys of any length; this cannot fail.
        <HmacSha256 as Mac>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!())
    }

    fn transcript(
        &self,
        label: &[u8],
        server_nonce: &[u8; 32],
        client_nonce: &[u8; 32],
    ) -> HmacSha256 {
        let mut m = self.mac();
        m.update(label);
        m.update(&PROTOCOL_VERSION.to_be_bytes());
        m.update(server_nonce);
        m.update(client_nonce);
        m
    }

    /// The session's frame key and its two channels, once both proofs are in.
    pub fn channel(&self, role: Role, server_nonce: &[u8; 32], client_nonce: &[u8; 32]) -> Channel {
        let key: [u8; 32] = self
            .transcript(b"rsnetperf session", server_nonce, client_nonce)
            .finalize()
            .into_bytes()
            .into();
        Channel {
            key,
            role,
            sent: 0,
            received: 0,
        }
    }
}

fn label(role: Role) -> &'static [u8] {
    match role {
        Role::Client => b"rsnetperf client",
        Role::Server => b"rsnetperf server",
    }
}

impl Authenticator for Key {
    fn proof(&self, role: Role, server_nonce: &[u8; 32], client_nonce: &[u8; 32]) -> [u8; 32] {
        self.transcript(label(role), server_nonce, client_nonce)
            .finalize()
            .into_bytes()
            .into()
    }

    fn verify(
        &self,
        role: Role,
        server_nonce: &[u8; 32],
        client_nonce: &[u8; 32],
        proof: &[u8; 32],
    ) -> bool {
        // verify_slice compares in constant time.
        self.transcript(label(role), server_nonce, client_nonce)
            .verify_slice(proof)
            .is_ok()
    }

    fn sealer(
        &self,
        role: Role,
        server_nonce: &[u8; 32],
        client_nonce: &[u8; 32],
    ) -> Box<dyn proto::session::Sealer> {
        Box::new(self.channel(role, server_nonce, client_nonce))
    }

    /// A token this key signed is its holder's key: the whole token, which
    /// the server makes again from the part the client names.
    fn for_token(&self, payload: &str) -> Option<Box<dyn Authenticator>> {
        crate::token::Token::parse(payload).ok()?;
        Some(Box::new(Key::from_token(&self.sign_token(payload))))
    }

    fn signed_token(&self, token: &str) -> Option<String> {
        self.verify_token(token).map(|t| t.payload())
    }
}

impl proto::session::Sealer for Channel {
    fn seal(&mut self, body: &mut Vec<u8>) {
        Channel::seal(self, body);
    }

    fn open(&mut self, sealed: &[u8]) -> Result<Vec<u8>, String> {
        Channel::open(self, sealed)
            .map(<[u8]>::to_vec)
            .map_err(|e| e.to_string())
    }
}

/// Bytes a sealed frame body carries after the message: sequence, MAC.
pub const TRAILER: usize = 8 + 32;

/// The authenticated control channel of one session.
#[derive(Clone)]
pub struct Channel {
    key: [u8; 32],
    role: Role,
    sent: u64,
    received: u64,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("sent", &self.sent)
            .field("received", &self.received)
            .finish()
    }
}

impl Channel {
    fn mac(&self, from: Role, seq: u64, body: &[u8]) -> HmacSha256 {
        let mut m =
            <HmacSha256 as Mac>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!());
        m.update(label(from));
        m.update(&seq.to_be_bytes());
        m.update(body);
        m
    }

    /// Append the sequence number and MAC to a message body.
    pub fn seal(&mut self, body: &mut Vec<u8>) {
        let seq = self.sent;
        self.sent += 1;
        let mac: [u8; 32] = self
            .mac(self.role, seq, body)
            .finalize()
            .into_bytes()
            .into();
        body.extend_from_slice(&seq.to_be_bytes());
        body.extend_from_slice(&mac);
    }

    /// Check a sealed body from the peer and return the message body.
    pub fn open<'a>(&mut self, sealed: &'a [u8]) -> Result<&'a [u8], EngineError> {
        let bad = |why: &str| EngineError::Invalid(format!("control frame refused: {why}"));
        let Some(split) = sealed.len().checked_sub(TRAILER) else {
            return Err(bad("too short to carry a MAC"));
        };
        let (body, trailer) = sealed.split_at(split);
        let (seq, mac) = trailer.split_at(8);
        let mut s = [0u8; 8];
        s.copy_from_slice(seq);
        let seq = u64::from_be_bytes(s);
        if seq != self.received {
            return Err(bad("out of sequence (replayed or reordered)"));
        }
        let peer = match self.role {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        };
        self.mac(peer, seq, body)
            .verify_slice(mac)
            .map_err(|_| bad("bad MAC"))?;
        self.received += 1;
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(unix)]
    use std::os::unix::fs::PermissionsExt as _;

    fn key() -> Key {
        Key::from_passphrase("correct horse battery staple").unwrap()
    }

    #[test]
    fn proofs_verify_and_differ_by_role_and_nonce() {
        let k = key();
        let (s, c) = ([1u8; 32], [2u8; 32]);
        let p = k.proof(Role::Client, &s, &c);
        assert!(k.verify(Role::Client, &s, &c, &p));
        assert!(!k.verify(Role::Server, &s, &c, &p));
        assert!(!k.verify(Role::Client, &[3; 32], &c, &p));
        let other = Key::from_passphrase("wrong").unwrap();
        assert!(!other.verify(Role::Client, &s, &c, &p));
    }

    #[test]
    fn channel_seals_and_opens_in_order_only() {
        let k = key();
        let (s, c) = ([5u8; 32], [6u8; 32]);
        let mut client = k.channel(Role::Client, &s, &c);
        let mut server = k.channel(Role::Server, &s, &c);
        let mut a = b"first".to_vec();
        client.seal(&mut a);
        let mut b = b"second".to_vec();
        client.seal(&mut b);
        assert_eq!(server.open(&a).unwrap(), b"first");
        // a replay of the first frame is refused
        assert!(server.open(&a).is_err());
        assert_eq!(server.open(&b).unwrap(), b"second");
        // tampering is refused
        let mut t = b"third".to_vec();
        client.seal(&mut t);
        t[0] ^= 1;
        assert!(server.open(&t).is_err());
        // the server's own frames do not pass as the client's
        let mut r = b"reply".to_vec();
        server.seal(&mut r);
        let mut other_server = k.channel(Role::Server, &s, &c);
        assert!(other_server.open(&r).is_err());
        assert_eq!(client.open(&r).unwrap(), b"reply");
        assert!(server.open(&[0; 10]).is_err());
    }

    #[test]
    fn key_files_must_be_private() {
        let dir = std::env::temp_dir().join(format!("keytest-{}", std::process::id()));
        fs::write(&dir, "0123456789abcdef0123456789abcdef\n").unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            Key::from_file(&dir)
                .unwrap_err()
                .to_string()
                .contains("chmod 600")
        );
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o600)).unwrap();
        let k = Key::from_file(&dir).unwrap();
        assert_eq!(k.0, b"0123456789abcdef0123456789abcdef");
        fs::write(&dir, "short").unwrap();
        assert!(
            Key::from_file(&dir)
                .unwrap_err()
                .to_string()
                .contains("at least 16")
        );
        fs::remove_file(&dir).unwrap();
    }
}
