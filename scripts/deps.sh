#!/usr/bin/env bash
# Installs the Debian packages tern needs to build and test, if any are missing.
# Safe to run repeatedly: it only calls apt-get when something is absent.
set -euo pipefail

# The server's HTTP layer is Boost.Asio/Beast (header-only). Its tests use
# Prometheus' promtool, Debian's Chromium (driven by playwright-core) and Node.js.
packages=(build-essential cmake ninja-build pkg-config git libgtest-dev libgmock-dev libicu-dev liblz4-dev libzstd-dev
          nlohmann-json3-dev libboost-dev prometheus chromium fonts-dejavu-core python3 python3-jinja2)
command -v node >/dev/null 2>&1 || packages+=(nodejs npm)

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

# Test tooling from npm (the official openai client, playwright-core), pinned by
# tests/server/package-lock.json; reinstalled only when the lock file changes.
root=$(cd "$(dirname "$0")/.." && pwd)
lock="$root/tests/server/package-lock.json"
stamp="$root/tests/server/node_modules/.tern-lock"
if [ -f "$lock" ] && ! cmp -s "$lock" "$stamp" 2>/dev/null; then
  echo "deps: npm ci in tests/server" >&2
  (cd "$root/tests/server" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$lock" "$stamp"
fi
