package io.tidemark.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class AdminGrpc {

  private AdminGrpc() {}

  public static final java.lang.String SERVICE_NAME = "tidemark.v1.Admin";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ListConsumersRequest,
      io.tidemark.v1.ListConsumersResponse> getListConsumersMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListConsumers",
      requestType = io.tidemark.v1.ListConsumersRequest.class,
      responseType = io.tidemark.v1.ListConsumersResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ListConsumersRequest,
      io.tidemark.v1.ListConsumersResponse> getListConsumersMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ListConsumersRequest, io.tidemark.v1.ListConsumersResponse> getListConsumersMethod;
    if ((getListConsumersMethod = AdminGrpc.getListConsumersMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getListConsumersMethod = AdminGrpc.getListConsumersMethod) == null) {
          AdminGrpc.getListConsumersMethod = getListConsumersMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ListConsumersRequest, io.tidemark.v1.ListConsumersResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListConsumers"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ListConsumersRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ListConsumersResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ListConsumers"))
              .build();
        }
      }
    }
    return getListConsumersMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.DescribeConsumerRequest,
      io.tidemark.v1.DescribeConsumerResponse> getDescribeConsumerMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DescribeConsumer",
      requestType = io.tidemark.v1.DescribeConsumerRequest.class,
      responseType = io.tidemark.v1.DescribeConsumerResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.DescribeConsumerRequest,
      io.tidemark.v1.DescribeConsumerResponse> getDescribeConsumerMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.DescribeConsumerRequest, io.tidemark.v1.DescribeConsumerResponse> getDescribeConsumerMethod;
    if ((getDescribeConsumerMethod = AdminGrpc.getDescribeConsumerMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getDescribeConsumerMethod = AdminGrpc.getDescribeConsumerMethod) == null) {
          AdminGrpc.getDescribeConsumerMethod = getDescribeConsumerMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.DescribeConsumerRequest, io.tidemark.v1.DescribeConsumerResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DescribeConsumer"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.DescribeConsumerRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.DescribeConsumerResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("DescribeConsumer"))
              .build();
        }
      }
    }
    return getDescribeConsumerMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ResetConsumerRequest,
      io.tidemark.v1.ResetConsumerResponse> getResetConsumerMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ResetConsumer",
      requestType = io.tidemark.v1.ResetConsumerRequest.class,
      responseType = io.tidemark.v1.ResetConsumerResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ResetConsumerRequest,
      io.tidemark.v1.ResetConsumerResponse> getResetConsumerMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ResetConsumerRequest, io.tidemark.v1.ResetConsumerResponse> getResetConsumerMethod;
    if ((getResetConsumerMethod = AdminGrpc.getResetConsumerMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getResetConsumerMethod = AdminGrpc.getResetConsumerMethod) == null) {
          AdminGrpc.getResetConsumerMethod = getResetConsumerMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ResetConsumerRequest, io.tidemark.v1.ResetConsumerResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ResetConsumer"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ResetConsumerRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ResetConsumerResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ResetConsumer"))
              .build();
        }
      }
    }
    return getResetConsumerMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.DeleteConsumerRequest,
      io.tidemark.v1.DeleteConsumerResponse> getDeleteConsumerMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DeleteConsumer",
      requestType = io.tidemark.v1.DeleteConsumerRequest.class,
      responseType = io.tidemark.v1.DeleteConsumerResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.DeleteConsumerRequest,
      io.tidemark.v1.DeleteConsumerResponse> getDeleteConsumerMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.DeleteConsumerRequest, io.tidemark.v1.DeleteConsumerResponse> getDeleteConsumerMethod;
    if ((getDeleteConsumerMethod = AdminGrpc.getDeleteConsumerMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getDeleteConsumerMethod = AdminGrpc.getDeleteConsumerMethod) == null) {
          AdminGrpc.getDeleteConsumerMethod = getDeleteConsumerMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.DeleteConsumerRequest, io.tidemark.v1.DeleteConsumerResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DeleteConsumer"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.DeleteConsumerRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.DeleteConsumerResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("DeleteConsumer"))
              .build();
        }
      }
    }
    return getDeleteConsumerMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ClearConsumersRequest,
      io.tidemark.v1.ClearConsumersResponse> getClearConsumersMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ClearConsumers",
      requestType = io.tidemark.v1.ClearConsumersRequest.class,
      responseType = io.tidemark.v1.ClearConsumersResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ClearConsumersRequest,
      io.tidemark.v1.ClearConsumersResponse> getClearConsumersMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ClearConsumersRequest, io.tidemark.v1.ClearConsumersResponse> getClearConsumersMethod;
    if ((getClearConsumersMethod = AdminGrpc.getClearConsumersMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getClearConsumersMethod = AdminGrpc.getClearConsumersMethod) == null) {
          AdminGrpc.getClearConsumersMethod = getClearConsumersMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ClearConsumersRequest, io.tidemark.v1.ClearConsumersResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ClearConsumers"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ClearConsumersRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ClearConsumersResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ClearConsumers"))
              .build();
        }
      }
    }
    return getClearConsumersMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ResetConsumersRequest,
      io.tidemark.v1.ResetConsumersResponse> getResetConsumersMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ResetConsumers",
      requestType = io.tidemark.v1.ResetConsumersRequest.class,
      responseType = io.tidemark.v1.ResetConsumersResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ResetConsumersRequest,
      io.tidemark.v1.ResetConsumersResponse> getResetConsumersMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ResetConsumersRequest, io.tidemark.v1.ResetConsumersResponse> getResetConsumersMethod;
    if ((getResetConsumersMethod = AdminGrpc.getResetConsumersMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getResetConsumersMethod = AdminGrpc.getResetConsumersMethod) == null) {
          AdminGrpc.getResetConsumersMethod = getResetConsumersMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ResetConsumersRequest, io.tidemark.v1.ResetConsumersResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ResetConsumers"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ResetConsumersRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ResetConsumersResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ResetConsumers"))
              .build();
        }
      }
    }
    return getResetConsumersMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.RevokeLeaseRequest,
      io.tidemark.v1.RevokeLeaseResponse> getRevokeLeaseMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RevokeLease",
      requestType = io.tidemark.v1.RevokeLeaseRequest.class,
      responseType = io.tidemark.v1.RevokeLeaseResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.RevokeLeaseRequest,
      io.tidemark.v1.RevokeLeaseResponse> getRevokeLeaseMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.RevokeLeaseRequest, io.tidemark.v1.RevokeLeaseResponse> getRevokeLeaseMethod;
    if ((getRevokeLeaseMethod = AdminGrpc.getRevokeLeaseMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getRevokeLeaseMethod = AdminGrpc.getRevokeLeaseMethod) == null) {
          AdminGrpc.getRevokeLeaseMethod = getRevokeLeaseMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.RevokeLeaseRequest, io.tidemark.v1.RevokeLeaseResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RevokeLease"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.RevokeLeaseRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.RevokeLeaseResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("RevokeLease"))
              .build();
        }
      }
    }
    return getRevokeLeaseMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.RevokeLeasesRequest,
      io.tidemark.v1.RevokeLeasesResponse> getRevokeLeasesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RevokeLeases",
      requestType = io.tidemark.v1.RevokeLeasesRequest.class,
      responseType = io.tidemark.v1.RevokeLeasesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.RevokeLeasesRequest,
      io.tidemark.v1.RevokeLeasesResponse> getRevokeLeasesMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.RevokeLeasesRequest, io.tidemark.v1.RevokeLeasesResponse> getRevokeLeasesMethod;
    if ((getRevokeLeasesMethod = AdminGrpc.getRevokeLeasesMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getRevokeLeasesMethod = AdminGrpc.getRevokeLeasesMethod) == null) {
          AdminGrpc.getRevokeLeasesMethod = getRevokeLeasesMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.RevokeLeasesRequest, io.tidemark.v1.RevokeLeasesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RevokeLeases"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.RevokeLeasesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.RevokeLeasesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("RevokeLeases"))
              .build();
        }
      }
    }
    return getRevokeLeasesMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ListHistoryRequest,
      io.tidemark.v1.ListHistoryResponse> getListHistoryMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListHistory",
      requestType = io.tidemark.v1.ListHistoryRequest.class,
      responseType = io.tidemark.v1.ListHistoryResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ListHistoryRequest,
      io.tidemark.v1.ListHistoryResponse> getListHistoryMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ListHistoryRequest, io.tidemark.v1.ListHistoryResponse> getListHistoryMethod;
    if ((getListHistoryMethod = AdminGrpc.getListHistoryMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getListHistoryMethod = AdminGrpc.getListHistoryMethod) == null) {
          AdminGrpc.getListHistoryMethod = getListHistoryMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ListHistoryRequest, io.tidemark.v1.ListHistoryResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListHistory"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ListHistoryRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ListHistoryResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ListHistory"))
              .build();
        }
      }
    }
    return getListHistoryMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.GetTableOptionsRequest,
      io.tidemark.v1.GetTableOptionsResponse> getGetTableOptionsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetTableOptions",
      requestType = io.tidemark.v1.GetTableOptionsRequest.class,
      responseType = io.tidemark.v1.GetTableOptionsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.GetTableOptionsRequest,
      io.tidemark.v1.GetTableOptionsResponse> getGetTableOptionsMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.GetTableOptionsRequest, io.tidemark.v1.GetTableOptionsResponse> getGetTableOptionsMethod;
    if ((getGetTableOptionsMethod = AdminGrpc.getGetTableOptionsMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getGetTableOptionsMethod = AdminGrpc.getGetTableOptionsMethod) == null) {
          AdminGrpc.getGetTableOptionsMethod = getGetTableOptionsMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.GetTableOptionsRequest, io.tidemark.v1.GetTableOptionsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetTableOptions"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.GetTableOptionsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.GetTableOptionsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("GetTableOptions"))
              .build();
        }
      }
    }
    return getGetTableOptionsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.SetTableOptionsRequest,
      io.tidemark.v1.SetTableOptionsResponse> getSetTableOptionsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SetTableOptions",
      requestType = io.tidemark.v1.SetTableOptionsRequest.class,
      responseType = io.tidemark.v1.SetTableOptionsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.SetTableOptionsRequest,
      io.tidemark.v1.SetTableOptionsResponse> getSetTableOptionsMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.SetTableOptionsRequest, io.tidemark.v1.SetTableOptionsResponse> getSetTableOptionsMethod;
    if ((getSetTableOptionsMethod = AdminGrpc.getSetTableOptionsMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getSetTableOptionsMethod = AdminGrpc.getSetTableOptionsMethod) == null) {
          AdminGrpc.getSetTableOptionsMethod = getSetTableOptionsMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.SetTableOptionsRequest, io.tidemark.v1.SetTableOptionsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SetTableOptions"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.SetTableOptionsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.SetTableOptionsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("SetTableOptions"))
              .build();
        }
      }
    }
    return getSetTableOptionsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ExpireConsumersRequest,
      io.tidemark.v1.ExpireConsumersResponse> getExpireConsumersMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ExpireConsumers",
      requestType = io.tidemark.v1.ExpireConsumersRequest.class,
      responseType = io.tidemark.v1.ExpireConsumersResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ExpireConsumersRequest,
      io.tidemark.v1.ExpireConsumersResponse> getExpireConsumersMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ExpireConsumersRequest, io.tidemark.v1.ExpireConsumersResponse> getExpireConsumersMethod;
    if ((getExpireConsumersMethod = AdminGrpc.getExpireConsumersMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getExpireConsumersMethod = AdminGrpc.getExpireConsumersMethod) == null) {
          AdminGrpc.getExpireConsumersMethod = getExpireConsumersMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ExpireConsumersRequest, io.tidemark.v1.ExpireConsumersResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ExpireConsumers"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ExpireConsumersRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ExpireConsumersResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ExpireConsumers"))
              .build();
        }
      }
    }
    return getExpireConsumersMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.RegisterTableRequest,
      io.tidemark.v1.RegisterTableResponse> getRegisterTableMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RegisterTable",
      requestType = io.tidemark.v1.RegisterTableRequest.class,
      responseType = io.tidemark.v1.RegisterTableResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.RegisterTableRequest,
      io.tidemark.v1.RegisterTableResponse> getRegisterTableMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.RegisterTableRequest, io.tidemark.v1.RegisterTableResponse> getRegisterTableMethod;
    if ((getRegisterTableMethod = AdminGrpc.getRegisterTableMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getRegisterTableMethod = AdminGrpc.getRegisterTableMethod) == null) {
          AdminGrpc.getRegisterTableMethod = getRegisterTableMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.RegisterTableRequest, io.tidemark.v1.RegisterTableResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RegisterTable"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.RegisterTableRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.RegisterTableResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("RegisterTable"))
              .build();
        }
      }
    }
    return getRegisterTableMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.UnregisterTableRequest,
      io.tidemark.v1.UnregisterTableResponse> getUnregisterTableMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "UnregisterTable",
      requestType = io.tidemark.v1.UnregisterTableRequest.class,
      responseType = io.tidemark.v1.UnregisterTableResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.UnregisterTableRequest,
      io.tidemark.v1.UnregisterTableResponse> getUnregisterTableMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.UnregisterTableRequest, io.tidemark.v1.UnregisterTableResponse> getUnregisterTableMethod;
    if ((getUnregisterTableMethod = AdminGrpc.getUnregisterTableMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getUnregisterTableMethod = AdminGrpc.getUnregisterTableMethod) == null) {
          AdminGrpc.getUnregisterTableMethod = getUnregisterTableMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.UnregisterTableRequest, io.tidemark.v1.UnregisterTableResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "UnregisterTable"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.UnregisterTableRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.UnregisterTableResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("UnregisterTable"))
              .build();
        }
      }
    }
    return getUnregisterTableMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ListTablesRequest,
      io.tidemark.v1.ListTablesResponse> getListTablesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListTables",
      requestType = io.tidemark.v1.ListTablesRequest.class,
      responseType = io.tidemark.v1.ListTablesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ListTablesRequest,
      io.tidemark.v1.ListTablesResponse> getListTablesMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ListTablesRequest, io.tidemark.v1.ListTablesResponse> getListTablesMethod;
    if ((getListTablesMethod = AdminGrpc.getListTablesMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getListTablesMethod = AdminGrpc.getListTablesMethod) == null) {
          AdminGrpc.getListTablesMethod = getListTablesMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ListTablesRequest, io.tidemark.v1.ListTablesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListTables"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ListTablesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ListTablesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ListTables"))
              .build();
        }
      }
    }
    return getListTablesMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ImportConsumersRequest,
      io.tidemark.v1.ImportConsumersResponse> getImportConsumersMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ImportConsumers",
      requestType = io.tidemark.v1.ImportConsumersRequest.class,
      responseType = io.tidemark.v1.ImportConsumersResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ImportConsumersRequest,
      io.tidemark.v1.ImportConsumersResponse> getImportConsumersMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ImportConsumersRequest, io.tidemark.v1.ImportConsumersResponse> getImportConsumersMethod;
    if ((getImportConsumersMethod = AdminGrpc.getImportConsumersMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getImportConsumersMethod = AdminGrpc.getImportConsumersMethod) == null) {
          AdminGrpc.getImportConsumersMethod = getImportConsumersMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ImportConsumersRequest, io.tidemark.v1.ImportConsumersResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ImportConsumers"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ImportConsumersRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ImportConsumersResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ImportConsumers"))
              .build();
        }
      }
    }
    return getImportConsumersMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ExportStateRequest,
      io.tidemark.v1.ExportStateResponse> getExportStateMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ExportState",
      requestType = io.tidemark.v1.ExportStateRequest.class,
      responseType = io.tidemark.v1.ExportStateResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ExportStateRequest,
      io.tidemark.v1.ExportStateResponse> getExportStateMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ExportStateRequest, io.tidemark.v1.ExportStateResponse> getExportStateMethod;
    if ((getExportStateMethod = AdminGrpc.getExportStateMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getExportStateMethod = AdminGrpc.getExportStateMethod) == null) {
          AdminGrpc.getExportStateMethod = getExportStateMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ExportStateRequest, io.tidemark.v1.ExportStateResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ExportState"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ExportStateRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ExportStateResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ExportState"))
              .build();
        }
      }
    }
    return getExportStateMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.tidemark.v1.ImportStateRequest,
      io.tidemark.v1.ImportStateResponse> getImportStateMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ImportState",
      requestType = io.tidemark.v1.ImportStateRequest.class,
      responseType = io.tidemark.v1.ImportStateResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.CLIENT_STREAMING)
  public static io.grpc.MethodDescriptor<io.tidemark.v1.ImportStateRequest,
      io.tidemark.v1.ImportStateResponse> getImportStateMethod() {
    io.grpc.MethodDescriptor<io.tidemark.v1.ImportStateRequest, io.tidemark.v1.ImportStateResponse> getImportStateMethod;
    if ((getImportStateMethod = AdminGrpc.getImportStateMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getImportStateMethod = AdminGrpc.getImportStateMethod) == null) {
          AdminGrpc.getImportStateMethod = getImportStateMethod =
              io.grpc.MethodDescriptor.<io.tidemark.v1.ImportStateRequest, io.tidemark.v1.ImportStateResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.CLIENT_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ImportState"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ImportStateRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.tidemark.v1.ImportStateResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ImportState"))
              .build();
        }
      }
    }
    return getImportStateMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static AdminStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminStub>() {
        @java.lang.Override
        public AdminStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminStub(channel, callOptions);
        }
      };
    return AdminStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static AdminBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminBlockingV2Stub>() {
        @java.lang.Override
        public AdminBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminBlockingV2Stub(channel, callOptions);
        }
      };
    return AdminBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static AdminBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminBlockingStub>() {
        @java.lang.Override
        public AdminBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminBlockingStub(channel, callOptions);
        }
      };
    return AdminBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static AdminFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminFutureStub>() {
        @java.lang.Override
        public AdminFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminFutureStub(channel, callOptions);
        }
      };
    return AdminFutureStub.newStub(factory, channel);
  }

  /**
   */
  public interface AsyncService {

    /**
     * <pre>
     * Keys with a consumer or a live lease, paged, with lease and idle info.
     * </pre>
     */
    default void listConsumers(io.tidemark.v1.ListConsumersRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ListConsumersResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListConsumersMethod(), responseObserver);
    }

    /**
     * <pre>
     * One key: record, lease, table options, time to expiry, recent history.
     * </pre>
     */
    default void describeConsumer(io.tidemark.v1.DescribeConsumerRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.DescribeConsumerResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDescribeConsumerMethod(), responseObserver);
    }

    /**
     * <pre>
     * Sets a consumer's next_snapshot, creating it if absent (Paimon's
     * reset_consumer with a snapshot).
     * </pre>
     */
    default void resetConsumer(io.tidemark.v1.ResetConsumerRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ResetConsumerResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getResetConsumerMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes a consumer (Paimon's reset_consumer without a snapshot). The key
     * keeps its epoch, so epochs are never reused.
     * </pre>
     */
    default void deleteConsumer(io.tidemark.v1.DeleteConsumerRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.DeleteConsumerResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteConsumerMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes every consumer of a branch whose id fully matches `including`
     * and does not fully match `excluding` (Paimon's clear_consumers).
     * </pre>
     */
    default void clearConsumers(io.tidemark.v1.ClearConsumersRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ClearConsumersResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getClearConsumersMethod(), responseObserver);
    }

    /**
     * <pre>
     * SPEC §11 A6: moves every consumer of a branch whose id fully matches
     * `including` and not `excluding` to a target, in Kafka's vocabulary
     * (kafka-consumer-groups --reset-offsets). Plan-only unless `execute`;
     * with `expected_next_snapshots` (as the plan showed) each change is a
     * compare-and-set. Every target but `snapshot` needs a registered table
     * (FAILED_PRECONDITION, reason TABLE_NOT_REGISTERED otherwise).
     * </pre>
     */
    default void resetConsumers(io.tidemark.v1.ResetConsumersRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ResetConsumersResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getResetConsumersMethod(), responseObserver);
    }

    /**
     * <pre>
     * Ends a key's live lease and burns an epoch: the running query is fenced.
     * </pre>
     */
    default void revokeLease(io.tidemark.v1.RevokeLeaseRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.RevokeLeaseResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRevokeLeaseMethod(), responseObserver);
    }

    /**
     * <pre>
     * Revokes every live lease of a table (or of every table) whose consumer
     * id fully matches `including` and not `excluding`: each running query is
     * fenced (for a restore from backup, a move between clusters). Plan-only
     * unless `execute`.
     * </pre>
     */
    default void revokeLeases(io.tidemark.v1.RevokeLeasesRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.RevokeLeasesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRevokeLeasesMethod(), responseObserver);
    }

    /**
     * <pre>
     * Append-only history of position changes and lifecycle events.
     * </pre>
     */
    default void listHistory(io.tidemark.v1.ListHistoryRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ListHistoryResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListHistoryMethod(), responseObserver);
    }

    /**
     * <pre>
     * A table's consumer options.
     * </pre>
     */
    default void getTableOptions(io.tidemark.v1.GetTableOptionsRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.GetTableOptionsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetTableOptionsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Changes a table's consumer options.
     * </pre>
     */
    default void setTableOptions(io.tidemark.v1.SetTableOptionsRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.SetTableOptionsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSetTableOptionsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes expired consumers now (what the background sweeper does).
     * </pre>
     */
    default void expireConsumers(io.tidemark.v1.ExpireConsumersRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ExpireConsumersResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getExpireConsumersMethod(), responseObserver);
    }

    /**
     * <pre>
     * SPEC §9: registers a Paimon table's storage location. tidemark then
     * mirrors every consumer of the table into the table's own consumer files
     * (consumer/consumer-&lt;id&gt;, {"nextSnapshot": n}), so Paimon's snapshot
     * expiration honours them. Registering again moves the table.
     * </pre>
     */
    default void registerTable(io.tidemark.v1.RegisterTableRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.RegisterTableResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRegisterTableMethod(), responseObserver);
    }

    /**
     * <pre>
     * Stops mirroring a table; its consumer files stay as they are.
     * </pre>
     */
    default void unregisterTable(io.tidemark.v1.UnregisterTableRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.UnregisterTableResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getUnregisterTableMethod(), responseObserver);
    }

    /**
     * <pre>
     * Registered tables.
     * </pre>
     */
    default void listTables(io.tidemark.v1.ListTablesRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ListTablesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListTablesMethod(), responseObserver);
    }

    /**
     * <pre>
     * Reads a registered table's existing consumer files (every branch) into
     * tidemark: a consumer tidemark does not have yet is created at the file's
     * position. Plan-only unless `execute`.
     * </pre>
     */
    default void importConsumers(io.tidemark.v1.ImportConsumersRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ImportConsumersResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getImportConsumersMethod(), responseObserver);
    }

    /**
     * <pre>
     * SPEC §11 A7: tidemark's own state, for a backup or a move between
     * clusters: every key (its epoch high-water mark and consumer), table
     * options and registrations, as JSON lines read from one consistent
     * snapshot. The first line is a versioned header, the last a trailer with
     * the counts (a file without it was cut short). Leases are not exported.
     * </pre>
     */
    default void exportState(io.tidemark.v1.ExportStateRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ExportStateResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getExportStateMethod(), responseObserver);
    }

    /**
     * <pre>
     * Imports what ExportState wrote (the first message carries the settings).
     * Plan-only unless `execute`. An epoch high-water mark is never lowered;
     * consumers, options and registrations the target has differently are
     * kept unless `replace_existing`; nothing is deleted; a key with a live
     * lease is refused (LEASE_HELD) unless `force`, which revokes the lease;
     * registrations obey the server's allowed locations. A file that is not
     * whole (no header, no trailer, counts that differ) changes nothing.
     * </pre>
     */
    default io.grpc.stub.StreamObserver<io.tidemark.v1.ImportStateRequest> importState(
        io.grpc.stub.StreamObserver<io.tidemark.v1.ImportStateResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getImportStateMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service Admin.
   */
  public static abstract class AdminImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return AdminGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service Admin.
   */
  public static final class AdminStub
      extends io.grpc.stub.AbstractAsyncStub<AdminStub> {
    private AdminStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminStub(channel, callOptions);
    }

    /**
     * <pre>
     * Keys with a consumer or a live lease, paged, with lease and idle info.
     * </pre>
     */
    public void listConsumers(io.tidemark.v1.ListConsumersRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ListConsumersResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListConsumersMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * One key: record, lease, table options, time to expiry, recent history.
     * </pre>
     */
    public void describeConsumer(io.tidemark.v1.DescribeConsumerRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.DescribeConsumerResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDescribeConsumerMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Sets a consumer's next_snapshot, creating it if absent (Paimon's
     * reset_consumer with a snapshot).
     * </pre>
     */
    public void resetConsumer(io.tidemark.v1.ResetConsumerRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ResetConsumerResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getResetConsumerMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes a consumer (Paimon's reset_consumer without a snapshot). The key
     * keeps its epoch, so epochs are never reused.
     * </pre>
     */
    public void deleteConsumer(io.tidemark.v1.DeleteConsumerRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.DeleteConsumerResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteConsumerMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes every consumer of a branch whose id fully matches `including`
     * and does not fully match `excluding` (Paimon's clear_consumers).
     * </pre>
     */
    public void clearConsumers(io.tidemark.v1.ClearConsumersRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ClearConsumersResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getClearConsumersMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * SPEC §11 A6: moves every consumer of a branch whose id fully matches
     * `including` and not `excluding` to a target, in Kafka's vocabulary
     * (kafka-consumer-groups --reset-offsets). Plan-only unless `execute`;
     * with `expected_next_snapshots` (as the plan showed) each change is a
     * compare-and-set. Every target but `snapshot` needs a registered table
     * (FAILED_PRECONDITION, reason TABLE_NOT_REGISTERED otherwise).
     * </pre>
     */
    public void resetConsumers(io.tidemark.v1.ResetConsumersRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ResetConsumersResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getResetConsumersMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Ends a key's live lease and burns an epoch: the running query is fenced.
     * </pre>
     */
    public void revokeLease(io.tidemark.v1.RevokeLeaseRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.RevokeLeaseResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRevokeLeaseMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Revokes every live lease of a table (or of every table) whose consumer
     * id fully matches `including` and not `excluding`: each running query is
     * fenced (for a restore from backup, a move between clusters). Plan-only
     * unless `execute`.
     * </pre>
     */
    public void revokeLeases(io.tidemark.v1.RevokeLeasesRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.RevokeLeasesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRevokeLeasesMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Append-only history of position changes and lifecycle events.
     * </pre>
     */
    public void listHistory(io.tidemark.v1.ListHistoryRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ListHistoryResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListHistoryMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * A table's consumer options.
     * </pre>
     */
    public void getTableOptions(io.tidemark.v1.GetTableOptionsRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.GetTableOptionsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetTableOptionsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Changes a table's consumer options.
     * </pre>
     */
    public void setTableOptions(io.tidemark.v1.SetTableOptionsRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.SetTableOptionsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSetTableOptionsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes expired consumers now (what the background sweeper does).
     * </pre>
     */
    public void expireConsumers(io.tidemark.v1.ExpireConsumersRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ExpireConsumersResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getExpireConsumersMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * SPEC §9: registers a Paimon table's storage location. tidemark then
     * mirrors every consumer of the table into the table's own consumer files
     * (consumer/consumer-&lt;id&gt;, {"nextSnapshot": n}), so Paimon's snapshot
     * expiration honours them. Registering again moves the table.
     * </pre>
     */
    public void registerTable(io.tidemark.v1.RegisterTableRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.RegisterTableResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRegisterTableMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Stops mirroring a table; its consumer files stay as they are.
     * </pre>
     */
    public void unregisterTable(io.tidemark.v1.UnregisterTableRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.UnregisterTableResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getUnregisterTableMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Registered tables.
     * </pre>
     */
    public void listTables(io.tidemark.v1.ListTablesRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ListTablesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListTablesMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Reads a registered table's existing consumer files (every branch) into
     * tidemark: a consumer tidemark does not have yet is created at the file's
     * position. Plan-only unless `execute`.
     * </pre>
     */
    public void importConsumers(io.tidemark.v1.ImportConsumersRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ImportConsumersResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getImportConsumersMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * SPEC §11 A7: tidemark's own state, for a backup or a move between
     * clusters: every key (its epoch high-water mark and consumer), table
     * options and registrations, as JSON lines read from one consistent
     * snapshot. The first line is a versioned header, the last a trailer with
     * the counts (a file without it was cut short). Leases are not exported.
     * </pre>
     */
    public void exportState(io.tidemark.v1.ExportStateRequest request,
        io.grpc.stub.StreamObserver<io.tidemark.v1.ExportStateResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getExportStateMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Imports what ExportState wrote (the first message carries the settings).
     * Plan-only unless `execute`. An epoch high-water mark is never lowered;
     * consumers, options and registrations the target has differently are
     * kept unless `replace_existing`; nothing is deleted; a key with a live
     * lease is refused (LEASE_HELD) unless `force`, which revokes the lease;
     * registrations obey the server's allowed locations. A file that is not
     * whole (no header, no trailer, counts that differ) changes nothing.
     * </pre>
     */
    public io.grpc.stub.StreamObserver<io.tidemark.v1.ImportStateRequest> importState(
        io.grpc.stub.StreamObserver<io.tidemark.v1.ImportStateResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncClientStreamingCall(
          getChannel().newCall(getImportStateMethod(), getCallOptions()), responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service Admin.
   */
  public static final class AdminBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<AdminBlockingV2Stub> {
    private AdminBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Keys with a consumer or a live lease, paged, with lease and idle info.
     * </pre>
     */
    public io.tidemark.v1.ListConsumersResponse listConsumers(io.tidemark.v1.ListConsumersRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListConsumersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * One key: record, lease, table options, time to expiry, recent history.
     * </pre>
     */
    public io.tidemark.v1.DescribeConsumerResponse describeConsumer(io.tidemark.v1.DescribeConsumerRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getDescribeConsumerMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Sets a consumer's next_snapshot, creating it if absent (Paimon's
     * reset_consumer with a snapshot).
     * </pre>
     */
    public io.tidemark.v1.ResetConsumerResponse resetConsumer(io.tidemark.v1.ResetConsumerRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getResetConsumerMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a consumer (Paimon's reset_consumer without a snapshot). The key
     * keeps its epoch, so epochs are never reused.
     * </pre>
     */
    public io.tidemark.v1.DeleteConsumerResponse deleteConsumer(io.tidemark.v1.DeleteConsumerRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getDeleteConsumerMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes every consumer of a branch whose id fully matches `including`
     * and does not fully match `excluding` (Paimon's clear_consumers).
     * </pre>
     */
    public io.tidemark.v1.ClearConsumersResponse clearConsumers(io.tidemark.v1.ClearConsumersRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getClearConsumersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * SPEC §11 A6: moves every consumer of a branch whose id fully matches
     * `including` and not `excluding` to a target, in Kafka's vocabulary
     * (kafka-consumer-groups --reset-offsets). Plan-only unless `execute`;
     * with `expected_next_snapshots` (as the plan showed) each change is a
     * compare-and-set. Every target but `snapshot` needs a registered table
     * (FAILED_PRECONDITION, reason TABLE_NOT_REGISTERED otherwise).
     * </pre>
     */
    public io.tidemark.v1.ResetConsumersResponse resetConsumers(io.tidemark.v1.ResetConsumersRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getResetConsumersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Ends a key's live lease and burns an epoch: the running query is fenced.
     * </pre>
     */
    public io.tidemark.v1.RevokeLeaseResponse revokeLease(io.tidemark.v1.RevokeLeaseRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRevokeLeaseMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Revokes every live lease of a table (or of every table) whose consumer
     * id fully matches `including` and not `excluding`: each running query is
     * fenced (for a restore from backup, a move between clusters). Plan-only
     * unless `execute`.
     * </pre>
     */
    public io.tidemark.v1.RevokeLeasesResponse revokeLeases(io.tidemark.v1.RevokeLeasesRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRevokeLeasesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Append-only history of position changes and lifecycle events.
     * </pre>
     */
    public io.tidemark.v1.ListHistoryResponse listHistory(io.tidemark.v1.ListHistoryRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListHistoryMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * A table's consumer options.
     * </pre>
     */
    public io.tidemark.v1.GetTableOptionsResponse getTableOptions(io.tidemark.v1.GetTableOptionsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetTableOptionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes a table's consumer options.
     * </pre>
     */
    public io.tidemark.v1.SetTableOptionsResponse setTableOptions(io.tidemark.v1.SetTableOptionsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getSetTableOptionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes expired consumers now (what the background sweeper does).
     * </pre>
     */
    public io.tidemark.v1.ExpireConsumersResponse expireConsumers(io.tidemark.v1.ExpireConsumersRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getExpireConsumersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * SPEC §9: registers a Paimon table's storage location. tidemark then
     * mirrors every consumer of the table into the table's own consumer files
     * (consumer/consumer-&lt;id&gt;, {"nextSnapshot": n}), so Paimon's snapshot
     * expiration honours them. Registering again moves the table.
     * </pre>
     */
    public io.tidemark.v1.RegisterTableResponse registerTable(io.tidemark.v1.RegisterTableRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRegisterTableMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Stops mirroring a table; its consumer files stay as they are.
     * </pre>
     */
    public io.tidemark.v1.UnregisterTableResponse unregisterTable(io.tidemark.v1.UnregisterTableRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getUnregisterTableMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Registered tables.
     * </pre>
     */
    public io.tidemark.v1.ListTablesResponse listTables(io.tidemark.v1.ListTablesRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListTablesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Reads a registered table's existing consumer files (every branch) into
     * tidemark: a consumer tidemark does not have yet is created at the file's
     * position. Plan-only unless `execute`.
     * </pre>
     */
    public io.tidemark.v1.ImportConsumersResponse importConsumers(io.tidemark.v1.ImportConsumersRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getImportConsumersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * SPEC §11 A7: tidemark's own state, for a backup or a move between
     * clusters: every key (its epoch high-water mark and consumer), table
     * options and registrations, as JSON lines read from one consistent
     * snapshot. The first line is a versioned header, the last a trailer with
     * the counts (a file without it was cut short). Leases are not exported.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, io.tidemark.v1.ExportStateResponse>
        exportState(io.tidemark.v1.ExportStateRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getExportStateMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Imports what ExportState wrote (the first message carries the settings).
     * Plan-only unless `execute`. An epoch high-water mark is never lowered;
     * consumers, options and registrations the target has differently are
     * kept unless `replace_existing`; nothing is deleted; a key with a live
     * lease is refused (LEASE_HELD) unless `force`, which revokes the lease;
     * registrations obey the server's allowed locations. A file that is not
     * whole (no header, no trailer, counts that differ) changes nothing.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<io.tidemark.v1.ImportStateRequest, io.tidemark.v1.ImportStateResponse>
        importState() {
      return io.grpc.stub.ClientCalls.blockingClientStreamingCall(
          getChannel(), getImportStateMethod(), getCallOptions());
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service Admin.
   */
  public static final class AdminBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<AdminBlockingStub> {
    private AdminBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Keys with a consumer or a live lease, paged, with lease and idle info.
     * </pre>
     */
    public io.tidemark.v1.ListConsumersResponse listConsumers(io.tidemark.v1.ListConsumersRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListConsumersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * One key: record, lease, table options, time to expiry, recent history.
     * </pre>
     */
    public io.tidemark.v1.DescribeConsumerResponse describeConsumer(io.tidemark.v1.DescribeConsumerRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDescribeConsumerMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Sets a consumer's next_snapshot, creating it if absent (Paimon's
     * reset_consumer with a snapshot).
     * </pre>
     */
    public io.tidemark.v1.ResetConsumerResponse resetConsumer(io.tidemark.v1.ResetConsumerRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getResetConsumerMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a consumer (Paimon's reset_consumer without a snapshot). The key
     * keeps its epoch, so epochs are never reused.
     * </pre>
     */
    public io.tidemark.v1.DeleteConsumerResponse deleteConsumer(io.tidemark.v1.DeleteConsumerRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteConsumerMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes every consumer of a branch whose id fully matches `including`
     * and does not fully match `excluding` (Paimon's clear_consumers).
     * </pre>
     */
    public io.tidemark.v1.ClearConsumersResponse clearConsumers(io.tidemark.v1.ClearConsumersRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getClearConsumersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * SPEC §11 A6: moves every consumer of a branch whose id fully matches
     * `including` and not `excluding` to a target, in Kafka's vocabulary
     * (kafka-consumer-groups --reset-offsets). Plan-only unless `execute`;
     * with `expected_next_snapshots` (as the plan showed) each change is a
     * compare-and-set. Every target but `snapshot` needs a registered table
     * (FAILED_PRECONDITION, reason TABLE_NOT_REGISTERED otherwise).
     * </pre>
     */
    public io.tidemark.v1.ResetConsumersResponse resetConsumers(io.tidemark.v1.ResetConsumersRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getResetConsumersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Ends a key's live lease and burns an epoch: the running query is fenced.
     * </pre>
     */
    public io.tidemark.v1.RevokeLeaseResponse revokeLease(io.tidemark.v1.RevokeLeaseRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRevokeLeaseMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Revokes every live lease of a table (or of every table) whose consumer
     * id fully matches `including` and not `excluding`: each running query is
     * fenced (for a restore from backup, a move between clusters). Plan-only
     * unless `execute`.
     * </pre>
     */
    public io.tidemark.v1.RevokeLeasesResponse revokeLeases(io.tidemark.v1.RevokeLeasesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRevokeLeasesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Append-only history of position changes and lifecycle events.
     * </pre>
     */
    public io.tidemark.v1.ListHistoryResponse listHistory(io.tidemark.v1.ListHistoryRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListHistoryMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * A table's consumer options.
     * </pre>
     */
    public io.tidemark.v1.GetTableOptionsResponse getTableOptions(io.tidemark.v1.GetTableOptionsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetTableOptionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes a table's consumer options.
     * </pre>
     */
    public io.tidemark.v1.SetTableOptionsResponse setTableOptions(io.tidemark.v1.SetTableOptionsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSetTableOptionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes expired consumers now (what the background sweeper does).
     * </pre>
     */
    public io.tidemark.v1.ExpireConsumersResponse expireConsumers(io.tidemark.v1.ExpireConsumersRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getExpireConsumersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * SPEC §9: registers a Paimon table's storage location. tidemark then
     * mirrors every consumer of the table into the table's own consumer files
     * (consumer/consumer-&lt;id&gt;, {"nextSnapshot": n}), so Paimon's snapshot
     * expiration honours them. Registering again moves the table.
     * </pre>
     */
    public io.tidemark.v1.RegisterTableResponse registerTable(io.tidemark.v1.RegisterTableRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRegisterTableMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Stops mirroring a table; its consumer files stay as they are.
     * </pre>
     */
    public io.tidemark.v1.UnregisterTableResponse unregisterTable(io.tidemark.v1.UnregisterTableRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getUnregisterTableMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Registered tables.
     * </pre>
     */
    public io.tidemark.v1.ListTablesResponse listTables(io.tidemark.v1.ListTablesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListTablesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Reads a registered table's existing consumer files (every branch) into
     * tidemark: a consumer tidemark does not have yet is created at the file's
     * position. Plan-only unless `execute`.
     * </pre>
     */
    public io.tidemark.v1.ImportConsumersResponse importConsumers(io.tidemark.v1.ImportConsumersRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getImportConsumersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * SPEC §11 A7: tidemark's own state, for a backup or a move between
     * clusters: every key (its epoch high-water mark and consumer), table
     * options and registrations, as JSON lines read from one consistent
     * snapshot. The first line is a versioned header, the last a trailer with
     * the counts (a file without it was cut short). Leases are not exported.
     * </pre>
     */
    public java.util.Iterator<io.tidemark.v1.ExportStateResponse> exportState(
        io.tidemark.v1.ExportStateRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getExportStateMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service Admin.
   */
  public static final class AdminFutureStub
      extends io.grpc.stub.AbstractFutureStub<AdminFutureStub> {
    private AdminFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Keys with a consumer or a live lease, paged, with lease and idle info.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.ListConsumersResponse> listConsumers(
        io.tidemark.v1.ListConsumersRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListConsumersMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * One key: record, lease, table options, time to expiry, recent history.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.DescribeConsumerResponse> describeConsumer(
        io.tidemark.v1.DescribeConsumerRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDescribeConsumerMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Sets a consumer's next_snapshot, creating it if absent (Paimon's
     * reset_consumer with a snapshot).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.ResetConsumerResponse> resetConsumer(
        io.tidemark.v1.ResetConsumerRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getResetConsumerMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes a consumer (Paimon's reset_consumer without a snapshot). The key
     * keeps its epoch, so epochs are never reused.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.DeleteConsumerResponse> deleteConsumer(
        io.tidemark.v1.DeleteConsumerRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteConsumerMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes every consumer of a branch whose id fully matches `including`
     * and does not fully match `excluding` (Paimon's clear_consumers).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.ClearConsumersResponse> clearConsumers(
        io.tidemark.v1.ClearConsumersRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getClearConsumersMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * SPEC §11 A6: moves every consumer of a branch whose id fully matches
     * `including` and not `excluding` to a target, in Kafka's vocabulary
     * (kafka-consumer-groups --reset-offsets). Plan-only unless `execute`;
     * with `expected_next_snapshots` (as the plan showed) each change is a
     * compare-and-set. Every target but `snapshot` needs a registered table
     * (FAILED_PRECONDITION, reason TABLE_NOT_REGISTERED otherwise).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.ResetConsumersResponse> resetConsumers(
        io.tidemark.v1.ResetConsumersRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getResetConsumersMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Ends a key's live lease and burns an epoch: the running query is fenced.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.RevokeLeaseResponse> revokeLease(
        io.tidemark.v1.RevokeLeaseRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRevokeLeaseMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Revokes every live lease of a table (or of every table) whose consumer
     * id fully matches `including` and not `excluding`: each running query is
     * fenced (for a restore from backup, a move between clusters). Plan-only
     * unless `execute`.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.RevokeLeasesResponse> revokeLeases(
        io.tidemark.v1.RevokeLeasesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRevokeLeasesMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Append-only history of position changes and lifecycle events.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.ListHistoryResponse> listHistory(
        io.tidemark.v1.ListHistoryRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListHistoryMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * A table's consumer options.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.GetTableOptionsResponse> getTableOptions(
        io.tidemark.v1.GetTableOptionsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetTableOptionsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Changes a table's consumer options.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.SetTableOptionsResponse> setTableOptions(
        io.tidemark.v1.SetTableOptionsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSetTableOptionsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes expired consumers now (what the background sweeper does).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.ExpireConsumersResponse> expireConsumers(
        io.tidemark.v1.ExpireConsumersRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getExpireConsumersMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * SPEC §9: registers a Paimon table's storage location. tidemark then
     * mirrors every consumer of the table into the table's own consumer files
     * (consumer/consumer-&lt;id&gt;, {"nextSnapshot": n}), so Paimon's snapshot
     * expiration honours them. Registering again moves the table.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.RegisterTableResponse> registerTable(
        io.tidemark.v1.RegisterTableRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRegisterTableMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Stops mirroring a table; its consumer files stay as they are.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.UnregisterTableResponse> unregisterTable(
        io.tidemark.v1.UnregisterTableRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getUnregisterTableMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Registered tables.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.ListTablesResponse> listTables(
        io.tidemark.v1.ListTablesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListTablesMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Reads a registered table's existing consumer files (every branch) into
     * tidemark: a consumer tidemark does not have yet is created at the file's
     * position. Plan-only unless `execute`.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.tidemark.v1.ImportConsumersResponse> importConsumers(
        io.tidemark.v1.ImportConsumersRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getImportConsumersMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_LIST_CONSUMERS = 0;
  private static final int METHODID_DESCRIBE_CONSUMER = 1;
  private static final int METHODID_RESET_CONSUMER = 2;
  private static final int METHODID_DELETE_CONSUMER = 3;
  private static final int METHODID_CLEAR_CONSUMERS = 4;
  private static final int METHODID_RESET_CONSUMERS = 5;
  private static final int METHODID_REVOKE_LEASE = 6;
  private static final int METHODID_REVOKE_LEASES = 7;
  private static final int METHODID_LIST_HISTORY = 8;
  private static final int METHODID_GET_TABLE_OPTIONS = 9;
  private static final int METHODID_SET_TABLE_OPTIONS = 10;
  private static final int METHODID_EXPIRE_CONSUMERS = 11;
  private static final int METHODID_REGISTER_TABLE = 12;
  private static final int METHODID_UNREGISTER_TABLE = 13;
  private static final int METHODID_LIST_TABLES = 14;
  private static final int METHODID_IMPORT_CONSUMERS = 15;
  private static final int METHODID_EXPORT_STATE = 16;
  private static final int METHODID_IMPORT_STATE = 17;

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
        case METHODID_LIST_CONSUMERS:
          serviceImpl.listConsumers((io.tidemark.v1.ListConsumersRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ListConsumersResponse>) responseObserver);
          break;
        case METHODID_DESCRIBE_CONSUMER:
          serviceImpl.describeConsumer((io.tidemark.v1.DescribeConsumerRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.DescribeConsumerResponse>) responseObserver);
          break;
        case METHODID_RESET_CONSUMER:
          serviceImpl.resetConsumer((io.tidemark.v1.ResetConsumerRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ResetConsumerResponse>) responseObserver);
          break;
        case METHODID_DELETE_CONSUMER:
          serviceImpl.deleteConsumer((io.tidemark.v1.DeleteConsumerRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.DeleteConsumerResponse>) responseObserver);
          break;
        case METHODID_CLEAR_CONSUMERS:
          serviceImpl.clearConsumers((io.tidemark.v1.ClearConsumersRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ClearConsumersResponse>) responseObserver);
          break;
        case METHODID_RESET_CONSUMERS:
          serviceImpl.resetConsumers((io.tidemark.v1.ResetConsumersRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ResetConsumersResponse>) responseObserver);
          break;
        case METHODID_REVOKE_LEASE:
          serviceImpl.revokeLease((io.tidemark.v1.RevokeLeaseRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.RevokeLeaseResponse>) responseObserver);
          break;
        case METHODID_REVOKE_LEASES:
          serviceImpl.revokeLeases((io.tidemark.v1.RevokeLeasesRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.RevokeLeasesResponse>) responseObserver);
          break;
        case METHODID_LIST_HISTORY:
          serviceImpl.listHistory((io.tidemark.v1.ListHistoryRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ListHistoryResponse>) responseObserver);
          break;
        case METHODID_GET_TABLE_OPTIONS:
          serviceImpl.getTableOptions((io.tidemark.v1.GetTableOptionsRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.GetTableOptionsResponse>) responseObserver);
          break;
        case METHODID_SET_TABLE_OPTIONS:
          serviceImpl.setTableOptions((io.tidemark.v1.SetTableOptionsRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.SetTableOptionsResponse>) responseObserver);
          break;
        case METHODID_EXPIRE_CONSUMERS:
          serviceImpl.expireConsumers((io.tidemark.v1.ExpireConsumersRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ExpireConsumersResponse>) responseObserver);
          break;
        case METHODID_REGISTER_TABLE:
          serviceImpl.registerTable((io.tidemark.v1.RegisterTableRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.RegisterTableResponse>) responseObserver);
          break;
        case METHODID_UNREGISTER_TABLE:
          serviceImpl.unregisterTable((io.tidemark.v1.UnregisterTableRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.UnregisterTableResponse>) responseObserver);
          break;
        case METHODID_LIST_TABLES:
          serviceImpl.listTables((io.tidemark.v1.ListTablesRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ListTablesResponse>) responseObserver);
          break;
        case METHODID_IMPORT_CONSUMERS:
          serviceImpl.importConsumers((io.tidemark.v1.ImportConsumersRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ImportConsumersResponse>) responseObserver);
          break;
        case METHODID_EXPORT_STATE:
          serviceImpl.exportState((io.tidemark.v1.ExportStateRequest) request,
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ExportStateResponse>) responseObserver);
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
        case METHODID_IMPORT_STATE:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.importState(
              (io.grpc.stub.StreamObserver<io.tidemark.v1.ImportStateResponse>) responseObserver);
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getListConsumersMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.ListConsumersRequest,
              io.tidemark.v1.ListConsumersResponse>(
                service, METHODID_LIST_CONSUMERS)))
        .addMethod(
          getDescribeConsumerMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.DescribeConsumerRequest,
              io.tidemark.v1.DescribeConsumerResponse>(
                service, METHODID_DESCRIBE_CONSUMER)))
        .addMethod(
          getResetConsumerMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.ResetConsumerRequest,
              io.tidemark.v1.ResetConsumerResponse>(
                service, METHODID_RESET_CONSUMER)))
        .addMethod(
          getDeleteConsumerMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.DeleteConsumerRequest,
              io.tidemark.v1.DeleteConsumerResponse>(
                service, METHODID_DELETE_CONSUMER)))
        .addMethod(
          getClearConsumersMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.ClearConsumersRequest,
              io.tidemark.v1.ClearConsumersResponse>(
                service, METHODID_CLEAR_CONSUMERS)))
        .addMethod(
          getResetConsumersMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.ResetConsumersRequest,
              io.tidemark.v1.ResetConsumersResponse>(
                service, METHODID_RESET_CONSUMERS)))
        .addMethod(
          getRevokeLeaseMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.RevokeLeaseRequest,
              io.tidemark.v1.RevokeLeaseResponse>(
                service, METHODID_REVOKE_LEASE)))
        .addMethod(
          getRevokeLeasesMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.RevokeLeasesRequest,
              io.tidemark.v1.RevokeLeasesResponse>(
                service, METHODID_REVOKE_LEASES)))
        .addMethod(
          getListHistoryMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.ListHistoryRequest,
              io.tidemark.v1.ListHistoryResponse>(
                service, METHODID_LIST_HISTORY)))
        .addMethod(
          getGetTableOptionsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.GetTableOptionsRequest,
              io.tidemark.v1.GetTableOptionsResponse>(
                service, METHODID_GET_TABLE_OPTIONS)))
        .addMethod(
          getSetTableOptionsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.SetTableOptionsRequest,
              io.tidemark.v1.SetTableOptionsResponse>(
                service, METHODID_SET_TABLE_OPTIONS)))
        .addMethod(
          getExpireConsumersMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.ExpireConsumersRequest,
              io.tidemark.v1.ExpireConsumersResponse>(
                service, METHODID_EXPIRE_CONSUMERS)))
        .addMethod(
          getRegisterTableMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.RegisterTableRequest,
              io.tidemark.v1.RegisterTableResponse>(
                service, METHODID_REGISTER_TABLE)))
        .addMethod(
          getUnregisterTableMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.UnregisterTableRequest,
              io.tidemark.v1.UnregisterTableResponse>(
                service, METHODID_UNREGISTER_TABLE)))
        .addMethod(
          getListTablesMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.ListTablesRequest,
              io.tidemark.v1.ListTablesResponse>(
                service, METHODID_LIST_TABLES)))
        .addMethod(
          getImportConsumersMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.tidemark.v1.ImportConsumersRequest,
              io.tidemark.v1.ImportConsumersResponse>(
                service, METHODID_IMPORT_CONSUMERS)))
        .addMethod(
          getExportStateMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              io.tidemark.v1.ExportStateRequest,
              io.tidemark.v1.ExportStateResponse>(
                service, METHODID_EXPORT_STATE)))
        .addMethod(
          getImportStateMethod(),
          io.grpc.stub.ServerCalls.asyncClientStreamingCall(
            new MethodHandlers<
              io.tidemark.v1.ImportStateRequest,
              io.tidemark.v1.ImportStateResponse>(
                service, METHODID_IMPORT_STATE)))
        .build();
  }

  private static abstract class AdminBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    AdminBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return io.tidemark.v1.AdminOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("Admin");
    }
  }

  private static final class AdminFileDescriptorSupplier
      extends AdminBaseDescriptorSupplier {
    AdminFileDescriptorSupplier() {}
  }

  private static final class AdminMethodDescriptorSupplier
      extends AdminBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    AdminMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (AdminGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new AdminFileDescriptorSupplier())
              .addMethod(getListConsumersMethod())
              .addMethod(getDescribeConsumerMethod())
              .addMethod(getResetConsumerMethod())
              .addMethod(getDeleteConsumerMethod())
              .addMethod(getClearConsumersMethod())
              .addMethod(getResetConsumersMethod())
              .addMethod(getRevokeLeaseMethod())
              .addMethod(getRevokeLeasesMethod())
              .addMethod(getListHistoryMethod())
              .addMethod(getGetTableOptionsMethod())
              .addMethod(getSetTableOptionsMethod())
              .addMethod(getExpireConsumersMethod())
              .addMethod(getRegisterTableMethod())
              .addMethod(getUnregisterTableMethod())
              .addMethod(getListTablesMethod())
              .addMethod(getImportConsumersMethod())
              .addMethod(getExportStateMethod())
              .addMethod(getImportStateMethod())
              .build();
        }
      }
    }
    return result;
  }
}
