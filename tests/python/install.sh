#!/usr/bin/env bash
# Installs what the Python client test needs from Debian's packages: protoc,
# the well-known types it imports (google/protobuf/*.proto, in
# libprotobuf-dev: apt installs them only as a recommendation of protoc, which
# a machine set up without recommends lacks), the gRPC plugins
# (grpc_python_plugin among them) and the gRPC and protobuf runtimes for
# /usr/bin/python3. Does nothing, quickly, when all of them are
# installed already; otherwise runs apt-get update once, then apt-get install.
# Needs root, or sudo.
set -euo pipefail

PKGS=(protobuf-compiler protobuf-compiler-grpc libprotobuf-dev python3-grpcio python3-protobuf)

missing=()
for p in "${PKGS[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "install.sh: ${missing[*]} missing, and installing them needs root or sudo" >&2
    exit 1
  fi
  sudo=(sudo)
fi
echo "install.sh: apt-get install ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
