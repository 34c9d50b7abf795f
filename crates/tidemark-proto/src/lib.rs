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

/// `std::time::Duration` <-> `google.protobuf.Duration`, in one place
/// (prost-types' own conversions).
pub mod duration {
    use std::time::Duration;

    /// A std duration as a proto one (saturating at the proto's maximum).
    pub fn to_pb(d: Duration) -> prost_types::Duration {
        prost_types::Duration::try_from(d).unwrap_or(prost_types::Duration {
            seconds: i64::MAX,
            nanos: 999_999_999,
        })
    }

    /// A proto duration as a std one; a negative one is zero.
    pub fn from_pb(d: &prost_types::Duration) -> Duration {
        Duration::try_from(*d).unwrap_or(Duration::ZERO)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn durations_round_trip_and_negative_is_zero() {
            let d = Duration::new(90, 500_000_000);
            assert_eq!(from_pb(&to_pb(d)), d);
            assert_eq!(
                to_pb(d),
                prost_types::Duration {
                    seconds: 90,
                    nanos: 500_000_000
                }
            );
            assert_eq!(
                from_pb(&prost_types::Duration { seconds: -1, nanos: 0 }),
                Duration::ZERO
            );
            assert_eq!(to_pb(Duration::MAX).seconds, i64::MAX);
        }
    }
}
