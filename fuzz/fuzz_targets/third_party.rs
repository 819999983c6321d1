//! What a third-party request (`netserver --fleet`) can carry: any typed
//! request, as its bytes decode (postcard, as the control protocol reads
//! them), checked and turned into a plan (a refusal names its reason,
//! never a panic); a plan that passes keeps its key, its JSON output and
//! the requested netserver, and names no file, data address, port or
//! output of its own: the typed request has nowhere to say one.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(req) = proto::codec::decode_exact::<proto::ThirdParty>(data) else {
        return;
    };
    let key = engine::auth::Key::from_token("0123456789abcdef0123456789abcdef");
    if let Ok(plan) = client::third_party::plan(&req, key) {
        assert!(plan.json);
        assert!(plan.data_host.is_none());
        assert!(plan.fill_file.is_none() && plan.plot.is_none());
        assert!(plan.selection.is_none() && plan.observer.is_none());
        assert!(plan.local_host.is_none() && plan.data_local.is_none());
        assert!(plan.local_port.is_none() && plan.local_data_port.is_none());
        assert!(plan.port_range.is_none() && !plan.json_stream);
        assert_eq!(plan.host.as_deref(), Some(req.host.as_str()));
        assert_eq!(plan.port, req.port);
        assert!(matches!(plan.auth, Some(client::plan::AuthSource::Given(_))));
        assert_eq!(plan.dialect, client::plan::DialectChoice::Native);
    }
});
