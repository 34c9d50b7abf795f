package io.tidemark.client;

import io.grpc.ClientInterceptor;

/**
 * W3C trace context on every call, through OpenTelemetry's API when the application has it: the
 * API is an optional dependency, never bundled (it must meet the application's own copy), so the
 * class that touches it is loaded only once the API is known to be there.
 */
final class TraceContext {
  private TraceContext() {}

  static ClientInterceptor interceptorIfAvailable() {
    try {
      Class.forName("io.opentelemetry.api.GlobalOpenTelemetry", false, TraceContext.class.getClassLoader());
    } catch (ClassNotFoundException | LinkageError absent) {
      return null;
    }
    return new OpenTelemetryPropagation();
  }
}
