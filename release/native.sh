# Sourced by release/dist.sh and ./dev: the one optimised build of what is
# shipped as a native binary, the CLI and the Node addon, in one cargo
# invocation (they share every dependency's build).
#
# Linked with zig (cargo-zigbuild, both from PyPI) against glibc 2.17, as the
# Python wheel is (manylinux2014): the binaries run on every Linux x86-64
# with glibc 2.17 or later (RHEL/CentOS 7, Debian 8, Ubuntu 14.04 on), not
# only on the build machine's glibc. Profile `dist`: release, no debug info,
# stripped (Cargo.toml).

# The rust triple the binaries are built for, and zig's glibc floor.
NATIVE_TRIPLE="x86_64-unknown-linux-gnu"
NATIVE_GLIBC="2.17"
# Pinned: a release is built the same way every time.
ZIGBUILD_VERSION="0.24.1"
ZIG_VERSION="0.15.2"

# The tools' virtualenv (cargo-zigbuild, ziglang), made once.
release_venv() {
  local venv="$PWD/target/release-venv"
  if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
  if [ ! -x "$venv/bin/cargo-zigbuild" ] || ! "$venv/bin/python" -c 'import ziglang' 2>/dev/null; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "cargo-zigbuild==$ZIGBUILD_VERSION" "ziglang==$ZIG_VERSION" >&2
  fi
  echo "$venv"
}

# Builds the CLI and the Node addon; prints the folder they are in
# (latchkey, liblatchkey_node.so).
build_native() {
  local venv
  venv="$(release_venv)"
  if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "release: the native build is for Linux x86-64; on $(uname -s)-$(uname -m) see docs/releasing.md" >&2
    return 1
  fi
  PATH="$venv/bin:$PATH" cargo zigbuild --quiet --locked --profile dist \
    --target "$NATIVE_TRIPLE.$NATIVE_GLIBC" -p latchkey-cli -p latchkey-node >&2
  echo "$PWD/target/$NATIVE_TRIPLE/dist"
}

# The newest glibc symbol version FILE links against (e.g. 2.17).
glibc_needed() {
  objdump -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1
}
