//! Protobuf messages and gRPC stubs of the `tidemark.v1` API.
//!
//! Generated at build time from `proto/`; nothing generated is committed.

pub mod codec;

/// The `tidemark.v1` package.
pub mod v1 {
    #![allow(clippy::all, clippy::pedantic, missing_docs, unused_qualifications)]
    tonic::include_proto!("tidemark.v1");
}

/// The encoded `FileDescriptorSet` of every tidemark proto file, for server
/// reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("tidemark_descriptor");

pub use prost_types;
