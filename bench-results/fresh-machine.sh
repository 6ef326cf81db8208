#!/bin/bash
# make test on a machine that never had chromium: a fresh clone, a fresh HOME (no caches), and chromium
# hidden in a private mount namespace (/usr/bin/chromium: a non-executable empty file; /usr/lib/chromium: empty)
set -e
d=$(mktemp -d)
git clone -q "${REPO:-.}" $d/cc
mkdir -p $d/home
touch $d/nochrome
cat > $d/inner.sh <<INNER
set -e
mount --bind $d/nochrome /usr/bin/chromium
mount -t tmpfs none /usr/lib/chromium
export HOME=$d/home
unset ESOPT_CACHE
python3 -c "import shutil; print('chromium on PATH:', shutil.which('chromium'))"
cd $d/cc && /usr/bin/time -f "make test wall %e s" make test
INNER
unshare -m bash $d/inner.sh
