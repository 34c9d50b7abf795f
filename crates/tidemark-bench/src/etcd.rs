//! etcd's KV API, for the peer the bench measures against (generated).

#![allow(
    clippy::all,
    missing_debug_implementations,
    missing_docs,
    unreachable_pub,
    unused_qualifications
)]
tonic::include_proto!("etcdserverpb");
pub use kv_client::KvClient;
