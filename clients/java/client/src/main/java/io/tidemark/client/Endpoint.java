package io.tidemark.client;

/** A server address as users write it: {@code host:port}, {@code http://…} or {@code https://…}. */
record Endpoint(String target, boolean tls) {
  static Endpoint parse(String endpoint) {
    String text = endpoint.trim();
    boolean tls = false;
    if (text.startsWith("https://")) {
      tls = true;
      text = text.substring("https://".length());
    } else if (text.startsWith("http://")) {
      text = text.substring("http://".length());
    }
    while (text.endsWith("/")) {
      text = text.substring(0, text.length() - 1);
    }
    int colon = text.lastIndexOf(':');
    if (text.isEmpty() || text.contains("/") || colon <= 0 || colon == text.length() - 1) {
      throw new IllegalArgumentException(
          "endpoint: expected host:port, http://host:port or https://host:port, got '" + endpoint + "'");
    }
    try {
      int port = Integer.parseInt(text.substring(colon + 1));
      if (port < 1 || port > 65535) {
        throw new NumberFormatException();
      }
    } catch (NumberFormatException notAPort) {
      throw new IllegalArgumentException(
          "endpoint: the port of '" + endpoint + "' is not a number in 1-65535", notAPort);
    }
    return new Endpoint(text, tls);
  }
}
