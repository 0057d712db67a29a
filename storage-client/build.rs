//! Generates the prost messages and tonic clients for the SeaweedFS protos in `proto/`.
//!
//! protoc comes from the `protoc-bin-vendored` crate, so the build needs no system protoc
//! and no network beyond crates.io. Only client code is generated.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let include = protoc_bin_vendored::include_path()?;
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");

    let protos = [
        "mq_schema.proto",
        "mq_broker.proto",
        "filer.proto",
        "master.proto",
    ]
    .map(|f| dir.join(f));
    for p in &protos {
        println!("cargo:rerun-if-changed={}", p.display());
    }

    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    // bytes::Bytes for every bytes field: record keys and values are passed along and kept
    // for re-sending without copies.
    config.bytes(["."]);

    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .build_transport(true)
        .emit_rerun_if_changed(false)
        .compile_with_config(config, &protos, &[dir, include])?;
    Ok(())
}
