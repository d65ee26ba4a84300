#!/usr/bin/env bash
# Installs the Debian packages tern needs to build and test, if any are missing.
# Safe to run repeatedly: it only calls apt-get when something is absent.
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config git libgtest-dev libgmock-dev libicu-dev liblz4-dev libzstd-dev nlohmann-json3-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
