//! The C allocator's heap. The Rust code allocates through mimalloc, but
//! RocksDB's C++ (memtables, block cache, compaction buffers) allocates
//! through glibc's malloc, which keeps freed memory in per-thread arenas
//! instead of returning it: a soak showed glibc holding 26 MiB free after
//! a minute and 330 MiB after eleven, while what it had in use stayed
//! flat at the store's bound. Long-running commands cap the arenas and
//! hand the free memory back to the system periodically.

use std::time::Duration;

/// How often a long-running process returns the C heap's free memory.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// At most two malloc arenas (glibc's default is eight per core): fewer
/// arenas hold fewer free chunks. Call before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_arenas() {
    // SAFETY: mallopt only sets an allocator parameter; called before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_arenas() {}

/// A thread that returns the C heap's free pages to the system every
/// `period` (`malloc_trim`: a walk of the arenas, milliseconds).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim_every(period: Duration) {
    let spawned = std::thread::Builder::new()
        .name("heap-trim".into())
        .spawn(move || loop {
            std::thread::sleep(period);
            // SAFETY: malloc_trim is thread-safe; it only releases free
            // memory.
            unsafe {
                libc::malloc_trim(0);
            }
        });
    if let Err(e) = spawned {
        eprintln!("warning: no heap-trim thread: {e}");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim_every(_period: Duration) {}
