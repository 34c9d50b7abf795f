//! The protobuf codec of the generated stubs: prost's, except that a message
//! that does not decode is the sender's fault, so it is `INVALID_ARGUMENT`
//! (reason `INVALID_ARGUMENT`, domain `tidemark`) rather than the
//! `INTERNAL` tonic answers by default. Nothing is read or changed for such a
//! request: it never reaches a handler.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::{Code, Status};
use tonic_prost::{ProstDecoder, ProstEncoder};
use tonic_types::{ErrorDetails, StatusExt};

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct ProtoCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for ProtoCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> Codec for ProtoCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = CheckedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        CheckedDecoder(ProstDecoder::default())
    }
}

/// Prost's decoder with decode failures reported as `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub struct CheckedDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default> Decoder for CheckedDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(malformed)
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

/// The status for a message that is not valid protobuf of the expected type.
fn malformed(decode_error: Status) -> Status {
    if decode_error.code() != Code::Internal {
        return decode_error;
    }
    let message = format!(
        "the request is not a valid protobuf message of the expected type: {}",
        decode_error.message()
    );
    let details = ErrorDetails::with_error_info("INVALID_ARGUMENT", "tidemark", std::collections::HashMap::new());
    Status::with_error_details(Code::InvalidArgument, message, details)
}
