#!/usr/bin/env bash
# Set up mdtheory on a fresh Debian machine: system libraries for pycddlib (exact GMP arithmetic),
# a virtual environment in .venv at the repository root, and the package with its test extras.
# Idempotent: re-running it only installs what is missing (then it takes seconds).
# Each step says what it does and how long it usually takes (two cores; longer on a busy machine);
# the quiet steps print the time spent every 20 s (SETUP_TICK).
set -euo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS

step() {  # step N TEXT
    printf 'setup [%s/5] %s\n' "$1" "$2"
}

ticking() {  # ticking CMD...: run CMD, printing "still working, S s" every SETUP_TICK (20) s
    local tick=${SETUP_TICK:-20}
    "$@" &
    local pid=$! begin=$SECONDS
    local next=$tick
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        kill -0 "$pid" 2>/dev/null || break
        if (( SECONDS - begin >= next )); then
            printf '  ... still working, %d s\n' $(( SECONDS - begin ))
            next=$(( next + tick ))
        fi
    done
    wait "$pid"
}

need_apt=0
for pkg in libcdd-dev libgmp-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt=1
done
if [ "$need_apt" = 1 ]; then
    step 1 "system libraries libcdd-dev and libgmp-dev with apt-get (usually under a minute)"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q libcdd-dev libgmp-dev
else
    step 1 "system libraries libcdd-dev and libgmp-dev: already installed"
fi

step 2 "virtual environment .venv (a few seconds)"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip

step 3 "mdtheory and its extras with pip: numpy, scipy, HiGHS, numba, torch (CPU), transformers ...
  (usually about 2.5 min on a fresh machine)"
# constraints.txt pins torch to the CPU wheel (an unpinned torch pulls a multi-GB CUDA build)
ticking .venv/bin/python -m pip install -q -c scripts/constraints.txt -e ".[${MDTHEORY_EXTRAS:-test,torch,lm,hf}]"

step 4 "the pretrained char-LSTM's weights and vocabulary, textgenrnn 2.0.0 (a few seconds)"
# (mdtheory.language.lm); --no-deps keeps TensorFlow out
ticking .venv/bin/python -m pip install -q --no-deps textgenrnn==2.0.0

step 5 "compiling the package's bytecode and every numba kernel into numba's cache, so that the first
  command runs as fast as the later ones (usually 1 to 3 min; one line per warm-up command)"
# bytecode written even where PYTHONDONTWRITEBYTECODE is set (each start would compile the package)
.venv/bin/python -m compileall -q mdtheory
.venv/bin/python -m mdtheory.cli.warmup --progress

printf 'setup done in %d min %d s\n' $(( (SECONDS - START) / 60 )) $(( (SECONDS - START) % 60 ))
