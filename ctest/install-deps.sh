#!/bin/sh
# Installs what a fresh Debian 12 machine with only Go lacks for `just ci`: clang-19,
# lld-19, llvm-19 (llvm-objdump-19, llvm-readobj-19), cmake, ninja-build and libamdhip64-5
# from Debian, and `just` from the npm package rust-just (npm from Debian if missing).
# Installs nothing that is already present; uses sudo only when not root.
set -eu

# Go is the one thing this script does not install: say so before installing anything.
if ! command -v go >/dev/null 2>&1; then
  echo "install-deps: go is not on PATH; install Go 1.26 (https://go.dev/dl/) first" >&2
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

missing=""
for pair in clang-19:clang-19 ld.lld-19:lld-19 llvm-objdump-19:llvm-19 llvm-readobj-19:llvm-19 cmake:cmake ninja:ninja-build; do
  if ! command -v "${pair%%:*}" >/dev/null 2>&1; then
    case " $missing " in *" ${pair#*:} "*) ;; *) missing="$missing ${pair#*:}" ;; esac
  fi
done
# Debian's HIP runtime (no GPU needed): CI resolves the HIP binding's whole symbol table
# against the real library and checks that "no device" is reported cleanly.
if ! ls /usr/lib/*/libamdhip64.so.5 >/dev/null 2>&1; then
  missing="$missing libamdhip64-5"
fi
if ! command -v just >/dev/null 2>&1 && ! command -v npm >/dev/null 2>&1; then
  missing="$missing npm"
fi
if [ -n "$missing" ]; then
  echo "install-deps: apt-get install$missing"
  $sudo apt-get update
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi
if ! command -v just >/dev/null 2>&1; then
  echo "install-deps: npm install -g rust-just"
  $sudo npm install -g rust-just
fi
# rust-just's `just` is a Node launcher that wants a newer Node than Debian 12's; the package
# also ships the static binary it launches. Use that binary directly when the launcher fails.
if ! just --version >/dev/null 2>&1; then
  bin="$(ls "$(npm root -g)"/rust-just/node_modules/rust-just-*/bin/just 2>/dev/null | head -n 1)"
  if [ -z "$bin" ]; then
    echo "install-deps: just does not run and rust-just's binary was not found under $(npm root -g)" >&2
    exit 1
  fi
  echo "install-deps: linking /usr/local/bin/just to $bin"
  $sudo ln -sf "$bin" /usr/local/bin/just
  hash -r 2>/dev/null || true
fi
just --version
