#!/usr/bin/env bash
# Installs Debian's chromium for the console's browser test
# (tests/console), which drives it headless. Does nothing, quickly, when a
# chromium binary is already there; otherwise runs apt-get update once, then
# apt-get install. Needs root, or sudo; without either it says so and exits
# 0, and the test skips itself.
set -euo pipefail

for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null; then
    exit 0
  fi
done

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "install.sh: no chromium, and installing it needs root or sudo; the console's browser test will skip" >&2
    exit 0
  fi
  sudo=(sudo)
fi
if ! command -v apt-get >/dev/null; then
  echo "install.sh: no chromium and no apt-get; the console's browser test will skip" >&2
  exit 0
fi
echo "install.sh: apt-get install chromium"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
