"""Where the guest's TLB flushes come from in `promote-xsbench` (docs/oracle.md, "XSBench-shaped
promotion on tierlab's kernel"): needs tierlab's kernel built (tierlab/oracle/kernel.py).

Runs the xsbench workload of the suite entry (shorter: `particles` below) on tierlab-6.12, mainline,
with kprobes on
- migrate_misplaced_folio(): a hint fault's migration (a promotion attempt), by task;
- change_prot_numa(): the NUMA scanner making one VMA range PROT_NONE (then tlb_finish_mmu
  flushes it if any PTE changed), by task;
- flush_tlb_mm_range(): an mm's own flush (the scanner's tlb_finish_mmu, ptep_clear_flush's
  flush_tlb_page, munmap), by task, classed by its range: `mm` (start 0, end TLB_FLUSH_ALL:
  flush_tlb_mm(), i.e. flush_tlb_batched_pending() or an exit), `all` (another whole flush),
  `range_le33` (at most tlb_single_page_flush_ceiling pages: the sender counts
  nr_tlb_local_flush_one per page; their pages are summed) and `range_gt33` (flushed whole);
- arch_tlbbatch_flush(): an unmap batch's flush (try_to_unmap_flush with flush_required: reclaim's
  and migrate_pages_batch's deferred flushes), by task;
and the tlb:tlb_flush tracepoint (what each CPU then did: its reason and pages, -1 whole). An awk in
the guest counts the events per class: event, who ran it (the workload's threads `workload`,
`kswapd`, or `other`), and for flushes what was asked or done. The counters are printed beside.
Tracing slows the guest, so its timing (scanner passes, kswapd's pace) is not an untraced run's.

    PYTHONPATH=. python experiments/oracle_xsbench_flush_trace.py [RUNS] [PARTICLES]
"""
from __future__ import annotations

import sys

from tierlab.oracle import guest, run_oracle

T = "/sys/kernel/debug/tracing"
SETUP = f"""echo 16384 > {T}/buffer_size_kb
echo 'p:tierlab/mmf migrate_misplaced_folio' > {T}/kprobe_events || echo '@@tierlab error kprobe mmf'
echo 'p:tierlab/cpn change_prot_numa' >> {T}/kprobe_events || echo '@@tierlab error kprobe cpn'
echo 'p:tierlab/fmr flush_tlb_mm_range start=%si:x64 end=%dx:x64' >> {T}/kprobe_events || echo '@@tierlab error kprobe fmr'
echo 'p:tierlab/bf arch_tlbbatch_flush' >> {T}/kprobe_events || echo '@@tierlab error kprobe bf'
for e in mmf cpn fmr bf; do echo 1 > {T}/events/tierlab/$e/enable; done
echo 1 > {T}/events/tlb/tlb_flush/enable
"""
AWK = r"""
function hex(x,   v, i, c) { v = 0; x = tolower(substr(x, 3)); if (length(x) > 12) x = substr(x, length(x) - 11)
  for (i = 1; i <= length(x); i++) { c = index("0123456789abcdef", substr(x, i, 1)) - 1; v = v * 16 + c }
  return v }
/^ *#/ { next }
{ who = ($1 ~ /^tierlab-/ ? "workload" : ($1 ~ /^kswapd/ ? "kswapd" : "other")) }
/ mmf: / { n["migrate_misplaced_folio " who]++; next }
/ cpn: / { n["change_prot_numa " who]++; next }
/ fmr: / { e = ""; s = ""
  for (i = 1; i <= NF; i++) { if ($i ~ /^end=/) e = substr($i, 5); if ($i ~ /^start=/) s = substr($i, 7) }
  if (e == "0xffffffffffffffff") c = (hex(s) == 0 ? "mm" : "all")
  else { np = (hex(e) - hex(s)) / 4096; c = (np <= 33 ? "range_le33" : "range_gt33"); if (np <= 33) pg[who] += np }
  n["flush_tlb_mm_range " who " " c]++; next }
/ bf: / { n["arch_tlbbatch_flush " who]++; next }
/ tlb_flush: / { p = ""; r = ""
  for (i = 1; i <= NF; i++) if ($i ~ /^pages:/) p = substr($i, 7)
  if (match($0, /reason:[a-z ]+/)) r = substr($0, RSTART + 7, RLENGTH - 7)
  gsub(/ +$/, "", r); gsub(/ /, "_", r)
  n["tlb_flush " who " " r " " (p == "-1" ? "all" : (p == "0" ? "none" : "pages"))]++ }
END { for (k in n) print "@@tierlab flushclass", k, n[k]
  for (w in pg) print "@@tierlab flushclass flush_tlb_mm_range_le33_pages", w, pg[w] }
"""
SUMMARY = f"""echo 0 > {T}/tracing_on
grep -h overrun {T}/per_cpu/cpu*/stats | sed 's/^/@@tierlab trace /'
awk '{AWK}' {T}/trace
"""
COUNTERS = ("numa_pte_updates", "numa_hint_faults", "pgpromote_candidate", "numa_pages_migrated", "pgpromote_success",
            "pgdemote_kswapd", "pgdemote_direct", "nr_tlb_remote_flush", "nr_tlb_remote_flush_received",
            "nr_tlb_local_flush_all", "nr_tlb_local_flush_one")


def traced_script(orig):
    def script(*a, **kw):
        return orig(*a, **kw).replace("dump before\n", SETUP + "dump before\n", 1) + SUMMARY
    return script


def main(runs: int, particles: int) -> None:
    guest.run_script = traced_script(guest.run_script)
    for i in range(runs):
        r = run_oracle("xsbench", {"gridpoints": 3072, "particles": particles, "threads": 2},
                       {"demotion_enabled": 1, "numa_balancing": 2}, scale=4, guest_kernel="tierlab-6.12")
        print(f"run {i + 1} ({r.guest.run_time_s:.1f} s): "
              + ", ".join(f"{k} {int(r.guest.counters[k]):,}" for k in COUNTERS))
        print("    model: " + ", ".join(f"{k} {int(r.model.counters[k]):,}" for k in COUNTERS))
        for ln in sorted(ln.strip() for ln in r.transcript.splitlines() if "@@tierlab flushclass" in ln
                         or "@@tierlab trace" in ln or "@@tierlab error" in ln):
            print("   ", ln.removeprefix("@@tierlab "))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1, int(sys.argv[2]) if len(sys.argv) > 2 else 40_000)
