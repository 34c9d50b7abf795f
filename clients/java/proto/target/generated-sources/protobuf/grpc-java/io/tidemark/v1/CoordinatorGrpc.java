package io.tidemark.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class CoordinatorGrpc {

  private CoordinatorGrpc() {}

  public static final java.lang.String SERVICE_NAME = "tidemark.v1.Coordinator";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.AcquireLeaseRequest,
      io.tidemark.v1.AcquireLeaseResponse> getAcquireLeaseMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "AcquireLease",
      requestType = io.tidemark.v1.AcquireLeaseRequest.class,
      responseType = io.tidemark.v1.AcquireLeaseResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.AcquireLeaseRequest,
      io.tidemark.v1.AcquireLeaseResponse> getAcquireLeaseMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.AcquireLeaseRequest, io.tidemark.v1.AcquireLeaseResponse> getAcquireLeaseMethod;
    if ((getAcquireLeaseMethod = CoordinatorGrpc.getAcquireLeaseMethod) == null) {
      synchronized (CoordinatorGrpc.class) {
        if ((getAcquireLeaseMethod = CoordinatorGrpc.getAcquireLeaseMethod) == null) {
          CoordinatorGrpc.getAcquireLeaseMethod = getAcquireLeaseMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.AcquireLeaseRequest, io.tidemark.v1.AcquireLeaseResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "AcquireLease"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.AcquireLeaseRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.AcquireLeaseResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CoordinatorMethodDescriptorSupplier("AcquireLease"))
              .build();
        }
      }
    }
    return getAcquireLeaseMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.RenewLeaseRequest,
      io.tidemark.v1.RenewLeaseResponse> getRenewLeaseMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RenewLease",
      requestType = io.tidemark.v1.RenewLeaseRequest.class,
      responseType = io.tidemark.v1.RenewLeaseResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.RenewLeaseRequest,
      io.tidemark.v1.RenewLeaseResponse> getRenewLeaseMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.RenewLeaseRequest, io.tidemark.v1.RenewLeaseResponse> getRenewLeaseMethod;
    if ((getRenewLeaseMethod = CoordinatorGrpc.getRenewLeaseMethod) == null) {
      synchronized (CoordinatorGrpc.class) {
        if ((getRenewLeaseMethod = CoordinatorGrpc.getRenewLeaseMethod) == null) {
          CoordinatorGrpc.getRenewLeaseMethod = getRenewLeaseMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.RenewLeaseRequest, io.tidemark.v1.RenewLeaseResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RenewLease"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.RenewLeaseRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.RenewLeaseResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CoordinatorMethodDescriptorSupplier("RenewLease"))
              .build();
        }
      }
    }
    return getRenewLeaseMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ReleaseLeaseRequest,
      io.tidemark.v1.ReleaseLeaseResponse> getReleaseLeaseMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ReleaseLease",
      requestType = io.tidemark.v1.ReleaseLeaseRequest.class,
      responseType = io.tidemark.v1.ReleaseLeaseResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ReleaseLeaseRequest,
      io.tidemark.v1.ReleaseLeaseResponse> getReleaseLeaseMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ReleaseLeaseRequest, io.tidemark.v1.ReleaseLeaseResponse> getReleaseLeaseMethod;
    if ((getReleaseLeaseMethod = CoordinatorGrpc.getReleaseLeaseMethod) == null) {
      synchronized (CoordinatorGrpc.class) {
        if ((getReleaseLeaseMethod = CoordinatorGrpc.getReleaseLeaseMethod) == null) {
          CoordinatorGrpc.getReleaseLeaseMethod = getReleaseLeaseMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ReleaseLeaseRequest, io.tidemark.v1.ReleaseLeaseResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ReleaseLease"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ReleaseLeaseRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ReleaseLeaseResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CoordinatorMethodDescriptorSupplier("ReleaseLease"))
              .build();
        }
      }
    }
    return getReleaseLeaseMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.CommitBatchRequest,
      io.tidemark.v1.CommitBatchResponse> getCommitBatchMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CommitBatch",
      requestType = io.tidemark.v1.CommitBatchRequest.class,
      responseType = io.tidemark.v1.CommitBatchResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.CommitBatchRequest,
      io.tidemark.v1.CommitBatchResponse> getCommitBatchMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.CommitBatchRequest, io.tidemark.v1.CommitBatchResponse> getCommitBatchMethod;
    if ((getCommitBatchMethod = CoordinatorGrpc.getCommitBatchMethod) == null) {
      synchronized (CoordinatorGrpc.class) {
        if ((getCommitBatchMethod = CoordinatorGrpc.getCommitBatchMethod) == null) {
          CoordinatorGrpc.getCommitBatchMethod = getCommitBatchMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.CommitBatchRequest, io.tidemark.v1.CommitBatchResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CommitBatch"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.CommitBatchRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.CommitBatchResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CoordinatorMethodDescriptorSupplier("CommitBatch"))
              .build();
        }
      }
    }
    return getCommitBatchMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.GetRecoveryPositionRequest,
      io.tidemark.v1.GetRecoveryPositionResponse> getGetRecoveryPositionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetRecoveryPosition",
      requestType = io.tidemark.v1.GetRecoveryPositionRequest.class,
      responseType = io.tidemark.v1.GetRecoveryPositionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.GetRecoveryPositionRequest,
      io.tidemark.v1.GetRecoveryPositionResponse> getGetRecoveryPositionMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.GetRecoveryPositionRequest, io.tidemark.v1.GetRecoveryPositionResponse> getGetRecoveryPositionMethod;
    if ((getGetRecoveryPositionMethod = CoordinatorGrpc.getGetRecoveryPositionMethod) == null) {
      synchronized (CoordinatorGrpc.class) {
        if ((getGetRecoveryPositionMethod = CoordinatorGrpc.getGetRecoveryPositionMethod) == null) {
          CoordinatorGrpc.getGetRecoveryPositionMethod = getGetRecoveryPositionMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.GetRecoveryPositionRequest, io.tidemark.v1.GetRecoveryPositionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetRecoveryPosition"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.GetRecoveryPositionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.GetRecoveryPositionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CoordinatorMethodDescriptorSupplier("GetRecoveryPosition"))
              .build();
        }
      }
    }
    return getGetRecoveryPositionMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static CoordinatorStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<CoordinatorStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<CoordinatorStub>() {
        @java.lang.Override
        public CoordinatorStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new CoordinatorStub(channel, callOptions);
        }
      };
    return CoordinatorStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static CoordinatorBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<CoordinatorBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<CoordinatorBlockingV2Stub>() {
        @java.lang.Override
        public CoordinatorBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new CoordinatorBlockingV2Stub(channel, callOptions);
        }
      };
    return CoordinatorBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static CoordinatorBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<CoordinatorBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<CoordinatorBlockingStub>() {
        @java.lang.Override
        public CoordinatorBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new CoordinatorBlockingStub(channel, callOptions);
        }
      };
    return CoordinatorBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static CoordinatorFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<CoordinatorFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<CoordinatorFutureStub>() {
        @java.lang.Override
        public CoordinatorFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new CoordinatorFutureStub(channel, callOptions);
        }
      };
    return CoordinatorFutureStub.newStub(factory, channel);
  }

  /**
   */
  public interface AsyncService {

    /**
     * <pre>
     * Takes the lease of a consumer key. Succeeds when the key has no live lease,
     * or when the live lease belongs to the same holder (a restarted query takes
     * over at once with a new epoch, fencing its previous incarnation). When
     * another holder's lease is live: FAILED_PRECONDITION, reason LEASE_HELD,
     * with the holder and the remaining time in the ErrorInfo metadata.
     * </pre>
     */
    default void acquireLease(io.tidemark.v1.AcquireLeaseRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.AcquireLeaseResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAcquireLeaseMethod(), responseObserver);
    }

    /**
     * <pre>
     * Extends a live lease by its ttl. A lease that is expired, released,
     * revoked or superseded: FAILED_PRECONDITION, reason LEASE_NOT_HELD
     * (metadata: current_epoch).
     * </pre>
     */
    default void renewLease(io.tidemark.v1.RenewLeaseRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.RenewLeaseResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRenewLeaseMethod(), responseObserver);
    }

    /**
     * <pre>
     * Ends a lease at once. Idempotent: releasing a lease that is no longer live
     * succeeds and changes nothing. The consumer record stays.
     * </pre>
     */
    default void releaseLease(io.tidemark.v1.ReleaseLeaseRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ReleaseLeaseResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReleaseLeaseMethod(), responseObserver);
    }

    /**
     * <pre>
     * Records the end offset of a successfully committed micro-batch (call it
     * from the engine's commit callback). The lease check, the consumer write and
     * the history row are one transaction: on any error nothing changes. A
     * successful commit also renews the lease.
     * </pre>
     */
    default void commitBatch(io.tidemark.v1.CommitBatchRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.CommitBatchResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCommitBatchMethod(), responseObserver);
    }

    /**
     * <pre>
     * Tells a starting query where to resume: engine checkpoint &gt; existing,
     * unexpired consumer (unless ignore_progress) &gt; startup options.
     * </pre>
     */
    default void getRecoveryPosition(io.tidemark.v1.GetRecoveryPositionRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.GetRecoveryPositionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetRecoveryPositionMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service Coordinator.
   */
  public static abstract class CoordinatorImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return CoordinatorGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service Coordinator.
   */
  public static final class CoordinatorStub
      extends io.grpc.stub.AbstractAsyncStub<CoordinatorStub> {
    private CoordinatorStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected CoordinatorStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new CoordinatorStub(channel, callOptions);
    }

    /**
     * <pre>
     * Takes the lease of a consumer key. Succeeds when the key has no live lease,
     * or when the live lease belongs to the same holder (a restarted query takes
     * over at once with a new epoch, fencing its previous incarnation). When
     * another holder's lease is live: FAILED_PRECONDITION, reason LEASE_HELD,
     * with the holder and the remaining time in the ErrorInfo metadata.
     * </pre>
     */
    public void acquireLease(io.tidemark.v1.AcquireLeaseRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.AcquireLeaseResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getAcquireLeaseMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Extends a live lease by its ttl. A lease that is expired, released,
     * revoked or superseded: FAILED_PRECONDITION, reason LEASE_NOT_HELD
     * (metadata: current_epoch).
     * </pre>
     */
    public void renewLease(io.tidemark.v1.RenewLeaseRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.RenewLeaseResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRenewLeaseMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Ends a lease at once. Idempotent: releasing a lease that is no longer live
     * succeeds and changes nothing. The consumer record stays.
     * </pre>
     */
    public void releaseLease(io.tidemark.v1.ReleaseLeaseRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ReleaseLeaseResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getReleaseLeaseMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Records the end offset of a successfully committed micro-batch (call it
     * from the engine's commit callback). The lease check, the consumer write and
     * the history row are one transaction: on any error nothing changes. A
     * successful commit also renews the lease.
     * </pre>
     */
    public void commitBatch(io.tidemark.v1.CommitBatchRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.CommitBatchResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCommitBatchMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Tells a starting query where to resume: engine checkpoint &gt; existing,
     * unexpired consumer (unless ignore_progress) &gt; startup options.
     * </pre>
     */
    public void getRecoveryPosition(io.tidemark.v1.GetRecoveryPositionRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.GetRecoveryPositionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetRecoveryPositionMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service Coordinator.
   */
  public static final class CoordinatorBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<CoordinatorBlockingV2Stub> {
    private CoordinatorBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected CoordinatorBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new CoordinatorBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Takes the lease of a consumer key. Succeeds when the key has no live lease,
     * or when the live lease belongs to the same holder (a restarted query takes
     * over at once with a new epoch, fencing its previous incarnation). When
     * another holder's lease is live: FAILED_PRECONDITION, reason LEASE_HELD,
     * with the holder and the remaining time in the ErrorInfo metadata.
     * </pre>
     */
    public io.tidemark.v1.AcquireLeaseResponse acquireLease(io.tidemark.v1.AcquireLeaseRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getAcquireLeaseMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Extends a live lease by its ttl. A lease that is expired, released,
     * revoked or superseded: FAILED_PRECONDITION, reason LEASE_NOT_HELD
     * (metadata: current_epoch).
     * </pre>
     */
    public io.tidemark.v1.RenewLeaseResponse renewLease(io.tidemark.v1.RenewLeaseRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRenewLeaseMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Ends a lease at once. Idempotent: releasing a lease that is no longer live
     * succeeds and changes nothing. The consumer record stays.
     * </pre>
     */
    public io.tidemark.v1.ReleaseLeaseResponse releaseLease(io.tidemark.v1.ReleaseLeaseRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getReleaseLeaseMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Records the end offset of a successfully committed micro-batch (call it
     * from the engine's commit callback). The lease check, the consumer write and
     * the history row are one transaction: on any error nothing changes. A
     * successful commit also renews the lease.
     * </pre>
     */
    public io.tidemark.v1.CommitBatchResponse commitBatch(io.tidemark.v1.CommitBatchRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCommitBatchMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Tells a starting query where to resume: engine checkpoint &gt; existing,
     * unexpired consumer (unless ignore_progress) &gt; startup options.
     * </pre>
     */
    public io.tidemark.v1.GetRecoveryPositionResponse getRecoveryPosition(io.tidemark.v1.GetRecoveryPositionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetRecoveryPositionMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service Coordinator.
   */
  public static final class CoordinatorBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<CoordinatorBlockingStub> {
    private CoordinatorBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected CoordinatorBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new CoordinatorBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Takes the lease of a consumer key. Succeeds when the key has no live lease,
     * or when the live lease belongs to the same holder (a restarted query takes
     * over at once with a new epoch, fencing its previous incarnation). When
     * another holder's lease is live: FAILED_PRECONDITION, reason LEASE_HELD,
     * with the holder and the remaining time in the ErrorInfo metadata.
     * </pre>
     */
    public io.tidemark.v1.AcquireLeaseResponse acquireLease(io.tidemark.v1.AcquireLeaseRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getAcquireLeaseMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Extends a live lease by its ttl. A lease that is expired, released,
     * revoked or superseded: FAILED_PRECONDITION, reason LEASE_NOT_HELD
     * (metadata: current_epoch).
     * </pre>
     */
    public io.tidemark.v1.RenewLeaseResponse renewLease(io.tidemark.v1.RenewLeaseRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRenewLeaseMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Ends a lease at once. Idempotent: releasing a lease that is no longer live
     * succeeds and changes nothing. The consumer record stays.
     * </pre>
     */
    public io.tidemark.v1.ReleaseLeaseResponse releaseLease(io.tidemark.v1.ReleaseLeaseRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getReleaseLeaseMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Records the end offset of a successfully committed micro-batch (call it
     * from the engine's commit callback). The lease check, the consumer write and
     * the history row are one transaction: on any error nothing changes. A
     * successful commit also renews the lease.
     * </pre>
     */
    public io.tidemark.v1.CommitBatchResponse commitBatch(io.tidemark.v1.CommitBatchRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCommitBatchMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Tells a starting query where to resume: engine checkpoint &gt; existing,
     * unexpired consumer (unless ignore_progress) &gt; startup options.
     * </pre>
     */
    public io.tidemark.v1.GetRecoveryPositionResponse getRecoveryPosition(io.tidemark.v1.GetRecoveryPositionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetRecoveryPositionMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service Coordinator.
   */
  public static final class CoordinatorFutureStub
      extends io.grpc.stub.AbstractFutureStub<CoordinatorFutureStub> {
    private CoordinatorFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected CoordinatorFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new CoordinatorFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Takes the lease of a consumer key. Succeeds when the key has no live lease,
     * or when the live lease belongs to the same holder (a restarted query takes
     * over at once with a new epoch, fencing its previous incarnation). When
     * another holder's lease is live: FAILED_PRECONDITION, reason LEASE_HELD,
     * with the holder and the remaining time in the ErrorInfo metadata.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.AcquireLeaseResponse> acquireLease(
        io.tidemark.v1.AcquireLeaseRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getAcquireLeaseMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Extends a live lease by its ttl. A lease that is expired, released,
     * revoked or superseded: FAILED_PRECONDITION, reason LEASE_NOT_HELD
     * (metadata: current_epoch).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.RenewLeaseResponse> renewLease(
        io.tidemark.v1.RenewLeaseRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRenewLeaseMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Ends a lease at once. Idempotent: releasing a lease that is no longer live
     * succeeds and changes nothing. The consumer record stays.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.ReleaseLeaseResponse> releaseLease(
        io.tidemark.v1.ReleaseLeaseRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getReleaseLeaseMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Records the end offset of a successfully committed micro-batch (call it
     * from the engine's commit callback). The lease check, the consumer write and
     * the history row are one transaction: on any error nothing changes. A
     * successful commit also renews the lease.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.CommitBatchResponse> commitBatch(
        io.tidemark.v1.CommitBatchRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCommitBatchMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Tells a starting query where to resume: engine checkpoint &gt; existing,
     * unexpired consumer (unless ignore_progress) &gt; startup options.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.GetRecoveryPositionResponse> getRecoveryPosition(
        io.tidemark.v1.GetRecoveryPositionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetRecoveryPositionMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_ACQUIRE_LEASE = 0;
  private static final int METHODID_RENEW_LEASE = 1;
  private static final int METHODID_RELEASE_LEASE = 2;
  private static final int METHODID_COMMIT_BATCH = 3;
  private static final int METHODID_GET_RECOVERY_POSITION = 4;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_ACQUIRE_LEASE:
          serviceImpl.acquireLease((io.tidemark.v1.AcquireLeaseRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.AcquireLeaseResponse>) responseObserver);
          break;
        case METHODID_RENEW_LEASE:
          serviceImpl.renewLease((io.tidemark.v1.RenewLeaseRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.RenewLeaseResponse>) responseObserver);
          break;
        case METHODID_RELEASE_LEASE:
          serviceImpl.releaseLease((io.tidemark.v1.ReleaseLeaseRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ReleaseLeaseResponse>) responseObserver);
          break;
        case METHODID_COMMIT_BATCH:
          serviceImpl.commitBatch((io.tidemark.v1.CommitBatchRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.CommitBatchResponse>) responseObserver);
          break;
        case METHODID_GET_RECOVERY_POSITION:
          serviceImpl.getRecoveryPosition((io.tidemark.v1.GetRecoveryPositionRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.GetRecoveryPositionResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getAcquireLeaseMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.AcquireLeaseRequest,
              io.tidemark.v1.AcquireLeaseResponse>(
                service, METHODID_ACQUIRE_LEASE)))
        .addMethod(
          getRenewLeaseMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.RenewLeaseRequest,
              io.tidemark.v1.RenewLeaseResponse>(
                service, METHODID_RENEW_LEASE)))
        .addMethod(
          getReleaseLeaseMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.ReleaseLeaseRequest,
              io.tidemark.v1.ReleaseLeaseResponse>(
                service, METHODID_RELEASE_LEASE)))
        .addMethod(
          getCommitBatchMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.CommitBatchRequest,
              io.tidemark.v1.CommitBatchResponse>(
                service, METHODID_COMMIT_BATCH)))
        .addMethod(
          getGetRecoveryPositionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.GetRecoveryPositionRequest,
              io.tidemark.v1.GetRecoveryPositionResponse>(
                service, METHODID_GET_RECOVERY_POSITION)))
        .build();
  }

  private static abstract class CoordinatorBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    CoordinatorBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return io.tidemark.v1.CoordinatorOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("Coordinator");
    }
  }

  private static final class CoordinatorFileDescriptorSupplier
      extends CoordinatorBaseDescriptorSupplier {
    CoordinatorFileDescriptorSupplier() {}
  }

  private static final class CoordinatorMethodDescriptorSupplier
      extends CoordinatorBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    CoordinatorMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (CoordinatorGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new CoordinatorFileDescriptorSupplier())
              .addMethod(getAcquireLeaseMethod())
              .addMethod(getRenewLeaseMethod())
              .addMethod(getReleaseLeaseMethod())
              .addMethod(getCommitBatchMethod())
              .addMethod(getGetRecoveryPositionMethod())
              .build();
        }
      }
    }
    return result;
  }
}
