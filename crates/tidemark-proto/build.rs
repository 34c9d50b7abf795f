//! Compiles `proto/` with the pure-Rust `protox` (no system `protoc`) and writes
//! the descriptor set used by server reflection.

use prost::Message;

/// The tidemark API; Rust code is generated for these.
const API_FILES: [&str; 4] = [
    "tidemark/v1/types.proto",
    "tidemark/v1/coordinator.proto",
    "tidemark/v1/retention.proto",
    "tidemark/v1/admin.proto",
];

/// Vendored `google.rpc` error detail types. They are only described through
/// reflection, so that grpcurl can decode ErrorInfo and BadRequest details.
const ERROR_DETAIL_FILES: [&str; 2] = ["google/rpc/error_details.proto", "google/rpc/status.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    println!("cargo:rerun-if-changed={}", proto_root.display());
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);

    let reflected = protox::compile(API_FILES.iter().chain(&ERROR_DETAIL_FILES), [&proto_root])?;
    // tonic-prost-build only writes a descriptor set when it drives protoc
    // itself, so write the one reflection serves here.
    std::fs::write(out.join("tidemark_descriptor.bin"), reflected.encode_to_vec())?;

    let api = protox::compile(API_FILES, [&proto_root])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Malformed requests are INVALID_ARGUMENT, not INTERNAL (src/codec.rs).
        .codec_path("crate::codec::ProtoCodec")
        .compile_fds(api)?;
    Ok(())
}
