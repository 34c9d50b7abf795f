package io.tidemark.client;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapSetter;

/**
 * Injects the current OpenTelemetry context (traceparent, tracestate, baggage) through the global
 * propagators into each call's headers. Without a current span, or with the API and no SDK,
 * nothing is added. Each retry attempt carries the same context: it is read on the calling thread.
 */
final class OpenTelemetryPropagation implements ClientInterceptor {
  private static final TextMapSetter<Metadata> SETTER =
      (headers, key, value) -> {
        if (headers != null) {
          headers.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), value);
        }
      };

  @Override
  public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
    Context context = Context.current();
    return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
      @Override
      public void start(Listener<R> listener, Metadata headers) {
        GlobalOpenTelemetry.getPropagators().getTextMapPropagator().inject(context, headers, SETTER);
        super.start(listener, headers);
      }
    };
  }
}
