//! The fleet path: static binaries, the container image, the Kubernetes
//! manifests, and the mesh Job's command across three hosts.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use harness::{Netserver, bin, fields, netns::Mesh, num, run_with_deadline};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository")
        .to_path_buf()
}

/// A tool the fleet tests need: present, or a loud skip (a failure under
/// `NETPERF_REQUIRE_FLEET=1`, as in CI).
fn tool(name: &str, test: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("NETPERF_REQUIRE_FLEET").as_deref() != Ok("1"),
            "{test}: {name} is not installed (NETPERF_REQUIRE_FLEET=1)"
        );
        eprintln!("!!! SKIPPED {test}: {name} is not installed");
    }
    found
}

/// Whether an ELF executable asks for a program interpreter (the dynamic
/// loader): its program headers hold a PT_INTERP.
fn has_interpreter(path: &Path) -> bool {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], b"\x7fELF", "{}", path.display());
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let o = phoff + i * size;
        u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) == 3
    })
}

/// Static netperf and netserver build by the documented command, need no
/// loader, and run a test; the image holds them alone, runs netserver in
/// the foreground as nobody, exposes the control port; the manifests
/// validate against the Kubernetes schemas.
#[test]
fn static_binaries_image_and_manifests() {
    // the documented command builds with cargo (a test binary run from a
    // nextest archive, as another user, may have none on its PATH)
    if !tool("cargo", "static_binaries_image_and_manifests") {
        return;
    }
    let root = repo();
    let mut c = Command::new(root.join("dist/container/static-build"));
    c.current_dir(&root);
    let out = run_with_deadline(c, Duration::from_secs(900)).ok();
    let dir = PathBuf::from(out.stdout.trim());
    for b in ["netperf", "netserver"] {
        assert!(
            !has_interpreter(&dir.join(b)),
            "{b} asks for a dynamic loader"
        );
    }
    let mut cmd = Command::new(dir.join("netserver"));
    cmd.args(["-D", "-p", "0", "-L", "127.0.0.1"]);
    let ns = Netserver::spawn(cmd);
    let mut c = Command::new(dir.join("netperf"));
    c.args([
        "-H",
        "127.0.0.1",
        "-p",
        &ns.port().to_string(),
        "-l",
        "1",
        "-P",
        "0",
    ]);
    let out = run_with_deadline(c, Duration::from_secs(60)).ok();
    assert!(num(fields(&out.stdout)[4]) > 0.0, "{out}");
    drop(ns);

    if tool("podman", "the container image") {
        let image = format!("localhost/rsnetperf-ci:{}", std::process::id());
        let mut c = Command::new(root.join("dist/container/build"));
        c.current_dir(&root).arg(&image);
        run_with_deadline(c, Duration::from_secs(900)).ok();
        let mut c = Command::new("podman");
        c.args([
            "image",
            "inspect",
            &image,
            "--format",
            "{{.Config.User}}|{{json .Config.Entrypoint}}|{{json .Config.ExposedPorts}}",
        ]);
        let conf = run_with_deadline(c, Duration::from_secs(60)).ok().stdout;
        let f: Vec<&str> = conf.trim().split('|').collect();
        assert_eq!(f[0], "65534:65534", "{conf}");
        assert_eq!(f[1], r#"["/netserver","-D"]"#, "{conf}");
        assert!(f[2].contains("12865/tcp"), "{conf}");
        // its files: the two executables, nothing else (no shell)
        let mut c = Command::new("podman");
        c.args(["create", &image]);
        let id = run_with_deadline(c, Duration::from_secs(60)).ok().stdout;
        let id = id.trim().to_string();
        let mut c = Command::new("sh");
        c.args(["-c", &format!("podman export {id} | tar -t")]);
        let files = run_with_deadline(c, Duration::from_secs(60)).ok().stdout;
        let _ = Command::new("podman").args(["rm", &id]).output();
        let _ = Command::new("podman").args(["rmi", &image]).output();
        let mut names: Vec<&str> = files
            .lines()
            .map(|l| l.trim_end_matches('/'))
            .filter(|l| !l.is_empty() && !matches!(*l, "dev" | "etc" | "proc" | "sys" | "run"))
            .filter(|l| !l.starts_with("etc/") && !l.starts_with("dev/") && !l.starts_with("run/"))
            .collect();
        names.sort_unstable();
        assert_eq!(names, ["netperf", "netserver"], "{files}");
    }

    if tool("kubernetes-validate", "the Kubernetes manifests") {
        let mut c = Command::new("sh");
        c.current_dir(&root)
            .args(["-c", "kubernetes-validate --strict dist/k8s/*.yaml"]);
        let out = run_with_deadline(c, Duration::from_secs(300));
        assert!(out.success(), "{out}");
        assert_eq!(
            out.stdout.matches("passed").count() + out.stderr.matches("passed").count(),
            7,
            "{out}"
        );
        // the Prometheus operator's pair: the Service against its schema,
        // the ServiceMonitor (a custom resource, no schema) against what it
        // must agree with
        let mut c = Command::new("sh");
        c.current_dir(&root).args([
            "-c",
            "kubernetes-validate --strict dist/k8s/prometheus-operator/*.yaml",
        ]);
        let out = run_with_deadline(c, Duration::from_secs(300));
        assert!(out.success(), "{out}");
        let said = format!("{}{}", out.stdout, out.stderr);
        assert_eq!(said.matches("passed").count(), 1, "{out}");
        assert!(
            said.contains("Couldn't find schema for kind ServiceMonitor"),
            "{out}"
        );
        let mut c = Command::new("python3");
        c.current_dir(&root)
            .arg("tests/tests/e2e/servicemonitor_check.py");
        let out = run_with_deadline(c, Duration::from_secs(60));
        assert!(out.success(), "{out}");
        assert!(out.stdout.contains("servicemonitor ok"), "{out}");
    }
}

/// The mesh Job's command line (mesh-job.yaml's shell words, the pods'
/// discovery swapped for a list): three hosts, a fleet netserver on each,
/// the Job's command run from a fourth prints the matrix and the JSON
/// document between its markers, every ordered pair measured by two flows.
#[test]
fn the_mesh_jobs_command_measures_every_pair() {
    let Some(m) = Mesh::new("the_mesh_jobs_command_measures_every_pair", 4) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("rsnetperf-meshjob-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("netserver.key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let servers: Vec<Netserver> = (0..3)
        .map(|i| {
            let mut c = m.command(i, &bin("netserver"));
            c.args([
                "-D",
                "-p",
                "12865",
                "-L",
                &m.addrs[i],
                "--fleet",
                "--key-file",
            ])
            .arg(&key);
            Netserver::spawn(c)
        })
        .collect();
    let script = job_script("mesh-job.yaml", &key, ("/results", &dir));
    assert!(script.starts_with("netperf mesh "), "{script}");
    let mut c = m.command(3, Path::new("sh"));
    c.args(["-c", &script])
        .env("PATH", with_netperf())
        .env("MESH_HOSTS", m.addrs[..3].join(","))
        .env("MESH_TEST", "TCP_STREAM")
        .env("MESH_LENGTH", "1")
        .env("MESH_TEST_ARGS", "--flows 2");
    let out = run_with_deadline(c, Duration::from_secs(120));
    assert!(out.success(), "{out}");
    assert!(out.stdout.contains("rows send, columns receive"), "{out}");
    let json: String = out
        .stdout
        .lines()
        .skip_while(|l| *l != "--- mesh.json ---")
        .skip(1)
        .take_while(|l| *l != "--- end ---")
        .collect();
    let doc: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {out}"));
    let pairs = doc["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 6, "{doc}");
    for p in pairs {
        assert!(p["throughput"].as_f64().unwrap() > 0.0, "{p}");
        assert_eq!(p["result"]["local"]["flow_count"], 2, "{p}");
        assert_ne!(p["from"], p["to"]);
    }
    drop(servers);
}

/// A Job's shell script (the folded block after `args:`, its lines joined
/// as YAML folds them), the pods' discovery swapped for `$MESH_HOSTS`, the
/// key for `key`, and the volume at `mount.0` for the directory `mount.1`.
fn job_script(file: &str, key: &Path, mount: (&str, &Path)) -> String {
    let job = std::fs::read_to_string(repo().join("dist/k8s").join(file)).unwrap();
    let lines: Vec<&str> = job.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim() == "- >-")
        .expect("the args block");
    let indent = lines[at + 1].len() - lines[at + 1].trim_start().len();
    lines[at + 1..]
        .iter()
        .take_while(|l| l.len() - l.trim_start().len() >= indent && !l.trim().is_empty())
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ")
        .replace("--hosts-from \"$MESH_SERVICE\"", "--hosts \"$MESH_HOSTS\"")
        .replace("/etc/netserver/netserver.key", &key.display().to_string())
        .replace(mount.0, &mount.1.display().to_string())
}

/// `PATH` with the netperf under test first.
fn with_netperf() -> String {
    format!(
        "{}:{}",
        bin("netperf").parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The mesh CronJob's command line (mesh-cronjob.yaml's shell words, the
/// pods' discovery swapped for a list), run twice over three hosts with a
/// Pushgateway beside the controller: the first run has no baseline and
/// leaves its document as the next one's; the second judges every pair
/// against it; each pushes every pair's figure.
#[test]
fn the_mesh_cronjobs_command_keeps_its_baseline_and_pushes() {
    let Some(m) = Mesh::new("the_mesh_cronjobs_command_keeps_its_baseline_and_pushes", 4) else {
        return;
    };
    if !tool("prometheus-pushgateway", "the CronJob's Pushgateway") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("rsnetperf-meshcron-{}", std::process::id()));
    let history = dir.join("history");
    std::fs::create_dir_all(&history).unwrap();
    let key = dir.join("netserver.key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    for i in 0..3 {
        m.shape(i, 100, 100);
    }
    let _servers: Vec<Netserver> = (0..3).map(|i| m.fleet_netserver(i, &key, &[])).collect();
    let mut gw = m.command(3, Path::new("prometheus-pushgateway"));
    gw.arg("--web.listen-address=127.0.0.1:9091")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _gw = Killed(gw.spawn().unwrap());
    let script = job_script("mesh-cronjob.yaml", &key, ("/history", &history));
    assert!(script.contains("--baseline /"), "{script}");
    let run = || {
        let mut c = m.command(3, Path::new("sh"));
        c.args(["-c", &script])
            .env("PATH", with_netperf())
            .env("MESH_HOSTS", m.addrs[..3].join(","))
            .env("MESH_TEST", "TCP_STREAM")
            .env("MESH_LENGTH", "2")
            .env("MESH_TEST_ARGS", "--flows 1")
            .env("PUSHGATEWAY", "http://127.0.0.1:9091");
        run_with_deadline(c, Duration::from_secs(120))
    };
    // (the gateway listens before the first push)
    std::thread::sleep(Duration::from_secs(1));
    let first = run();
    assert!(first.success(), "{first}");
    assert!(!first.stdout.contains("baseline"), "{first}");
    assert!(first.stderr.contains("pushed to"), "{first}");
    let last = history.join("last.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&last).unwrap()).unwrap();
    assert_eq!(doc["pairs"].as_array().unwrap().len(), 6, "{doc}");
    let second = run();
    assert!(
        second.stdout.contains("no pair changed beyond the noise")
            || second.stdout.contains("changed: "),
        "{second}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&last).unwrap()).unwrap();
    assert_eq!(doc["baseline"]["compared"], 6, "{doc}");
    assert!(!history.join("new.json").exists());
    // the gateway holds the second mesh's figures, a pair each
    let out = m
        .command(3, Path::new("python3"))
        .args([
            "-c",
            "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9091/metrics').read().decode())",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("netperf_mesh_pair_value{"))
            .count(),
        6,
        "{text}"
    );
    assert!(text.contains("netperf_mesh_pair_change{"), "{text}");
}
