//! What a third-party request (`netserver --fleet`) can carry: any host,
//! port and options, checked and parsed as netperf's options into a plan
//! (a refusal names its reason, never a panic); a plan that passes keeps
//! its key, its JSON output and the requested netserver, and names no
//! data address of its own; and any JSON answer, gathered in parts by a
//! client, comes back whole or as a refusal.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut words = text.split('\0');
    let host = words.next().unwrap_or_default().to_string();
    let port = words.next().and_then(|p| p.parse().ok()).unwrap_or(12865);
    let req = proto::ThirdParty {
        host,
        port,
        args: words.map(str::to_string).collect(),
    };
    let key = engine::auth::Key::from_token("0123456789abcdef0123456789abcdef");
    if let Ok(plan) = client::third_party::plan(&req, key) {
        assert!(plan.json);
        assert!(plan.data_host.is_none());
        assert!(plan.fill_file.is_none() && plan.plot.is_none());
        // nothing in it names a path, an address or a port of the host
        assert!(plan.selection.is_none() && plan.observer.is_none());
        assert!(plan.local_host.is_none() && plan.data_local.is_none());
        assert_eq!(plan.host.as_deref(), Some(req.host.as_str()));
        assert_eq!(plan.port, req.port);
        assert!(matches!(plan.auth, Some(client::cli::AuthSource::Given(_))));
    }
});
