package io.tidemark.client;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.Context;
import io.grpc.ForwardingClientCall;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.AbstractStub;
import io.tidemark.v1.AcquireLeaseRequest;
import io.tidemark.v1.AcquireLeaseResponse;
import io.tidemark.v1.AdminGrpc;
import io.tidemark.v1.CommitBatchRequest;
import io.tidemark.v1.CommitBatchResponse;
import io.tidemark.v1.ConsumerKey;
import io.tidemark.v1.CoordinatorGrpc;
import io.tidemark.v1.DescribeConsumerRequest;
import io.tidemark.v1.DescribeConsumerResponse;
import io.tidemark.v1.ExplainRetentionRequest;
import io.tidemark.v1.ExplainRetentionResponse;
import io.tidemark.v1.GetRecoveryPositionRequest;
import io.tidemark.v1.GetRecoveryPositionResponse;
import io.tidemark.v1.GetRetentionFenceRequest;
import io.tidemark.v1.GetRetentionFenceResponse;
import io.tidemark.v1.HistoryEntry;
import io.tidemark.v1.Lease;
import io.tidemark.v1.ListHistoryRequest;
import io.tidemark.v1.ListHistoryResponse;
import io.tidemark.v1.Offset;
import io.tidemark.v1.ReleaseLeaseRequest;
import io.tidemark.v1.RenewLeaseRequest;
import io.tidemark.v1.RetentionGrpc;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * A connection to a tidemark server: the worker protocol (acquire, renew, release, commit,
 * recovery position), the retention reads, describe and history.
 *
 * <p>Every call here is retried on the failures of the one retry table (testdata/retry.json, see
 * {@link RetryTable}) with jittered backoff, honouring the server's RetryInfo, each attempt under
 * its own deadline and all of them inside the policy's budget; refusals (FAILED_PRECONDITION and
 * the like) are never retried and surface as {@link TidemarkException} with the server's reason.
 * A server that comes up late or restarts for a few seconds is ridden out.
 *
 * <p>With OpenTelemetry's API on the classpath, every call made under a current span carries its
 * W3C trace context, so tidemark's span joins the application's trace.
 */
public final class TidemarkClient implements AutoCloseable {
  /** The SDK's version, as the user-agent {@code tidemark-java/<version>} reports it. */
  public static final String VERSION = readVersion();

  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final ManagedChannel channel;
  private final Channel calls;
  private final Duration callTimeout;
  private final RetryPolicy retry;

  private TidemarkClient(Builder builder) {
    Endpoint endpoint = Endpoint.parse(builder.endpoint);
    ChannelCredentials credentials = credentials(endpoint, builder);
    ManagedChannelBuilder<?> channelBuilder =
        Grpc.newChannelBuilder(endpoint.target(), credentials)
            .userAgent("tidemark-java/" + VERSION)
            // Each (re)connection takes one of the addresses the host resolves to at random (with
            // a headless Service, the ready replicas); every call of a connection then goes to
            // one replica, which keeps its lease cache and group commit useful (as the Python
            // SDK does).
            .defaultServiceConfig(
                Map.of(
                    "loadBalancingConfig",
                    List.of(Map.of("pick_first", Map.of("shuffleAddressList", true)))));
    channel = channelBuilder.build();
    List<ClientInterceptor> interceptors = new ArrayList<>();
    String token = builder.token != null ? builder.token : System.getenv("TIDEMARK_TOKEN");
    if (token != null && !token.isEmpty()) {
      interceptors.add(new BearerToken(token));
    }
    ClientInterceptor traces = TraceContext.interceptorIfAvailable();
    if (traces != null) {
      interceptors.add(traces);
    }
    calls = ClientInterceptors.intercept(channel, interceptors);
    callTimeout = builder.callTimeout;
    retry = builder.retry;
  }

  /** A builder for a client of {@code endpoint}: {@code host:port}, or {@code https://host:port} for TLS. */
  public static Builder builder(String endpoint) {
    return new Builder(endpoint);
  }

  /** A consumer key on the main branch. */
  public static ConsumerKey consumer(String table, String consumerId) {
    return consumer(table, "main", consumerId);
  }

  /** A consumer key. */
  public static ConsumerKey consumer(String table, String branch, String consumerId) {
    return ConsumerKey.newBuilder().setTable(table).setBranch(branch).setConsumerId(consumerId).build();
  }

  // ---- the worker protocol

  /** Takes {@code key}'s lease for {@code holder}; {@code ttl} null for the server's default. */
  public AcquireLeaseResponse acquireLease(ConsumerKey key, String holder, Duration ttl) {
    AcquireLeaseRequest.Builder request = AcquireLeaseRequest.newBuilder().setConsumer(key).setHolder(holder);
    if (ttl != null) {
      request.setTtl(Protos.duration(ttl));
    }
    return call("AcquireLease", NO_LIMIT, stubs -> stubs.coordinator().acquireLease(request.build()));
  }

  /**
   * Takes {@code key}'s lease and keeps it renewed on the keeper's own thread; the keeper's clock
   * starts when the acquire was sent.
   */
  public LeaseKeeper acquireAndKeep(ConsumerKey key, String holder, Duration ttl) {
    long sent = System.nanoTime();
    AcquireLeaseResponse acquired = acquireLease(key, holder, ttl);
    return LeaseKeeper.start(this, acquired.getLease(), sent, null);
  }

  /**
   * Keeps {@code lease} renewed; {@code sentAtNanos} ({@link System#nanoTime()}) is when its
   * acquire was sent. {@code scheduler} may be null for a thread of the keeper's own.
   */
  public LeaseKeeper keepLease(Lease lease, long sentAtNanos, ScheduledExecutorService scheduler) {
    return LeaseKeeper.start(this, lease, sentAtNanos, scheduler);
  }

  /** Renews a lease; the time it has left. */
  public Duration renewLease(Lease lease) {
    return renewLease(lease, null, NO_LIMIT);
  }

  /** Renews a lease, retrying no later than {@code untilNanos} ({@link System#nanoTime()}). */
  Duration renewLease(Lease lease, Duration ttl, long untilNanos) {
    RenewLeaseRequest.Builder request =
        RenewLeaseRequest.newBuilder().setLeaseId(lease.getLeaseId()).setEpoch(lease.getEpoch());
    if (ttl != null) {
      request.setTtl(Protos.duration(ttl));
    }
    return Protos.duration(
        call("RenewLease", untilNanos, stubs -> stubs.coordinator().renewLease(request.build())).getTtl());
  }

  /** Releases a lease: true when it was still live. */
  public boolean releaseLease(Lease lease) {
    ReleaseLeaseRequest request =
        ReleaseLeaseRequest.newBuilder().setLeaseId(lease.getLeaseId()).setEpoch(lease.getEpoch()).build();
    return call("ReleaseLease", NO_LIMIT, stubs -> stubs.coordinator().releaseLease(request)).getReleased();
  }

  /**
   * Records a committed micro-batch's end offset under {@code batchId}; {@code latestSnapshot}
   * (null when unknown) is the table's latest as the worker sees it, for lag. Retried with the
   * same batch id, a commit that did land answers DUPLICATE (SPEC C5).
   */
  public CommitBatchResponse commitBatch(Lease lease, long batchId, Offset end, Long latestSnapshot) {
    CommitBatchRequest.Builder request =
        CommitBatchRequest.newBuilder()
            .setLeaseId(lease.getLeaseId())
            .setEpoch(lease.getEpoch())
            .setBatchId(batchId)
            .setEnd(end);
    if (latestSnapshot != null) {
      request.setLatestSnapshot(latestSnapshot);
    }
    return call("CommitBatch", NO_LIMIT, stubs -> stubs.coordinator().commitBatch(request.build()));
  }

  /** Records a micro-batch ending at {@code end} under the batch id derived from it ({@link Offsets#batchId}). */
  public CommitBatchResponse commitBatch(Lease lease, Offset end, Long latestSnapshot) {
    return commitBatch(lease, Offsets.batchId(end), end, latestSnapshot);
  }

  /** Where a starting query resumes (SPEC §4). */
  public GetRecoveryPositionResponse getRecoveryPosition(GetRecoveryPositionRequest request) {
    return call("GetRecoveryPosition", NO_LIMIT, stubs -> stubs.coordinator().getRecoveryPosition(request));
  }

  // ---- retention and operators' reads

  /** A branch's retention fences (the {@code maintainer}, {@code viewer} or {@code operator} role). */
  public GetRetentionFenceResponse getRetentionFence(String table, String branch, boolean changelogDecoupled) {
    GetRetentionFenceRequest request =
        GetRetentionFenceRequest.newBuilder()
            .setTable(table)
            .setBranch(branch)
            .setChangelogDecoupled(changelogDecoupled)
            .build();
    return call("GetRetentionFence", NO_LIMIT, stubs -> stubs.retention().getRetentionFence(request));
  }

  /** Why a table's snapshots are (not) expiring. */
  public ExplainRetentionResponse explainRetention(ExplainRetentionRequest request) {
    return call("ExplainRetention", NO_LIMIT, stubs -> stubs.retention().explainRetention(request));
  }

  /** A consumer's record, lease, options and latest {@code historyLimit} history entries. */
  public DescribeConsumerResponse describeConsumer(ConsumerKey key, int historyLimit) {
    DescribeConsumerRequest request =
        DescribeConsumerRequest.newBuilder().setConsumer(key).setHistoryLimit(historyLimit).build();
    return call("DescribeConsumer", NO_LIMIT, stubs -> stubs.admin().describeConsumer(request));
  }

  /** A consumer's whole history, newest first. */
  public List<HistoryEntry> listHistory(ConsumerKey key) {
    return history(ListHistoryRequest.newBuilder().setConsumer(key));
  }

  /** A table branch's whole history (every consumer), newest first. */
  public List<HistoryEntry> listTableHistory(String table, String branch) {
    return history(ListHistoryRequest.newBuilder().setTable(table).setBranch(branch));
  }

  private List<HistoryEntry> history(ListHistoryRequest.Builder request) {
    List<HistoryEntry> entries = new ArrayList<>();
    String token = "";
    do {
      ListHistoryRequest page = request.setPageSize(500).setPageToken(token).build();
      ListHistoryResponse response = call("ListHistory", NO_LIMIT, stubs -> stubs.admin().listHistory(page));
      entries.addAll(response.getEntriesList());
      token = response.getNextPageToken();
    } while (!token.isEmpty());
    return entries;
  }

  /** Blocking stubs carrying the token and trace context, for calls this class does not wrap. */
  public CoordinatorGrpc.CoordinatorBlockingStub coordinatorStub() {
    return CoordinatorGrpc.newBlockingStub(calls);
  }

  /** The Admin service's blocking stub (see {@link #coordinatorStub()}). */
  public AdminGrpc.AdminBlockingStub adminStub() {
    return AdminGrpc.newBlockingStub(calls);
  }

  /** The Retention service's blocking stub (see {@link #coordinatorStub()}). */
  public RetentionGrpc.RetentionBlockingStub retentionStub() {
    return RetentionGrpc.newBlockingStub(calls);
  }

  @Override
  public void close() {
    channel.shutdown();
    try {
      if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
        channel.shutdownNow();
      }
    } catch (InterruptedException interrupted) {
      channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  // ---- the retry loop

  static final long NO_LIMIT = Long.MAX_VALUE;

  /** The stubs of one attempt, each under that attempt's deadline. */
  record Stubs(long timeoutNanos, Channel channel) {
    CoordinatorGrpc.CoordinatorBlockingStub coordinator() {
      return deadline(CoordinatorGrpc.newBlockingStub(channel));
    }

    RetentionGrpc.RetentionBlockingStub retention() {
      return deadline(RetentionGrpc.newBlockingStub(channel));
    }

    AdminGrpc.AdminBlockingStub admin() {
      return deadline(AdminGrpc.newBlockingStub(channel));
    }

    private <S extends AbstractStub<S>> S deadline(S stub) {
      return stub.withDeadlineAfter(timeoutNanos, TimeUnit.NANOSECONDS);
    }
  }

  /**
   * Runs one call under the retry policy; {@code untilNanos} ({@link System#nanoTime()}) ends the
   * retrying early, e.g. at a lease's deadline.
   */
  <T> T call(String what, long untilNanos, Function<Stubs, T> attempt) {
    long started = System.nanoTime();
    long end = started + Math.min(retry.budget().toNanos(), Long.MAX_VALUE - started);
    if (untilNanos != NO_LIMIT && untilNanos - end < 0) {
      end = untilNanos;
    }
    for (int attempts = 1; ; attempts++) {
      long left = end - System.nanoTime();
      long timeout = Math.min(callTimeout.toNanos(), left);
      if (timeout <= 0) {
        throw TidemarkException.local(
            Status.Code.DEADLINE_EXCEEDED, what + ": no answer before the deadline", null);
      }
      TidemarkException failure;
      try {
        return attempt.apply(new Stubs(timeout, calls));
      } catch (StatusRuntimeException error) {
        failure = TidemarkException.from(error);
      }
      if (Context.current().isCancelled() || attempts >= retry.maxAttempts() || !failure.isRetryable()) {
        throw failure;
      }
      long wait = retry.waitBefore(attempts, failure.retryDelay()).toNanos();
      if (System.nanoTime() + wait - end >= 0) {
        throw failure;
      }
      if (failure.code() == Status.Code.UNAVAILABLE) {
        // grpc-java's own reconnect backoff grows to two minutes, far past any budget: this
        // policy's backoff is the one that paces reconnecting to a restarted server.
        channel.resetConnectBackoff();
      }
      try {
        TimeUnit.NANOSECONDS.sleep(wait);
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
        throw TidemarkException.local(Status.Code.CANCELLED, what + ": interrupted while retrying", failure);
      }
    }
  }

  // ---- construction

  private static ChannelCredentials credentials(Endpoint endpoint, Builder builder) {
    boolean tls = endpoint.tls() || builder.tlsCa != null || builder.clientCert != null;
    if (!tls) {
      return InsecureChannelCredentials.create();
    }
    try {
      TlsChannelCredentials.Builder tlsBuilder = TlsChannelCredentials.newBuilder();
      if (builder.tlsCa != null) {
        tlsBuilder.trustManager(builder.tlsCa.toFile());
      }
      if (builder.clientCert != null) {
        File key = builder.clientKey.toFile();
        tlsBuilder.keyManager(builder.clientCert.toFile(), key);
      }
      return tlsBuilder.build();
    } catch (IOException unreadable) {
      throw new UncheckedIOException("cannot read the TLS files: " + unreadable.getMessage(), unreadable);
    }
  }

  private static String readVersion() {
    try (InputStream in = TidemarkClient.class.getResourceAsStream("tidemark-client.properties")) {
      if (in == null) {
        return "dev";
      }
      Properties properties = new Properties();
      properties.load(in);
      return properties.getProperty("version", "dev");
    } catch (IOException unreadable) {
      return "dev";
    }
  }

  /** Adds {@code authorization: Bearer <token>} to every call. */
  private static final class BearerToken implements ClientInterceptor {
    private final String header;

    BearerToken(String token) {
      this.header = "Bearer " + token;
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
        @Override
        public void start(Listener<R> listener, Metadata headers) {
          headers.put(AUTHORIZATION, header);
          super.start(listener, headers);
        }
      };
    }
  }

  /** How to reach a server: {@link TidemarkClient#builder(String)}. */
  public static final class Builder {
    private final String endpoint;
    private String token;
    private Path tlsCa;
    private Path clientCert;
    private Path clientKey;
    private Duration callTimeout = Duration.ofSeconds(5);
    private RetryPolicy retry = RetryPolicy.defaults();

    private Builder(String endpoint) {
      this.endpoint = Objects.requireNonNull(endpoint, "endpoint");
    }

    /** The bearer token; without one, {@code TIDEMARK_TOKEN} from the environment, if set. */
    public Builder token(String token) {
      this.token = token;
      return this;
    }

    /** The CA that signed the server's certificate (TLS even for a {@code host:port} endpoint). */
    public Builder tlsCa(Path caPem) {
      this.tlsCa = caPem;
      return this;
    }

    /** A client certificate and its key (PEM, PKCS#8), for mutual TLS. */
    public Builder clientCertificate(Path certPem, Path keyPem) {
      this.clientCert = Objects.requireNonNull(certPem, "certPem");
      this.clientKey = Objects.requireNonNull(keyPem, "keyPem");
      return this;
    }

    /** Each attempt's deadline (also sent to the server); 5 s by default. */
    public Builder callTimeout(Duration timeout) {
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("callTimeout must be positive, got " + timeout);
      }
      this.callTimeout = timeout;
      return this;
    }

    /** How calls are retried; {@link RetryPolicy#defaults()} unless set. */
    public Builder retryPolicy(RetryPolicy policy) {
      this.retry = Objects.requireNonNull(policy, "policy");
      return this;
    }

    public TidemarkClient build() {
      return new TidemarkClient(this);
    }
  }
}
