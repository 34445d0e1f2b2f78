//! CPU priorities of the server's threads. On a saturated machine the
//! kernel shares the cores by the threads' weights, which follow their
//! nice values (1,024 at nice 0, each step about 1.25 times less): the
//! threads of work that can wait (maintenance jobs, event batches) run
//! at a higher nice value than the async threads that answer reads.

/// Set the calling thread's nice value to `nice` (Linux: the nice value
/// is per thread, and threads it starts inherit it). Only an
/// optimisation: where it fails (a process already nicer than `nice`
/// may not come back up without privilege), the thread keeps its
/// priority and this says so in the debug log.
pub(crate) fn lower_this_thread(nice: i32) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions; setpriority changes only
        // the nice value of the thread it names (this one).
        let failed = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) != 0
        };
        if failed {
            tracing::debug!(nice, error = %std::io::Error::last_os_error(), "a thread keeps its priority");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// The nice value of the calling thread (Linux).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn this_thread() -> i32 {
    // SAFETY: getpriority only reads the thread's nice value (-1 is a
    // valid answer, so errno is cleared first and checked after).
    unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t);
        assert_eq!(*libc::__errno_location(), 0, "getpriority failed");
        n
    }
}
