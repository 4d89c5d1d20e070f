#!/bin/sh
# Record the page-cache requests of SQLite serving a YCSB workload-C run (see README.md).
#   sh record.sh OUTDIR          -> OUTDIR/ycsb.db, OUTDIR/run.sql, OUTDIR/pread.strace
set -eu
out=${1:?usage: record.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
mkdir -p "$out"
rm -f "$out/ycsb.db"
"$py" "$here/ycsb_sqlite.py" load "$out/ycsb.db"
"$py" "$here/ycsb_sqlite.py" run "$out/run.sql"
sync
# only the database's file descriptor matters; -y names each fd's path, -s 0 drops the data
strace -f -y -s 0 -e trace=pread64 -e signal=none -o "$out/pread.strace" \
    sqlite3 "$out/ycsb.db" < "$out/run.sql" > /dev/null
