package io.tidemark.client;

import io.grpc.Status;

/**
 * Which failures are retried: the one table of testdata/retry.json, followed by the Rust, Python
 * and Java SDKs alike (each SDK's tests read that file). Only failures where the call did not
 * happen or is safe to repeat: every worker call is (renew, release and recovery are idempotent,
 * a commit retried with the same batch id is DUPLICATE by SPEC C5, and a repeated acquire by the
 * same holder takes over the grant it may have missed). A refusal is never retried: a fenced
 * lease must stop.
 */
final class RetryTable {
  private RetryTable() {}

  static boolean isRetryable(Status.Code code, String reason, String message) {
    String why = reason == null ? "" : reason;
    switch (code) {
      case UNAVAILABLE:
      case DEADLINE_EXCEEDED:
        return true;
      case RESOURCE_EXHAUSTED:
        // The same request is as large the next time.
        return !why.equals("MESSAGE_TOO_LARGE");
      case ABORTED:
        return why.equals("CONTENTION");
      case CANCELLED:
        // A connection that went away under the call (a GOAWAY race); never a cancel of the
        // caller's own, which the client checks before it retries.
        return why.isEmpty();
      case INTERNAL:
        // tidemark's own INTERNAL always carries a reason; without one, an HTTP/2 connection
        // failed under the call.
        return why.isEmpty() && message != null && message.startsWith("h2 protocol error");
      default:
        return false;
    }
  }
}
