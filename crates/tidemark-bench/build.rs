//! Compiles the vendored subset of etcd's v3 KV API (for the etcd peer).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    println!("cargo:rerun-if-changed={}", root.display());
    let files = protox::compile(["etcd.proto"], [&root])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .compile_fds(files)?;
    Ok(())
}
