//! The `kelp` binary: parse flags, set up logging, run the shards.

use clap::Parser;
use kelp::config::Config;
use tracing_subscriber::EnvFilter;

fn main() {
    kelp::server::panic::abort_on_panic();
    let config = Config::parse();
    let filter = EnvFilter::try_new(&config.log_level).unwrap_or_else(|e| {
        eprintln!("kelp: bad --log-level '{}': {e}", config.log_level);
        std::process::exit(2);
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
