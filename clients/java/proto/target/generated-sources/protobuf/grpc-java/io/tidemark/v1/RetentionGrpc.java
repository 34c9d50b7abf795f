package io.tidemark.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class RetentionGrpc {

  private RetentionGrpc() {}

  public static final java.lang.String SERVICE_NAME = "tidemark.v1.Retention";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.GetRetentionFenceRequest,
      io.tidemark.v1.GetRetentionFenceResponse> getGetRetentionFenceMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetRetentionFence",
      requestType = io.tidemark.v1.GetRetentionFenceRequest.class,
      responseType = io.tidemark.v1.GetRetentionFenceResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.GetRetentionFenceRequest,
      io.tidemark.v1.GetRetentionFenceResponse> getGetRetentionFenceMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.GetRetentionFenceRequest, io.tidemark.v1.GetRetentionFenceResponse> getGetRetentionFenceMethod;
    if ((getGetRetentionFenceMethod = RetentionGrpc.getGetRetentionFenceMethod) == null) {
      synchronized (RetentionGrpc.class) {
        if ((getGetRetentionFenceMethod = RetentionGrpc.getGetRetentionFenceMethod) == null) {
          RetentionGrpc.getGetRetentionFenceMethod = getGetRetentionFenceMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.GetRetentionFenceRequest, io.tidemark.v1.GetRetentionFenceResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetRetentionFence"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.GetRetentionFenceRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.GetRetentionFenceResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RetentionMethodDescriptorSupplier("GetRetentionFence"))
              .build();
        }
      }
    }
    return getGetRetentionFenceMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ExplainRetentionRequest,
      io.tidemark.v1.ExplainRetentionResponse> getExplainRetentionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ExplainRetention",
      requestType = io.tidemark.v1.ExplainRetentionRequest.class,
      responseType = io.tidemark.v1.ExplainRetentionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ExplainRetentionRequest,
      io.tidemark.v1.ExplainRetentionResponse> getExplainRetentionMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ExplainRetentionRequest, io.tidemark.v1.ExplainRetentionResponse> getExplainRetentionMethod;
    if ((getExplainRetentionMethod = RetentionGrpc.getExplainRetentionMethod) == null) {
      synchronized (RetentionGrpc.class) {
        if ((getExplainRetentionMethod = RetentionGrpc.getExplainRetentionMethod) == null) {
          RetentionGrpc.getExplainRetentionMethod = getExplainRetentionMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ExplainRetentionRequest, io.tidemark.v1.ExplainRetentionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ExplainRetention"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ExplainRetentionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ExplainRetentionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RetentionMethodDescriptorSupplier("ExplainRetention"))
              .build();
        }
      }
    }
    return getExplainRetentionMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static RetentionStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RetentionStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RetentionStub>() {
        @java.lang.Override
        public RetentionStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RetentionStub(channel, callOptions);
        }
      };
    return RetentionStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static RetentionBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RetentionBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RetentionBlockingV2Stub>() {
        @java.lang.Override
        public RetentionBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RetentionBlockingV2Stub(channel, callOptions);
        }
      };
    return RetentionBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static RetentionBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RetentionBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RetentionBlockingStub>() {
        @java.lang.Override
        public RetentionBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RetentionBlockingStub(channel, callOptions);
        }
      };
    return RetentionBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static RetentionFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RetentionFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RetentionFutureStub>() {
        @java.lang.Override
        public RetentionFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RetentionFutureStub(channel, callOptions);
        }
      };
    return RetentionFutureStub.newStub(factory, channel);
  }

  /**
   */
  public interface AsyncService {

    /**
     * <pre>
     * The branch's snapshot and changelog fences and the consumers (and
     * full-scan pins) that set them. Fast with many consumers (indexed).
     * </pre>
     */
    default void getRetentionFence(io.tidemark.v1.GetRetentionFenceRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.GetRetentionFenceResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetRetentionFenceMethod(), responseObserver);
    }

    /**
     * <pre>
     * "Why is my data not expiring?": everything holding the branch's
     * retention back, lowest position first, with idle time, lease holder and
     * time left before expiry.
     * </pre>
     */
    default void explainRetention(io.tidemark.v1.ExplainRetentionRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ExplainRetentionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getExplainRetentionMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service Retention.
   */
  public static abstract class RetentionImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return RetentionGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service Retention.
   */
  public static final class RetentionStub
      extends io.grpc.stub.AbstractAsyncStub<RetentionStub> {
    private RetentionStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RetentionStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RetentionStub(channel, callOptions);
    }

    /**
     * <pre>
     * The branch's snapshot and changelog fences and the consumers (and
     * full-scan pins) that set them. Fast with many consumers (indexed).
     * </pre>
     */
    public void getRetentionFence(io.tidemark.v1.GetRetentionFenceRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.GetRetentionFenceResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetRetentionFenceMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * "Why is my data not expiring?": everything holding the branch's
     * retention back, lowest position first, with idle time, lease holder and
     * time left before expiry.
     * </pre>
     */
    public void explainRetention(io.tidemark.v1.ExplainRetentionRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ExplainRetentionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getExplainRetentionMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service Retention.
   */
  public static final class RetentionBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<RetentionBlockingV2Stub> {
    private RetentionBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RetentionBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RetentionBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * The branch's snapshot and changelog fences and the consumers (and
     * full-scan pins) that set them. Fast with many consumers (indexed).
     * </pre>
     */
    public io.tidemark.v1.GetRetentionFenceResponse getRetentionFence(io.tidemark.v1.GetRetentionFenceRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetRetentionFenceMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * "Why is my data not expiring?": everything holding the branch's
     * retention back, lowest position first, with idle time, lease holder and
     * time left before expiry.
     * </pre>
     */
    public io.tidemark.v1.ExplainRetentionResponse explainRetention(io.tidemark.v1.ExplainRetentionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getExplainRetentionMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service Retention.
   */
  public static final class RetentionBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<RetentionBlockingStub> {
    private RetentionBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RetentionBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RetentionBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * The branch's snapshot and changelog fences and the consumers (and
     * full-scan pins) that set them. Fast with many consumers (indexed).
     * </pre>
     */
    public io.tidemark.v1.GetRetentionFenceResponse getRetentionFence(io.tidemark.v1.GetRetentionFenceRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetRetentionFenceMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * "Why is my data not expiring?": everything holding the branch's
     * retention back, lowest position first, with idle time, lease holder and
     * time left before expiry.
     * </pre>
     */
    public io.tidemark.v1.ExplainRetentionResponse explainRetention(io.tidemark.v1.ExplainRetentionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getExplainRetentionMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service Retention.
   */
  public static final class RetentionFutureStub
      extends io.grpc.stub.AbstractFutureStub<RetentionFutureStub> {
    private RetentionFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RetentionFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RetentionFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * The branch's snapshot and changelog fences and the consumers (and
     * full-scan pins) that set them. Fast with many consumers (indexed).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.GetRetentionFenceResponse> getRetentionFence(
        io.tidemark.v1.GetRetentionFenceRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetRetentionFenceMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * "Why is my data not expiring?": everything holding the branch's
     * retention back, lowest position first, with idle time, lease holder and
     * time left before expiry.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.ExplainRetentionResponse> explainRetention(
        io.tidemark.v1.ExplainRetentionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getExplainRetentionMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_GET_RETENTION_FENCE = 0;
  private static final int METHODID_EXPLAIN_RETENTION = 1;

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
        case METHODID_GET_RETENTION_FENCE:
          serviceImpl.getRetentionFence((io.tidemark.v1.GetRetentionFenceRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.GetRetentionFenceResponse>) responseObserver);
          break;
        case METHODID_EXPLAIN_RETENTION:
          serviceImpl.explainRetention((io.tidemark.v1.ExplainRetentionRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ExplainRetentionResponse>) responseObserver);
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
          getGetRetentionFenceMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.GetRetentionFenceRequest,
              io.tidemark.v1.GetRetentionFenceResponse>(
                service, METHODID_GET_RETENTION_FENCE)))
        .addMethod(
          getExplainRetentionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.ExplainRetentionRequest,
              io.tidemark.v1.ExplainRetentionResponse>(
                service, METHODID_EXPLAIN_RETENTION)))
        .build();
  }

  private static abstract class RetentionBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    RetentionBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return io.tidemark.v1.RetentionOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("Retention");
    }
  }

  private static final class RetentionFileDescriptorSupplier
      extends RetentionBaseDescriptorSupplier {
    RetentionFileDescriptorSupplier() {}
  }

  private static final class RetentionMethodDescriptorSupplier
      extends RetentionBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    RetentionMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (RetentionGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new RetentionFileDescriptorSupplier())
              .addMethod(getGetRetentionFenceMethod())
              .addMethod(getExplainRetentionMethod())
              .build();
        }
      }
    }
    return result;
  }
}
