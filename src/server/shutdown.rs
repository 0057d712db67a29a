//! Graceful shutdown on SIGTERM and SIGINT; SIGHUP runs the reload hook (the TLS
//! certificates are read again).
//!
//! The signals are blocked in every thread and taken by one waiting thread, which raises a flag
//! the shards poll (or, for SIGHUP, calls the hook set with [`on_reload`]). A shard then stops accepting, shuts its client sockets down and returns, so
//! the process exits with its io_uring rings torn down cleanly: a ring torn down by the kernel
//! at exit while clients are still connected keeps the listening port busy for about a minute,
//! which would make a restart on the same port fail. When the shutdown signal comes, the service
//! manager is told first ([`super::notify::stopping`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// What SIGHUP runs.
type Hook = Box<dyn Fn() + Send + Sync>;

static RELOAD: OnceLock<Hook> = OnceLock::new();

/// Sets what SIGHUP runs (once; later calls are ignored).
pub fn on_reload(hook: impl Fn() + Send + Sync + 'static) {
    let _ = RELOAD.set(Box::new(hook));
}

/// How often shards look at the shutdown flag.
const POLL: Duration = Duration::from_millis(50);

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset only write the set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        set
    }
}

/// Blocks SIGTERM/SIGINT/SIGHUP in this thread (threads spawned later inherit the mask) and starts
/// the thread that waits for them. Call before starting the shards.
pub fn install() -> std::io::Result<()> {
    let set = signal_set();
    // SAFETY: changes this thread's signal mask only.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    std::thread::Builder::new()
        .name("kelp-signals".into())
        .spawn(move || loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: sigwait reads the set and writes the received signal number.
            let rc = unsafe { libc::sigwait(&set, &mut sig) };
            if rc == 0 && sig == libc::SIGHUP {
                match RELOAD.get() {
                    Some(hook) => hook(),
                    None => tracing::info!("SIGHUP: nothing to reload"),
                }
                continue;
            }
            if rc == 0 {
                tracing::info!(signal = sig, "shutting down");
            }
            super::notify::stopping();
            REQUESTED.store(true, Ordering::SeqCst);
            break;
        })?;
    Ok(())
}

/// Whether shutdown was requested.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Resolves once shutdown is requested.
pub async fn wait() {
    while !requested() {
        glommio::timer::sleep(POLL).await;
    }
}
