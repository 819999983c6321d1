//! macOS and FreeBSD: each CPU's counters (macOS `host_processor_info`,
//! FreeBSD `kern.cp_times`), in the kernel's ticks; no /proc.

use crate::cpu::Ticks;

use super::Sock;

/// Every CPU's counters now.
#[cfg(target_os = "macos")]
pub fn cpu_ticks() -> Option<Vec<Ticks>> {
    #[allow(deprecated)]
    // SAFETY: host_processor_info hands back an array it allocated of
    // `count` entries of CPU_STATE_MAX counters each, which is read and then
    // given back with vm_deallocate.
    unsafe {
        let mut count: libc::natural_t = 0;
        let mut info: libc::processor_info_array_t = std::ptr::null_mut();
        let mut len: libc::mach_msg_type_number_t = 0;
        let rc = libc::host_processor_info(
            libc::mach_host_self(),
            libc::PROCESSOR_CPU_LOAD_INFO,
            &mut count,
            &mut info,
            &mut len,
        );
        if rc != libc::KERN_SUCCESS || info.is_null() {
            return None;
        }
        let states = libc::CPU_STATE_MAX as usize;
        let all = std::slice::from_raw_parts(info, len as usize);
        let cpus = all
            .chunks(states)
            .take(count as usize)
            .map(|c| {
                let f = |i: libc::c_int| u64::from(c.get(i as usize).copied().unwrap_or(0) as u32);
                Ticks {
                    user: f(libc::CPU_STATE_USER),
                    nice: f(libc::CPU_STATE_NICE),
                    system: f(libc::CPU_STATE_SYSTEM),
                    idle: f(libc::CPU_STATE_IDLE),
                    ..Ticks::default()
                }
            })
            .collect();
        libc::vm_deallocate(
            libc::mach_task_self(),
            info as libc::vm_address_t,
            (len as usize * std::mem::size_of::<libc::integer_t>()) as libc::vm_size_t,
        );
        Some(cpus)
    }
}

/// Every CPU's counters now: `kern.cp_times`, CPUSTATES longs a CPU
/// (user, nice, system, interrupt, idle).
#[cfg(target_os = "freebsd")]
pub fn cpu_ticks() -> Option<Vec<Ticks>> {
    const STATES: usize = 5;
    let name = c"kern.cp_times";
    let mut len: libc::size_t = 0;
    // SAFETY: asks only for the length.
    let rc = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            std::ptr::null_mut(),
            &mut len,
            std::ptr::null(),
            0,
        )
    };
    if rc != 0 || len == 0 {
        return None;
    }
    let mut v = vec![0 as libc::c_long; len / std::mem::size_of::<libc::c_long>()];
    let mut got = v.len() * std::mem::size_of::<libc::c_long>();
    // SAFETY: the buffer and its length describe `v`.
    let rc = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            v.as_mut_ptr().cast(),
            &mut got,
            std::ptr::null(),
            0,
        )
    };
    if rc != 0 {
        return None;
    }
    v.truncate(got / std::mem::size_of::<libc::c_long>());
    Some(
        v.chunks(STATES)
            .filter(|c| c.len() == STATES)
            .map(|c| {
                let f = |i: usize| c.get(i).map_or(0, |&x| x.max(0) as u64);
                Ticks {
                    user: f(0),
                    nice: f(1),
                    system: f(2),
                    irq: f(3),
                    idle: f(4),
                    ..Ticks::default()
                }
            })
            .collect(),
    )
}

/// Other Unixes: no CPU meter of ours (`-c`/`-C` say so).
#[cfg(not(any(target_os = "macos", target_os = "freebsd")))]
pub fn cpu_ticks() -> Option<Vec<Ticks>> {
    None
}

/// The calling thread's CPU time so far, user and system, in
/// nanoseconds: FreeBSD's getrusage RUSAGE_THREAD; elsewhere no count of
/// a thread's own (`None`).
pub fn thread_cpu_ns() -> Option<(u64, u64)> {
    #[cfg(target_os = "freebsd")]
    return super::unix::rusage_ns(nix::sys::resource::UsageWho::RUSAGE_THREAD);
    #[cfg(not(target_os = "freebsd"))]
    None
}

/// The socket's inode (Linux's /proc/net/udp keys): none here.
pub fn socket_inode(_sock: &impl Sock) -> Option<u64> {
    None
}
