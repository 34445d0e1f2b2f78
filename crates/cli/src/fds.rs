//! The open-file limit. The embedded store keeps its table files open, up
//! to half this limit (`EmbeddedOptions::max_open_files`), and each HTTP
//! connection takes a descriptor too. A store holding months of history
//! has thousands of table files, and many systems start processes with a
//! soft limit of 1,024: commands raise their soft limit to the hard one
//! (as Go programs do since Go 1.19) before they open a store.

/// The most the soft limit is raised to: enough for any store, and small
/// enough that code walking every descriptor number stays quick.
const MOST: u64 = 1 << 20;

/// Raise the soft open-file limit to the hard one (at most [`MOST`]); a
/// warning if that fails.
#[cfg(unix)]
pub fn raise_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return;
        }
        let wanted = limit.rlim_max.min(MOST);
        if limit.rlim_cur >= wanted {
            return;
        }
        let soft = limit.rlim_cur;
        limit.rlim_cur = wanted;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
            eprintln!(
                "warning: cannot raise the open-file limit from {soft} to {wanted}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

#[cfg(not(unix))]
pub fn raise_open_files() {}
