package io.tidemark.client;

import java.time.Duration;

/** java.time to protobuf's well-known types and back. */
final class Protos {
  private Protos() {}

  static com.google.protobuf.Duration duration(Duration d) {
    return com.google.protobuf.Duration.newBuilder().setSeconds(d.getSeconds()).setNanos(d.getNano()).build();
  }

  static Duration duration(com.google.protobuf.Duration d) {
    return Duration.ofSeconds(d.getSeconds(), d.getNanos());
  }
}
