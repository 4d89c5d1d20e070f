"""Which flushes make the guest's nr_tlb_local_flush_* in `demote-anon`: the experiment behind
docs/oracle.md's section on tierlab's kernel (needs that kernel built: tierlab/oracle/kernel.py).

Runs the demote-anon workload on tierlab-6.12 with two trace events on for the workload: a kprobe
on flush_tlb_func() recording the flush asked for (flush_tlb_info.end; TLB_FLUSH_ALL is a whole
flush) and the tlb:tlb_flush tracepoint at its end (pages flushed, -1 for the whole TLB, 0 for none;
"local mm shootdown" for an mm's own flush, "local shootdown" for the unmap batch, which has no mm).
An awk in the guest pairs them per CPU and prints one line per class: who flushed (the workload
program or another process), which kind, what was asked -> what was done, count, pages. Tracing
slows the guest, so the kswapd/direct split is not that of an untraced run.

    PYTHONPATH=. python experiments/oracle_tlb_trace.py [RUNS]
"""
from __future__ import annotations

import sys

from tierlab.oracle import guest, run_oracle

T = "/sys/kernel/debug/tracing"
# struct flush_tlb_info: mm at 0, start 8, end 16, new_tlb_gen 24, initiating_cpu 32 (6.12 x86)
SETUP = f"""echo 8192 > {T}/buffer_size_kb
echo 'p:tierlab/ftf flush_tlb_func end=+16(%di):x64 icpu=+32(%di):u32' > {T}/kprobe_events || echo '@@tierlab error kprobe'
echo 1 > {T}/events/tierlab/ftf/enable
echo 1 > {T}/events/tlb/tlb_flush/enable
"""
AWK = r"""
{ if (!match($0, /\[[0-9]+\]/)) next; c = substr($0, RSTART, RLENGTH) }
/ ftf: / { for (i = 1; i <= NF; i++) if ($i ~ /^end=/) e[c] = substr($i, 5); next }
/ tlb_flush: / && /local (mm )?shootdown/ {
  for (i = 1; i <= NF; i++) if ($i ~ /^pages:/) p = substr($i, 7)
  k = ($1 ~ /^tierlab-/ ? "workload" : "other") " " ($0 ~ /local mm shootdown/ ? "mm" : "batch") " " \
      (e[c] == "0xffffffffffffffff" ? "all" : "range") "->" (p == "-1" ? "all" : (p == "0" ? "none" : "pages"))
  n[k]++; if (p + 0 > 0) pg[k] += p }
END { for (k in n) print "@@tierlab tlbclass", k, n[k], pg[k] + 0 }
"""
SUMMARY = f"""echo 0 > {T}/tracing_on
grep -h overrun {T}/per_cpu/cpu*/stats | sed 's/^/@@tierlab trace /'
awk '{AWK}' {T}/trace
"""
COUNTERS = ("pgdemote_kswapd", "pgdemote_direct", "nr_tlb_remote_flush", "nr_tlb_remote_flush_received",
            "nr_tlb_local_flush_all", "nr_tlb_local_flush_one")


def traced_script(orig):
    def script(*a, **kw):
        return orig(*a, **kw).replace("dump before\n", SETUP + "dump before\n", 1) + SUMMARY
    return script


def main(runs: int) -> None:
    guest.run_script = traced_script(guest.run_script)
    for i in range(runs):
        r = run_oracle("random-read", {"target": "anon", "file_size": "1536MiB", "policy": "bind:0",
                                       "accesses": 300_000}, {"demotion_enabled": 1}, scale=4, guest_kernel="tierlab-6.12")
        print(f"run {i + 1}: " + ", ".join(f"{k} {int(r.guest.counters[k]):,}" for k in COUNTERS))
        for ln in sorted(ln.strip() for ln in r.transcript.splitlines() if "@@tierlab tlbclass" in ln
                         or "@@tierlab trace" in ln or "@@tierlab error" in ln):
            print("   ", ln.removeprefix("@@tierlab "))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
