#!/bin/sh
# deps.sh - installs the Debian 12 packages attnc needs to build and test,
# when they are missing. Needs root (or sudo) only when something is missing.
set -e
# libcairo2-dev draws the pictures (plot/), with fontconfig choosing the
# sans-serif face among the fonts of fonts-dejavu-core.
pkgs="cmake make gcc pkg-config check llvm-19-dev libopenblas-dev clang-19 libclang-rt-19-dev libopenmpi-dev openmpi-bin iproute2 libcairo2-dev fontconfig fonts-dejavu-core strace clang-format-14"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "attnc: installing:$missing" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
