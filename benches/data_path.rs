//! Placeholder replaced by the data-path benches.
fn main() {}
