/* tierlab's recorded anonymous-memory workloads (`anon-build`, `anon-browser`; tierlab/workloads/
 * anon_build.py, anon_browser.py) in a real kernel: the VMA calls and first touches of every
 * replayed process, one process after another, from the op file the host wrote (oracle/programs.py,
 * anon_ops()).
 *
 * Each model region (a slot a VMA of some process occupies) gets its own address range: region r
 * starts at BASE + (start[r] + 512 r) pages, so a page's alignment within 2 MiB is the model's
 * (the folio order choice depends on it) and a 2 MiB gap keeps every region its own VMA (the
 * kernel would merge adjacent anonymous mappings; the model's VMA is the region). The calls:
 * mmap (MAP_FIXED_NOREPLACE), a brk-like resize (the first one maps; growing is mremap in place,
 * as brk expands the heap VMA; shrinking unmaps the tail), munmap, and a store to each touched
 * page (one byte: a write fault on an untouched page). A process's exit is the munmap of its
 * live regions (written into the file by the host). Per-process VMA state is all the anon fault
 * path reads, so one process replaying them in turn decides the same folio orders as the model's
 * concurrent tasks while memory is plentiful.
 *
 * File: "TLANON01", int64 R, int64 start[R + 1] (page ids), then records of four int64
 * (kind, region, a, b): 0 store pages [a, a + b) of the region; 1 mmap its first b pages;
 * 2 munmap it; 3 resize it to b pages.
 *
 * args: ops=
 */
#include "common.h"

#define BASE 0x100000000000ULL
#define GAP 512

static long long nr_regions, *start, *len;

static char *addr_of(long long r, long long page)
{
    return (char *)(BASE + (unsigned long long)(start[r] + GAP * r + page) * PAGE);
}

static void map_first(long long r, long long n)
{
    if (n <= 0)
        return;
    void *a = mmap(addr_of(r, 0), n * PAGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (a != addr_of(r, 0))
        die("mmap region");
    len[r] = n;
}

static void unmap_from(long long r, long long from)
{
    if (len[r] > from && munmap(addr_of(r, from), (len[r] - from) * PAGE) != 0)
        die("munmap");
    if (len[r] > from)
        len[r] = from;
}

static void resize(long long r, long long n)
{
    if (len[r] == 0)
        map_first(r, n);
    else if (n > len[r]) {
        if (mremap(addr_of(r, 0), len[r] * PAGE, n * PAGE, 0) != addr_of(r, 0))
            die("mremap grow");
        len[r] = n;
    } else
        unmap_from(r, n);
}

int main(int argc, char **argv)
{
    nargs = argc - 1;
    args = argv + 1;
    const char *path = arg_str("ops", NULL);
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path);
    char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "TLANON01", 8) || fread(&nr_regions, 8, 1, f) != 1)
        die("op file header");
    start = malloc((nr_regions + 1) * sizeof *start);
    len = calloc(nr_regions, sizeof *len);
    if (!start || !len || fread(start, 8, nr_regions + 1, f) != (size_t)(nr_regions + 1))
        die("op file regions");
    long long rec[4], stores = 0;
    dprintf(1, "@@tierlab start %lld\n", now_ns());
    while (fread(rec, 8, 4, f) == 4) {
        long long kind = rec[0], r = rec[1], a = rec[2], b = rec[3];
        if (r < 0 || r >= nr_regions)
            die("op file region index");
        switch (kind) {
        case 0:
            for (long long p = a; p < a + b; p++)
                *(volatile char *)addr_of(r, p) = 1;
            stores += b;
            break;
        case 1:
            map_first(r, b);
            break;
        case 2:
            unmap_from(r, 0);
            break;
        case 3:
            resize(r, b);
            break;
        default:
            die("op file record kind");
        }
    }
    fclose(f);
    dprintf(1, "@@tierlab done %lld %lld\n", now_ns(), stores);
    raise(SIGSTOP);
    return 0;
}
