//! The `kelp` binary: read flags and the `--config` file, set up logging, run the shards.

use std::io::Write;

use kelp::config::file::{self, LoadError, Loaded};
use tracing_subscriber::EnvFilter;

/// Exit code of a configuration error, as clap's for a usage error.
const CONFIG_ERROR: i32 = 2;

fn main() {
    kelp::server::panic::abort_on_panic();
    let config = match file::load(std::env::args_os()) {
        Ok(Loaded::Run(config)) => *config,
        Ok(Loaded::Print(text)) => {
            let mut out = std::io::stdout().lock();
            if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                eprintln!("kelp: writing the configuration: {e}");
                std::process::exit(1);
            }
            return;
        }
        Err(LoadError::Usage(e)) => e.exit(),
        Err(LoadError::File(errors)) => {
            for e in errors {
                eprintln!("kelp: {e}");
            }
            std::process::exit(CONFIG_ERROR);
        }
    };
    let filter = EnvFilter::try_new(&config.log_level).unwrap_or_else(|e| {
        eprintln!("kelp: bad --log-level '{}': {e}", config.log_level);
        std::process::exit(CONFIG_ERROR);
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Err(e) = kelp::server::run(config) {
        tracing::error!("{e:#}");
        eprintln!("kelp: {e:#}");
        std::process::exit(1);
    }
}
