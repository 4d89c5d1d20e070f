"""What MIGRC does in the guest in `promote-xsbench` (docs/oracle.md, "MIGRC on tierlab's kernel"):
needs the MIGRC kernel built (tierlab/oracle/kernel.py, patch set `migrc`).

Runs the xsbench workload of the suite entry (shorter: `particles` below) on tierlab-6.12+migrc
with kprobes counted by kprobe_profile's hit count (a filter that never matches keeps the ring
buffer empty):
- __folio_put_small_nopcp(): a source folio MIGRC held, freed at its last reference (one per
  deferred folio whose release dropped the last reference; 6/8);
- migrc_flush_free_folios(): a flush-and-free of everything MIGRC holds (a write fault finding a
  page in do_wp_page(), a zone failing its watermark with pending folios, the slow path's pause,
  or a batch that could not add its folios);
- arch_tlbbatch_flush(): an unmap batch's flush (try_to_unmap_flush with flush_required).
It also prints the guest's L1TF state (/sys/devices/system/cpu/vulnerabilities/l1tf), which
decides whether x86-64 keeps the young and dirty bits in migration entries
(swap_migration_ad_supported; docs/oracle.md), and the counters, with the model's (migrc=1) beside.

    PYTHONPATH=. python experiments/oracle_migrc_trace.py [--runs N] [--particles N]
        [--kernel tierlab-6.12+migrc | tierlab-6.12] [--cpu max | Nehalem | ...]

`--cpu` replaces QEMU's `-cpu max` (an AMD-vendor CPU under TCG, not affected by L1TF, so
migration entries keep the A/D bits) with another model: an Intel one QEMU does not mark
RDCL_NO (e.g. Nehalem) is affected by L1TF, and with its 40 physical address bits the swap-offset
limit of the PTE-inversion mitigation leaves no room for the A/D bits (swap_migration_ad_supported
false), as seed 004's guest had to have it for its table. The model is run again with
migration_entry_ad=0 beside its default run (on the plain kernel too, where the knob changes
nothing MIGRC does, only the PTE's dirty bit after a migration). On the plain kernel the
MIGRC-only probes are not set.
"""
from __future__ import annotations

import argparse

from tierlab import api
from tierlab.oracle import guest, run_oracle

T = "/sys/kernel/debug/tracing"
PROBES = (("held_freed", "__folio_put_small_nopcp"), ("flush_free", "migrc_flush_free_folios"),
          ("batch_flush", "arch_tlbbatch_flush"))
SETUP = "".join(
    f"echo 'p:tierlab/{n} {f}' >> {T}/kprobe_events || echo '@@tierlab error kprobe {n}'\n"
    f"echo 'common_pid == -1' > {T}/events/tierlab/{n}/filter\n"
    f"echo 1 > {T}/events/tierlab/{n}/enable\n" for n, f in PROBES)
SETUP = ("echo \"@@tierlab l1tf $(cat /sys/devices/system/cpu/vulnerabilities/l1tf)\"\n"
         "echo \"@@tierlab cpu $(grep -m1 'vendor_id' /proc/cpuinfo) $(grep -m1 'model name' /proc/cpuinfo)\"\n"
         + SETUP + f"sed 's/^/@@tierlab probes before /' {T}/kprobe_profile\n")
# one more probe on the same function that records: the folio's mapping (struct folio: flags, lru,
# then mapping at byte 24; bit 0 set is an anonymous folio) and who dropped the last reference
SETUP += (f"echo 'p:tierlab/held_map __folio_put_small_nopcp mapping=+24(%di):x64' >> {T}/kprobe_events "
          f"|| echo '@@tierlab error kprobe held_map'\necho 1 > {T}/events/tierlab/held_map/enable\n")
AWK = r"""/ held_map: / { m = ""; for (i = 1; i <= NF; i++) if ($i ~ /^mapping=/) m = substr($i, 9)
  kind = (m == "0x0" ? "none" : (substr(m, length(m)) ~ /[13579bdf]/ ? "anon" : "file"))
  split($1, who, "-"); n[who[1] " " kind]++ }
END { for (k in n) print "@@tierlab held", k, n[k] }"""
SUMMARY = (f"sed 's/^/@@tierlab probes after /' {T}/kprobe_profile\n"
           f"echo 0 > {T}/tracing_on\nawk '{AWK}' {T}/trace\n")
COUNTERS = ("pgpromote_success", "pgdemote_kswapd", "pgdemote_direct", "pgmigrate_success", "nr_tlb_remote_flush",
            "nr_tlb_remote_flush_received", "nr_tlb_local_flush_all", "nr_tlb_local_flush_one")


def traced_script(orig, probes: bool):
    setup = SETUP if probes else SETUP.split("\n", 2)[0] + "\n" + SETUP.split("\n", 2)[1] + "\n"
    summary = SUMMARY if probes else ""

    def script(*a, **kw):
        return orig(*a, **kw).replace("dump before\n", setup + "dump before\n", 1) + summary
    return script


def with_cpu(orig, model: str):
    def argv(*a, **kw):
        out = orig(*a, **kw)
        out[out.index("-cpu") + 1] = model
        return out
    return argv


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--particles", type=int, default=400_000)
    ap.add_argument("--kernel", default="tierlab-6.12+migrc")
    ap.add_argument("--cpu", default="max")
    a = ap.parse_args(argv)
    guest.run_script = traced_script(guest.run_script, a.kernel.endswith("+migrc"))
    if a.cpu != "max":
        guest.qemu_argv = with_cpu(guest.qemu_argv, a.cpu)
    for i in range(a.runs):
        r = run_oracle("xsbench", {"gridpoints": 3072, "particles": a.particles, "threads": 2},
                       {"demotion_enabled": 1, "numa_balancing": 2}, scale=4, guest_kernel=a.kernel)
        print(f"run {i + 1} on {a.kernel}, -cpu {a.cpu} ({r.guest.run_time_s:.1f} s): "
              + ", ".join(f"{k} {int(r.guest.counters[k]):,}" for k in COUNTERS))
        print(f"    model {r.model.config['knobs']}: " + ", ".join(f"{k} {int(r.model.counters[k]):,}" for k in COUNTERS))
        noad = api.build(dict(r.model.config, knobs=dict(r.model.config["knobs"], migration_entry_ad=0))).run().result()
        print("    model, migration_entry_ad=0: " + ", ".join(f"{k} {int(noad.counters[k]):,}" for k in COUNTERS))
        for ln in r.transcript.splitlines():
            if any(x in ln for x in ("@@tierlab l1tf", "@@tierlab cpu", "@@tierlab probes", "@@tierlab held",
                                     "@@tierlab error")):
                print("   ", ln.strip().removeprefix("@@tierlab "))


if __name__ == "__main__":
    main()
