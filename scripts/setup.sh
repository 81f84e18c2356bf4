#!/usr/bin/env bash
# Set up mdtheory on a fresh Debian machine: system libraries for pycddlib (exact GMP arithmetic),
# a virtual environment in .venv at the repository root, and the package with its test extras.
# Idempotent: re-running it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=0
for pkg in libcdd-dev libgmp-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt=1
done
if [ "$need_apt" = 1 ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q libcdd-dev libgmp-dev
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# constraints.txt pins torch to the CPU wheel (an unpinned torch pulls a multi-GB CUDA build)
.venv/bin/python -m pip install -q -c scripts/constraints.txt -e ".[${MDTHEORY_EXTRAS:-test,torch,lm,hf}]"
# the pretrained char-LSTM's weights and vocabulary (mdtheory.language.lm); --no-deps keeps TensorFlow out
.venv/bin/python -m pip install -q --no-deps textgenrnn==2.0.0
