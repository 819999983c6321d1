//! An iperf3 client's `authtoken`, any bytes: decoded (base64), decrypted
//! with the netserver's key (OAEP, then PKCS #1 v1.5), read as iperf3's
//! text and looked up in the users file. Nothing panics, nothing passes
//! that is not a user's token, and every refusal has its reason.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use netserver::iperf3_auth::Iperf3Gate;
use proto::iperf3::Iperf3Auth;

/// A key made for fuzzing alone, and a users file of one user.
fn gate() -> &'static Iperf3Gate {
    static GATE: OnceLock<Iperf3Gate> = OnceLock::new();
    GATE.get_or_init(|| {
        let users = std::env::temp_dir().join(format!("fuzz-iperf3-users-{}", std::process::id()));
        // alice's password "wonder": the hex SHA-256 of "{alice}wonder"
        std::fs::write(
            &users,
            "alice,8d4f4b1b0f8c7a53f6c1e2bb5f0a9ad4b6b1f2c1c0f7b0ab8e0e3d1f2a3b4c5d\n",
        )
        .expect("the users file");
        Iperf3Gate::with_key(include_str!("common/iperf3_test_key.pem"), users, 10)
            .expect("the test key")
    })
}

fuzz_target!(|data: &[u8]| {
    let token = String::from_utf8_lossy(data);
    match gate().check(Some(&token)) {
        // (the users file's hash is no real password's)
        Ok(()) => panic!("a token passed: {token:?}"),
        Err(why) => assert!(!why.is_empty()),
    }
});
