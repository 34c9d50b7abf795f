//! Compiles `proto/` with the pure-Rust `protox` (no system `protoc`) and writes
//! the descriptor set used by server reflection.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    println!("cargo:rerun-if-changed={}", proto_root.display());
    let files = ["tidemark/v1/types.proto", "tidemark/v1/coordinator.proto"];
    let fds = protox::compile(files, [&proto_root])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // tonic-prost-build only writes a descriptor set when it drives protoc
    // itself, so write the one reflection serves here.
    std::fs::write(out.join("tidemark_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
