//! What an operator's policy file and a client's token can hold: any
//! text parsed as a policy (an error names a line, never a panic; a
//! parsed policy's limits and windows are then exercised), and any text
//! taken as a token, a token's public part, or a netperf 2.7 passphrase
//! (verified against a key, never a panic; a token that verifies reads
//! back as signed).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(p) = netserver::policy::PolicyFile::parse(text) {
        let _ = p.max_entries();
        for ip in ["127.0.0.1", "::1", "::ffff:10.1.2.3", "2001:2::9"] {
            let _ = p.prefix.of(ip.parse().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()));
        }
    }
    let key = engine::auth::Key::from_token("0123456789abcdef0123456789abcdef");
    if let Some(t) = key.verify_token(text) {
        assert_eq!(key.sign_token(&t.payload()), text);
    }
    if let Ok(t) = engine::token::Token::parse(text) {
        let _ = t.admits(std::net::Ipv4Addr::LOCALHOST.into());
        assert_eq!(engine::token::Token::parse(&t.payload()), Ok(t));
        let signed = key.sign_token(&t.payload());
        assert_eq!(key.verify_token(&signed), Some(t));
    }
    let _ = engine::token::parse_prefix(text);
});
