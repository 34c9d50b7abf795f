package io.tidemark.client;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How long a call keeps retrying the failures {@link RetryTable} retries, and how long it waits
 * between attempts: full-jitter exponential backoff, or the server's RetryInfo delay stretched by
 * up to a fifth (so callers told the same delay spread out) when the server sent one. Every attempt
 * stays inside the call's budget, counted from its first attempt. The defaults are those of
 * testdata/retry.json's policy, which the Rust and Python SDKs share: the budget rides out a
 * tidemark restart and a Postgres failover (about 20 s with Patroni's smallest ttl).
 */
public final class RetryPolicy {
  /** RetryInfo's delay is stretched by a random share of at most this. */
  static final double RETRY_INFO_JITTER = 0.2;

  private final Duration budget;
  private final Duration initialBackoff;
  private final Duration maxBackoff;
  private final int maxAttempts;

  private RetryPolicy(Duration budget, Duration initialBackoff, Duration maxBackoff, int maxAttempts) {
    this.budget = Objects.requireNonNull(budget, "budget");
    this.initialBackoff = Objects.requireNonNull(initialBackoff, "initialBackoff");
    this.maxBackoff = Objects.requireNonNull(maxBackoff, "maxBackoff");
    if (budget.isNegative() || initialBackoff.isNegative() || maxBackoff.isNegative()) {
      throw new IllegalArgumentException("retry durations must not be negative");
    }
    if (maxAttempts < 1) {
      throw new IllegalArgumentException("maxAttempts must be at least 1, got " + maxAttempts);
    }
    this.maxAttempts = maxAttempts;
  }

  /** 30 s of retrying, backoff from 50 ms to 1 s, attempts unbounded. */
  public static RetryPolicy defaults() {
    return new RetryPolicy(Duration.ofSeconds(30), Duration.ofMillis(50), Duration.ofSeconds(1), Integer.MAX_VALUE);
  }

  /** One attempt, no retry. */
  public static RetryPolicy none() {
    return defaults().withMaxAttempts(1);
  }

  public RetryPolicy withBudget(Duration budget) {
    return new RetryPolicy(budget, initialBackoff, maxBackoff, maxAttempts);
  }

  public RetryPolicy withBackoff(Duration initial, Duration max) {
    return new RetryPolicy(budget, initial, max, maxAttempts);
  }

  public RetryPolicy withMaxAttempts(int attempts) {
    return new RetryPolicy(budget, initialBackoff, maxBackoff, attempts);
  }

  public Duration budget() {
    return budget;
  }

  public int maxAttempts() {
    return maxAttempts;
  }

  /** The longest full-jitter wait before retry {@code attempt} (1-based). */
  public Duration backoffCap(int attempt) {
    int doublings = Math.min(Math.max(attempt - 1, 0), 16);
    Duration grown = initialBackoff.multipliedBy(1L << doublings);
    return grown.compareTo(maxBackoff) > 0 ? maxBackoff : grown;
  }

  /**
   * The wait before retry {@code attempt} (1-based): RetryInfo's delay times [1, 1.2) when the
   * server sent one, else a uniform draw in [0, backoffCap(attempt)].
   */
  public Duration waitBefore(int attempt, Optional<Duration> retryInfo) {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    if (retryInfo.isPresent() && !retryInfo.get().isNegative()) {
      long nanos = retryInfo.get().toNanos();
      return Duration.ofNanos(nanos + (long) (nanos * RETRY_INFO_JITTER * random.nextDouble()));
    }
    long cap = backoffCap(attempt).toNanos();
    return Duration.ofNanos(cap <= 0 ? 0 : random.nextLong(cap + 1));
  }
}
