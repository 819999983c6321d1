//! The authentication handshake and sealed frames, from both ends.
//!
//! The first input byte picks a scenario, so that the fuzzer reaches the
//! states behind a correct proof (which it could never guess):
//! - 0: an arbitrary nonce and proof: only the right proof authenticates;
//! - 1: a client that knows the key (nonce from the input), then a
//!   sequence of frames from the input, each sealed as netperf seals them;
//!   some tampered with or replayed, as the input says: a tampered or
//!   replayed frame is refused, every other one reaches the session;
//! - 2: frames before any authentication: nothing but a correct Auth
//!   gets past the challenge;
//! - 3: netperf's side: a challenge and a server proof from the input:
//!   only the right proof establishes the session.
//!
//! Whatever the scenario, arbitrary bytes given to a channel are refused,
//! never a panic.
#![no_main]

use engine::auth::Key;
use libfuzzer_sys::fuzz_target;
use proto::{
    Authenticator, ClientError, ClientEvent, ClientMsg, ClientSession, Hello, Limits, Role,
    ServerAction, ServerHello, ServerMsg, ServerSession, codec, frame,
};

const SERVER_NONCE: [u8; 32] = [3; 32];

fn key() -> Key {
    Key::from_passphrase("fuzzing key").expect("key")
}

/// A server session that has sent its challenge.
fn challenged(key: &Key) -> ServerSession {
    let mut s = ServerSession::new(
        "fuzz",
        Limits::default(),
        Some(Box::new(key.clone())),
        SERVER_NONCE,
    );
    let ServerAction::Reply(ServerMsg::Hello(h)) = s.handle(ClientMsg::Hello(Hello::new("c")))
    else {
        panic!("no challenge");
    };
    assert_eq!(h.challenge, Some(SERVER_NONCE));
    s
}

fn take32(data: &[u8]) -> Option<([u8; 32], &[u8])> {
    let (head, rest) = data.split_at_checked(32)?;
    let mut a = [0u8; 32];
    a.copy_from_slice(head);
    Some((a, rest))
}

fn closes(a: &ServerAction) -> bool {
    matches!(a, ServerAction::ReplyAndClose(_) | ServerAction::Close)
}

fn arbitrary_proof(data: &[u8]) {
    let key = key();
    let mut s = challenged(&key);
    let Some((nonce, rest)) = take32(data) else {
        return;
    };
    let Some((proof, _)) = take32(rest) else {
        return;
    };
    let ok = matches!(
        s.handle(ClientMsg::Auth { nonce, proof }),
        ServerAction::Reply(ServerMsg::AuthOk { .. })
    );
    let right = key.proof(Role::Client, &SERVER_NONCE, &nonce);
    assert_eq!(ok, proof == right && nonce != SERVER_NONCE);
}

fn sealed_session(data: &[u8]) {
    let key = key();
    let mut s = challenged(&key);
    let Some((nonce, mut rest)) = take32(data) else {
        return;
    };
    let proof = key.proof(Role::Client, &SERVER_NONCE, &nonce);
    let reply = s.handle(ClientMsg::Auth { nonce, proof });
    if nonce == SERVER_NONCE {
        // the server's own nonce reflected back: refused
        assert!(closes(&reply));
        return;
    }
    let ServerAction::Reply(ServerMsg::AuthOk { proof }) = reply else {
        panic!("the right proof was refused");
    };
    assert!(key.verify(Role::Server, &SERVER_NONCE, &nonce, &proof));
    let mut client = key.channel(Role::Client, &SERVER_NONCE, &nonce);
    let mut server = key.channel(Role::Server, &SERVER_NONCE, &nonce);
    let mut last_sealed: Option<Vec<u8>> = None;
    // Each step: a control byte, then a frame (length-prefixed body).
    while let Some((&ctl, after)) = rest.split_first() {
        let Ok(Some((body, used))) = frame::split(after) else {
            return;
        };
        rest = &after[used..];
        let mut sealed = body.to_vec();
        client.seal(&mut sealed);
        let tampered = match ctl % 4 {
            // flip one bit somewhere in the sealed frame
            1 => {
                let at = usize::from(ctl / 4) % sealed.len();
                sealed[at] ^= 1 << (ctl % 8);
                true
            }
            // replay the previous sealed frame instead
            2 => match &last_sealed {
                Some(prev) => {
                    sealed = prev.clone();
                    true
                }
                None => false,
            },
            _ => false,
        };
        let opened = server.open(&sealed).map(<[u8]>::to_vec);
        if tampered {
            assert!(opened.is_err(), "a tampered or replayed frame was accepted");
            // The daemon closes the session here.
            return;
        }
        let body = opened.expect("an intact frame was refused");
        last_sealed = Some(sealed);
        match ClientMsg::decode(&body) {
            Ok(msg) => {
                let again = matches!(msg, ClientMsg::Hello(_) | ClientMsg::Auth { .. });
                let action = s.handle(msg);
                if again {
                    // no second handshake inside an authenticated session
                    assert!(closes(&action));
                }
                if closes(&action) {
                    return;
                }
            }
            Err(e) => {
                let _ = s.protocol_error(&e);
                return;
            }
        }
    }
}

/// After the challenge, the first message decides: a correct Auth, or the
/// end of the session.
fn before_authentication(data: &[u8]) {
    let key = key();
    let mut s = challenged(&key);
    let msg = match frame::split(data) {
        Ok(Some((body, _))) => match ClientMsg::decode(body) {
            Ok(m) => m,
            Err(e) => {
                let _ = s.protocol_error(&e);
                return;
            }
        },
        _ => return,
    };
    let right = match &msg {
        ClientMsg::Auth { nonce, proof } => {
            *nonce != SERVER_NONCE && *proof == key.proof(Role::Client, &SERVER_NONCE, nonce)
        }
        _ => false,
    };
    let action = s.handle(msg);
    if right {
        assert!(matches!(
            action,
            ServerAction::Reply(ServerMsg::AuthOk { .. })
        ));
    } else {
        assert!(closes(&action), "got past the challenge without the key");
    }
}

fn client_side(data: &[u8]) {
    let key = key();
    let Some((client_nonce, rest)) = take32(data) else {
        return;
    };
    let mut c = ClientSession::new(Some(Box::new(key.clone())), client_nonce);
    let Some((&flags, rest)) = rest.split_first() else {
        return;
    };
    let Some((challenge, rest)) = take32(rest) else {
        return;
    };
    let hello = ServerMsg::Hello(ServerHello {
        hello: Hello::new("s"),
        challenge: (flags & 1 == 0).then_some(challenge),
        num_cpus: 1,
        cpu_rate: 0,
    });
    let sent = c.handle(hello);
    if flags & 1 == 1 {
        // a server that does not ask for the key we hold: refused
        assert!(matches!(sent, Err(ClientError::Protocol(_))));
        return;
    }
    let Ok(ClientEvent::Send(ClientMsg::Auth { nonce, proof })) = sent else {
        panic!("no answer to the challenge");
    };
    assert_eq!(nonce, client_nonce);
    assert!(key.verify(Role::Client, &challenge, &client_nonce, &proof));
    let server_proof = match take32(rest) {
        Some((p, _)) if flags & 2 == 0 => p,
        _ => key.proof(Role::Server, &challenge, &client_nonce),
    };
    let right = server_proof == key.proof(Role::Server, &challenge, &client_nonce);
    let got = c.handle(ServerMsg::AuthOk {
        proof: server_proof,
    });
    assert_eq!(matches!(got, Ok(ClientEvent::Established)), right);
    if right {
        assert_eq!(c.auth_nonces(), Some((challenge, client_nonce)));
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&scenario, rest)) = data.split_first() else {
        return;
    };
    match scenario % 4 {
        0 => arbitrary_proof(rest),
        1 => sealed_session(rest),
        2 => before_authentication(rest),
        _ => client_side(rest),
    }
    // Arbitrary bytes to a channel: refused, never a panic; a frame sealed
    // by the peer opens to exactly what was sealed.
    let key = key();
    let mut ch = key.channel(Role::Server, &SERVER_NONCE, &[1; 32]);
    let _ = ch.open(rest);
    let mut ch = key.channel(Role::Server, &SERVER_NONCE, &[1; 32]);
    let mut client = key.channel(Role::Client, &SERVER_NONCE, &[1; 32]);
    let mut body = rest.to_vec();
    client.seal(&mut body);
    assert_eq!(ch.open(&body).ok(), Some(rest));
    let _ = codec::decode_exact::<ClientMsg>(rest);
});
