package io.tidemark.client;

import java.util.HashMap;
import java.util.Map;

/**
 * The {@code google.rpc.ErrorInfo} reasons a tidemark server sends (domain {@code tidemark}),
 * as SPEC §2–§9 and the server's status mapping name them. testdata/error_reasons.json lists the
 * same reasons with their codes; the tests hold this enum to it.
 */
public enum Reason {
  // Domain rules (SPEC §2–§6, §9).
  INVALID_ARGUMENT,
  LEASE_HELD,
  LEASE_NOT_HELD,
  BATCH_CONFLICT,
  POSITION_REGRESSION,
  POSITION_EXPIRED,
  POSITION_AHEAD_OF_TABLE,
  REPLAY_SCAN_MISMATCH,
  REPLAY_RANGE_EXPIRED,
  NEXT_SNAPSHOT_MISMATCH,
  CONSUMER_NOT_FOUND,
  LEASE_MISMATCH,
  TABLE_LOCATION_EMPTY,
  TABLE_LOCATION_UNREADABLE,
  TABLE_IDENTITY_CHANGED,
  TABLE_NOT_REGISTERED,
  NOT_IN_PLAN,
  NOT_REACHED,
  EPOCH_EXHAUSTED,
  // Access.
  MISSING_CREDENTIALS,
  UNKNOWN_CREDENTIALS,
  ROLE_NOT_ALLOWED,
  TABLE_NOT_IN_SCOPE,
  LEASE_NOT_OWNED,
  LOCATION_NOT_ALLOWED,
  PRINCIPAL_LIMIT,
  // The server and its database (SPEC §7: retryable, with RetryInfo).
  STORE_UNAVAILABLE,
  STORE_TIMEOUT,
  STORE_BUSY,
  OVERLOADED,
  CONTENTION,
  TIMEOUT,
  MESSAGE_TOO_LARGE,
  EXPORT_STALLED,
  TOO_MANY_EXPORTS,
  INTERNAL,
  /** The status carried no ErrorInfo (a transport failure, a proxy's answer). */
  NONE,
  /**
   * A reason this SDK does not know (a newer server's): {@link TidemarkException#reasonName()}
   * still has it.
   */
  UNRECOGNIZED;

  private static final Map<String, Reason> BY_NAME = new HashMap<>();

  static {
    for (Reason reason : values()) {
      if (reason != NONE && reason != UNRECOGNIZED) {
        BY_NAME.put(reason.name(), reason);
      }
    }
  }

  /** The reason of an ErrorInfo's reason string: NONE for empty, UNRECOGNIZED for unknown. */
  public static Reason of(String name) {
    if (name == null || name.isEmpty()) {
      return NONE;
    }
    return BY_NAME.getOrDefault(name, UNRECOGNIZED);
  }
}
