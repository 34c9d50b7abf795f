package io.tidemark.client;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import com.google.rpc.RetryInfo;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeMap;

/**
 * A failed tidemark call: the gRPC code, the server's {@code ErrorInfo} reason as a {@link Reason}
 * (and as the string it was sent as), its metadata, the {@code BadRequest} field violations of
 * invalid input and the {@code RetryInfo} delay. The message is the server's, which never carries
 * SQL text or server internals (SPEC §7).
 */
public final class TidemarkException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** One invalid field of a request, as the server's BadRequest names it. */
  public record FieldViolation(String field, String description) {}

  private final Status.Code code;
  private final String serverMessage;
  private final String reasonName;
  private final Map<String, String> metadata;
  private final List<FieldViolation> fieldViolations;
  private final Duration retryDelay;

  TidemarkException(
      Status.Code code,
      String serverMessage,
      String reasonName,
      Map<String, String> metadata,
      List<FieldViolation> fieldViolations,
      Duration retryDelay,
      Throwable cause) {
    super(describe(code, reasonName, serverMessage), cause);
    this.code = code;
    this.serverMessage = serverMessage == null ? "" : serverMessage;
    this.reasonName = reasonName == null ? "" : reasonName;
    this.metadata = Map.copyOf(metadata);
    this.fieldViolations = List.copyOf(fieldViolations);
    this.retryDelay = retryDelay;
  }

  private static String describe(Status.Code code, String reason, String message) {
    return reason == null || reason.isEmpty()
        ? code + ": " + message
        : code + " " + reason + ": " + message;
  }

  /** The exception a failed gRPC call stands for, its status details decoded. */
  public static TidemarkException from(StatusRuntimeException error) {
    Status status = error.getStatus();
    String reason = "";
    Map<String, String> metadata = new TreeMap<>();
    List<FieldViolation> violations = new ArrayList<>();
    Duration retryDelay = null;
    com.google.rpc.Status details = StatusProto.fromThrowable(error);
    if (details != null) {
      for (Any detail : details.getDetailsList()) {
        try {
          if (detail.is(ErrorInfo.class)) {
            ErrorInfo info = detail.unpack(ErrorInfo.class);
            reason = info.getReason();
            metadata.putAll(info.getMetadataMap());
          } else if (detail.is(BadRequest.class)) {
            for (BadRequest.FieldViolation v : detail.unpack(BadRequest.class).getFieldViolationsList()) {
              violations.add(new FieldViolation(v.getField(), v.getDescription()));
            }
          } else if (detail.is(RetryInfo.class)) {
            com.google.protobuf.Duration delay = detail.unpack(RetryInfo.class).getRetryDelay();
            retryDelay = Duration.ofSeconds(delay.getSeconds(), delay.getNanos());
          }
        } catch (InvalidProtocolBufferException malformed) {
          // A detail that does not decode is left out; the code and message still stand.
        }
      }
    }
    String message = status.getDescription() == null ? "" : status.getDescription();
    return new TidemarkException(
        status.getCode(), message, reason, metadata, violations, retryDelay, error);
  }

  /** A failure the SDK itself decided (e.g. no answer before the deadline). */
  static TidemarkException local(Status.Code code, String message, Throwable cause) {
    return new TidemarkException(code, message, "", Map.of(), List.of(), null, cause);
  }

  /** The gRPC status code. */
  public Status.Code code() {
    return code;
  }

  /** The server's message (without the code and reason this exception's message adds). */
  public String serverMessage() {
    return serverMessage;
  }

  /** The reason, {@link Reason#NONE} without one, {@link Reason#UNRECOGNIZED} for a new one. */
  public Reason reason() {
    return Reason.of(reasonName);
  }

  /** The reason as the server sent it ("" without one): readable even when unrecognized. */
  public String reasonName() {
    return reasonName;
  }

  /** The ErrorInfo metadata (e.g. holder, remaining_ms, current_epoch). */
  public Map<String, String> metadata() {
    return metadata;
  }

  /** The invalid fields of a request refused INVALID_ARGUMENT. */
  public List<FieldViolation> fieldViolations() {
    return fieldViolations;
  }

  /** The server's RetryInfo: how long it asks a caller to wait before trying again. */
  public Optional<Duration> retryDelay() {
    return Optional.ofNullable(retryDelay);
  }

  /** LEASE_HELD: the live lease's holder. */
  public Optional<String> holder() {
    return Optional.ofNullable(metadata.get("holder"));
  }

  /** LEASE_HELD: how long the live lease has left. */
  public Optional<Duration> remaining() {
    return millis("remaining_ms");
  }

  /** LEASE_HELD: the live lease's epoch; LEASE_NOT_HELD: the key's current epoch, when known. */
  public OptionalLong epoch() {
    OptionalLong current = number("current_epoch");
    return current.isPresent() ? current : number("epoch");
  }

  /** LEASE_NOT_HELD: why the lease does not hold (expired, released, revoked, superseded, ...). */
  public Optional<String> leaseState() {
    return Optional.ofNullable(metadata.get("state"));
  }

  /** INTERNAL: the request id under which the server logged the details. */
  public Optional<String> requestId() {
    return Optional.ofNullable(metadata.get("request_id"));
  }

  /** Whether the one retry table (testdata/retry.json) retries this failure. */
  public boolean isRetryable() {
    return RetryTable.isRetryable(code, reasonName, serverMessage);
  }

  private Optional<Duration> millis(String key) {
    OptionalLong value = number(key);
    return value.isPresent() ? Optional.of(Duration.ofMillis(value.getAsLong())) : Optional.empty();
  }

  private OptionalLong number(String key) {
    String value = metadata.get(key);
    if (value == null) {
      return OptionalLong.empty();
    }
    try {
      return OptionalLong.of(Long.parseLong(value));
    } catch (NumberFormatException notANumber) {
      return OptionalLong.empty();
    }
  }
}
