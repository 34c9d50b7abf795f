package io.tidemark.client;

import io.grpc.Status;
import io.tidemark.v1.Lease;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Keeps a lease renewed, about every ttl/3, on a thread of its own or a scheduler the caller
 * passes.
 *
 * <p>The lease's clock starts when the request that last extended it was sent (the acquire, then
 * each renewal), never when its answer came: the server may have granted it any time in between.
 * A renewal that fails transiently is retried until that clock says the lease has run out; then,
 * or at once on a refusal (revoked, superseded, expired), the loss is reported — to every listener
 * and through {@link #lost()} — and renewing stops. A black-holed server thus costs the lease by
 * its ttl, never later. {@link #release()} (and {@link #close()}) stops renewing and releases.
 */
public final class LeaseKeeper implements AutoCloseable {
  private final TidemarkClient client;
  private final Lease lease;
  private final ScheduledExecutorService scheduler;
  private final boolean ownScheduler;
  private final CompletableFuture<TidemarkException> lost = new CompletableFuture<>();
  private final List<Consumer<TidemarkException>> listeners = new CopyOnWriteArrayList<>();
  private volatile long deadlineNanos;
  private volatile Duration ttl;
  private volatile boolean stopped;
  private ScheduledFuture<?> next;

  private LeaseKeeper(TidemarkClient client, Lease lease, long sentAtNanos, ScheduledExecutorService scheduler) {
    this.client = Objects.requireNonNull(client, "client");
    this.lease = Objects.requireNonNull(lease, "lease");
    this.ttl = lease.hasTtl() ? Protos.duration(lease.getTtl()) : Duration.ofSeconds(30);
    this.deadlineNanos = sentAtNanos + ttl.toNanos();
    this.ownScheduler = scheduler == null;
    this.scheduler =
        scheduler != null
            ? scheduler
            : Executors.newSingleThreadScheduledExecutor(
                runnable -> {
                  Thread thread = new Thread(runnable, "tidemark-lease-" + shortId(lease));
                  thread.setDaemon(true);
                  return thread;
                });
  }

  static LeaseKeeper start(TidemarkClient client, Lease lease, long sentAtNanos, ScheduledExecutorService scheduler) {
    LeaseKeeper keeper = new LeaseKeeper(client, lease, sentAtNanos, scheduler);
    keeper.scheduleAt(sentAtNanos + keeper.ttl.toNanos() / 3);
    return keeper;
  }

  private static String shortId(Lease lease) {
    String id = lease.getLeaseId();
    return id.length() > 8 ? id.substring(0, 8) : id;
  }

  /** The lease kept. */
  public Lease lease() {
    return lease;
  }

  /** Whether the lease is still held as far as this keeper knows: not lost, not stopped, not run out. */
  public boolean isHeld() {
    return !stopped && !lost.isDone() && System.nanoTime() - deadlineNanos < 0;
  }

  /** How long the lease has left by the keeper's clock (zero once run out). */
  public Duration remaining() {
    long left = deadlineNanos - System.nanoTime();
    return left > 0 ? Duration.ofNanos(left) : Duration.ZERO;
  }

  /** Completes with why the lease was lost, the moment it is; never completes when released. */
  public CompletableFuture<TidemarkException> lost() {
    return lost.copy();
  }

  /** Calls {@code listener} when the lease is lost (at once if it already was). */
  public void onLost(Consumer<TidemarkException> listener) {
    listeners.add(listener);
    if (lost.isDone()) {
      TidemarkException why = lost.getNow(null);
      if (listeners.remove(listener)) {
        listener.accept(why);
      }
    }
  }

  /** Stops renewing; the lease runs out by its ttl unless released. */
  public synchronized void stop() {
    stopped = true;
    if (next != null) {
      next.cancel(false);
    }
    if (ownScheduler) {
      scheduler.shutdown();
    }
  }

  /** Stops renewing and releases the lease: true when it was still live. */
  public boolean release() {
    stop();
    return client.releaseLease(lease);
  }

  @Override
  public void close() {
    if (!lost.isDone()) {
      release();
    } else {
      stop();
    }
  }

  private synchronized void scheduleAt(long atNanos) {
    if (stopped) {
      return;
    }
    long delay = Math.max(0, atNanos - System.nanoTime());
    next = scheduler.schedule(this::renew, delay, TimeUnit.NANOSECONDS);
  }

  private void renew() {
    if (stopped) {
      return;
    }
    long sent = System.nanoTime();
    Duration granted;
    try {
      // Retried inside, never past the lease's own deadline.
      granted = client.renewLease(lease, null, deadlineNanos);
    } catch (TidemarkException failure) {
      if (!stopped) {
        lose(failure);
      }
      return;
    } catch (RuntimeException unexpected) {
      if (!stopped) {
        lose(TidemarkException.local(Status.Code.UNKNOWN, "renewing the lease failed: " + unexpected, unexpected));
      }
      return;
    }
    ttl = granted;
    deadlineNanos = sent + granted.toNanos();
    scheduleAt(sent + granted.toNanos() / 3);
  }

  private void lose(TidemarkException why) {
    stop();
    if (lost.complete(why)) {
      for (Consumer<TidemarkException> listener : listeners) {
        if (listeners.remove(listener)) {
          listener.accept(why);
        }
      }
    }
  }
}
