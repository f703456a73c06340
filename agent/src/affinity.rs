//! Which CPUs this thread may run on, and narrowing them: `polycc-portus --cpu`, and the
//! round-trip bench that keeps the flows' threads off the agent's CPU.

use std::io;

/// The CPUs the calling thread may run on, ascending.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: `set` is a plain-data local of the size passed; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

/// Restricts the calling thread (and the threads it starts after) to `cpus`.
pub fn run_on(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: `set` is a plain-data local of the size passed; CPU_SET writes it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
