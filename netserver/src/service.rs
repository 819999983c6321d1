//! netserver as a Windows service (`--install-service`, `--uninstall-service`,
//! and `--service`, which the service manager runs), through the
//! windows-service crate: the service manager starts `netserver.exe
//! --service OPTIONS`, and its stop ends the daemon as Ctrl-C does, in
//! order, with the same limits, deadlines and logging as in the
//! foreground. Elsewhere these options say where the daemon's service
//! lives instead (systemd: dist/systemd).

use netserver::{Error, cli::ServerOptions};

/// The service's name, as `sc` and the Services console show it.
#[cfg(windows)]
const NAME: &str = "netserver";

/// Register the service, to run `netserver.exe --service ARGS` at boot.
#[cfg(windows)]
pub fn install(args: &[String]) -> Result<(), Error> {
    use std::ffi::OsString;
    use windows_service::{
        service::{ServiceAccess, ServiceErrorControl, ServiceInfo, ServiceStartType, ServiceType},
        service_manager::{ServiceManager, ServiceManagerAccess},
    };
    let manager = ServiceManager::local_computer(
        None::<&str>,
        ServiceManagerAccess::CONNECT | ServiceManagerAccess::CREATE_SERVICE,
    )
    .map_err(|e| Error::Setup(format!("--install-service: the service manager: {e}")))?;
    let exe = std::env::current_exe().map_err(|e| Error::system("--install-service", e))?;
    let mut launch = vec![OsString::from("--service")];
    launch.extend(args.iter().map(OsString::from));
    let info = ServiceInfo {
        name: OsString::from(NAME),
        display_name: OsString::from("netserver (rsnetperf)"),
        service_type: ServiceType::OWN_PROCESS,
        start_type: ServiceStartType::AutoStart,
        error_control: ServiceErrorControl::Normal,
        executable_path: exe,
        launch_arguments: launch,
        dependencies: vec![],
        account_name: None,
        account_password: None,
    };
    let service = manager
        .create_service(&info, ServiceAccess::CHANGE_CONFIG)
        .map_err(|e| Error::Setup(format!("--install-service: {e}")))?;
    let _ = service.set_description("netperf's netserver: the other end of network benchmarks");
    println!("netserver: installed the service '{NAME}'; start it with: sc start {NAME}");
    Ok(())
}

/// Remove the service (stopped first if it runs).
#[cfg(windows)]
pub fn uninstall() -> Result<(), Error> {
    use windows_service::{
        service::{ServiceAccess, ServiceState},
        service_manager::{ServiceManager, ServiceManagerAccess},
    };
    let manager = ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT)
        .map_err(|e| Error::Setup(format!("--uninstall-service: the service manager: {e}")))?;
    let service = manager
        .open_service(
            NAME,
            ServiceAccess::QUERY_STATUS | ServiceAccess::STOP | ServiceAccess::DELETE,
        )
        .map_err(|e| Error::Setup(format!("--uninstall-service: {e}")))?;
    if service
        .query_status()
        .is_ok_and(|s| s.current_state != ServiceState::Stopped)
    {
        let _ = service.stop();
    }
    service
        .delete()
        .map_err(|e| Error::Setup(format!("--uninstall-service: {e}")))?;
    println!("netserver: removed the service '{NAME}'");
    Ok(())
}

#[cfg(windows)]
static RUN: std::sync::Mutex<Option<(ServerOptions, Serve)>> = std::sync::Mutex::new(None);

/// How the daemon serves once the service runs.
pub type Serve = Box<dyn FnOnce(ServerOptions) -> Result<(), Error> + Send>;

/// Run as the service manager's service: `serve` with `opts` until it
/// asks the service to stop.
#[cfg(windows)]
pub fn run(opts: ServerOptions, serve: Serve) -> Result<(), Error> {
    if let Ok(mut r) = RUN.lock() {
        *r = Some((opts, serve));
    }
    windows_service::service_dispatcher::start(NAME, ffi_service_main).map_err(|e| {
        Error::Setup(format!(
            "--service: not started by the service manager ({e}); install it with --install-service"
        ))
    })
}

#[cfg(windows)]
windows_service::define_windows_service!(ffi_service_main, service_main);

#[cfg(windows)]
fn service_main(_args: Vec<std::ffi::OsString>) {
    use std::time::Duration;
    use windows_service::{
        service::{
            ServiceControl, ServiceControlAccept, ServiceExitCode, ServiceState, ServiceStatus,
            ServiceType,
        },
        service_control_handler::{self, ServiceControlHandlerResult},
    };
    let Some((mut opts, serve)) = RUN.lock().ok().and_then(|mut r| r.take()) else {
        return;
    };
    let handler = |control| match control {
        // the service manager's stop ends the daemon as Ctrl-C does
        ServiceControl::Stop | ServiceControl::Shutdown => {
            engine::sys::Signals::ask(engine::sys::Asked::Terminate);
            ServiceControlHandlerResult::NoError
        }
        ServiceControl::Interrogate => ServiceControlHandlerResult::NoError,
        _ => ServiceControlHandlerResult::NotImplemented,
    };
    let Ok(status) = service_control_handler::register(NAME, handler) else {
        return;
    };
    let state = |s: ServiceState, code: u32| ServiceStatus {
        service_type: ServiceType::OWN_PROCESS,
        current_state: s,
        controls_accepted: if s == ServiceState::Running {
            ServiceControlAccept::STOP | ServiceControlAccept::SHUTDOWN
        } else {
            ServiceControlAccept::empty()
        },
        exit_code: ServiceExitCode::Win32(code),
        checkpoint: 0,
        wait_hint: Duration::default(),
        process_id: None,
    };
    let _ = status.set_service_status(state(ServiceState::Running, 0));
    // a service has no console: it serves as in the foreground, its log in
    // --log-file
    opts.foreground = true;
    let log = opts.log_file.clone();
    let code = match serve(opts) {
        Ok(()) => 0,
        Err(e) => {
            // (no console to say it on: the log file, if there is one)
            if let Some(p) = log
                && let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
            {
                use std::io::Write as _;
                let _ = writeln!(f, "netserver: {e}");
            }
            1
        }
    };
    let _ = status.set_service_status(state(ServiceState::Stopped, code));
}

#[cfg(not(windows))]
fn elsewhere(option: &str) -> Error {
    Error::Setup(format!(
        "{option}: a Windows service is Windows' only; on {} run netserver under systemd (dist/systemd, doc/service.md) or detached",
        engine::sys::PLATFORM
    ))
}

#[cfg(not(windows))]
pub fn install(_args: &[String]) -> Result<(), Error> {
    Err(elsewhere("--install-service"))
}

#[cfg(not(windows))]
pub fn uninstall() -> Result<(), Error> {
    Err(elsewhere("--uninstall-service"))
}

#[cfg(not(windows))]
pub fn run(_opts: ServerOptions, _serve: Serve) -> Result<(), Error> {
    Err(elsewhere("--service"))
}
