//! The authentication handshake and sealed frames: arbitrary hellos, nonces,
//! proofs and sealed bodies never panic, and nothing but the right proof
//! authenticates.
#![no_main]

use engine::auth::Key;
use libfuzzer_sys::fuzz_target;
use proto::{ClientMsg, Hello, Limits, Role, ServerAction, ServerMsg, ServerSession};

fuzz_target!(|data: &[u8]| {
    let key = Key::from_passphrase("fuzzing key").expect("key");
    let server_nonce = [3u8; 32];
    let mut s = ServerSession::new("fuzz", Limits::default(), Some(Box::new(key.clone())), server_nonce);
    let ServerAction::Reply(ServerMsg::Hello(h)) = s.handle(ClientMsg::Hello(Hello::new("c"))) else {
        panic!("no challenge");
    };
    assert_eq!(h.challenge, Some(server_nonce));
    if data.len() >= 64 {
        let mut nonce = [0u8; 32];
        let mut proof = [0u8; 32];
        nonce.copy_from_slice(&data[..32]);
        proof.copy_from_slice(&data[32..64]);
        let ok = matches!(s.handle(ClientMsg::Auth { nonce, proof }), ServerAction::Reply(ServerMsg::AuthOk { .. }));
        let right = proto::Authenticator::proof(&key, Role::Client, &server_nonce, &nonce);
        assert_eq!(ok, proof == right && nonce != server_nonce);
    }
    // sealed frames: arbitrary bodies are refused, never a panic
    let mut ch = key.channel(Role::Server, &server_nonce, &[1; 32]);
    let _ = ch.open(data);
    let mut client = key.channel(Role::Client, &server_nonce, &[1; 32]);
    let mut body = data.to_vec();
    client.seal(&mut body);
    assert_eq!(ch.open(&body).ok(), Some(data));
});
