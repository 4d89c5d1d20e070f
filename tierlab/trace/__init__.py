"""Page-granular access traces: record real programs under valgrind, read, convert, summarise,
and run them through exact cache policies.

A trace is a sequence of records (task, page, op, count): `count` consecutive accesses by `task` to
virtual page `page` (address >> 12) of kind `op` (0 read, 1 write); see `format`. Modules:
`readers` (five input formats, read chunk by chunk), `writers` (.npz, CSV, oracleGeneral;
`convert_trace`), `lackey` (valgrind lackey text), `recorder` (`record_trace`), `analysis`
(`trace_info`, stack distances), `cachesim` (LRU/FIFO/CLOCK miss ratios, LRU miss-ratio curve),
`cli` (the `trace` and `cachesim` commands). This package re-exports the public names.
"""
from .analysis import PageIds, StackDistances, format_trace_info, trace_info
from .cachesim import cachesim, lru_mrc
from .cli import add_cachesim_command, add_trace_commands, main_cachesim, main_trace
from .format import CHUNK_RECORDS, COUNT_MAX, FORMAT_VERSION, ORACLE_GENERAL_DTYPE, Trace
from .lackey import parse_lackey
from .readers import TraceFile, load_trace, open_trace
from .recorder import INSTALL_HINT, record_trace
from .writers import (
    convert_trace, fold_trace, save_trace, save_trace_chunks, save_trace_csv, save_trace_oracle_general,
    write_oracle_general,
)

__all__ = [
    "CHUNK_RECORDS", "COUNT_MAX", "FORMAT_VERSION", "INSTALL_HINT", "ORACLE_GENERAL_DTYPE", "PageIds",
    "StackDistances", "Trace", "TraceFile", "add_cachesim_command", "add_trace_commands", "cachesim",
    "convert_trace", "fold_trace", "format_trace_info", "load_trace", "lru_mrc", "main_cachesim",
    "main_trace", "open_trace", "parse_lackey", "record_trace", "save_trace", "save_trace_chunks",
    "save_trace_csv", "save_trace_oracle_general", "trace_info", "write_oracle_general",
]
