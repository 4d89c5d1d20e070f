#!/bin/sh
# Records the runs behind data/anon/*.csv (see data/anon/README.md). Usage: record.sh OUTDIR KIND
#   KIND = cc1      : gcc -O2 -c of libpng-dev's examples/pngtest.c (Debian bookworm libpng-dev 1.6.39-2+deb12u4)
#          kbuild   : make -j8 mm/ of linux-source-6.1 (Debian 6.1.192-2, `apt-get download linux-source-6.1`,
#                     defconfig, after `make prepare`); run from the kernel tree
#          node     : node v20 running data/anon/jsbench.js (acorn 8, terser 5, typescript 5.6 from npm)
# Each run is recorded twice at once: strace -f -ttt (mmap/munmap/brk/mremap, fork/exec/exit, with
# timestamps and pids) and perf's page-fault software event with the faulting address (-d), one
# sample per fault (-c 1), inherited by every child, stamped with CLOCK_REALTIME (-k realtime) like
# strace -ttt so the two logs merge by time; `perf script` turns the samples into text.
set -eu
out=$1; kind=$2
case $kind in
  cc1)    cmd="gcc -O2 -c /usr/share/doc/libpng-dev/examples/pngtest.c -o $out/pngtest.o" ;;
  kbuild) cmd="make -j8 mm/" ;;
  node)   cmd="node $(dirname "$0")/jsbench.js" ;;
  *) echo "record.sh: KIND must be cc1, kbuild or node" >&2; exit 2 ;;
esac
perf record -q -k realtime -e page-faults -c 1 -d -o "$out/$kind.perf" -- \
  strace -f -ttt -e trace=memory,process -e signal=none -o "$out/$kind.strace" $cmd > "$out/$kind.stdout"
perf script -i "$out/$kind.perf" -F pid,tid,time,addr > "$out/$kind.faults"
