/* tierlab's `hot-chunks` workload in a real kernel (tierlab/workloads/hot_chunks.py): seed 002's
 * microbenchmark.
 *
 * One thread maps `total` bytes of anonymous memory (mbind to `policy`, which may carry
 * MPOL_F_NUMA_BALANCING as "bind|numa_balancing:1,2"), writes every page once and MARKs; then
 * `visits` times it picks a chunk of `chunk` bytes at random (with replacement), draws `accesses`
 * random pages of it once (0: as many as the chunk has pages) and walks that set `iterations`
 * times, one load per page, then MARKs. Like the model's OP_LOAD, an access reads one cache line
 * (the page's first), not a whole page. cpunodebind= pins the thread to those nodes' CPUs (from
 * /sys/devices/system/node/nodeN/cpulist), as `numactl --cpunodebind` does.
 *
 * args: total= chunk= visits= iterations= accesses= policy= cpunodebind= seed=
 */
#include "common.h"

static long long pages, chunk_pages, nr_chunks, visits, iterations, pass;
static char *region;
static uint64_t seed;

static void *task_main(void *arg)
{
    (void)arg;
    uint64_t s = seed * 0x100000001b3ULL + 1;
    long long *set = malloc(pass * sizeof *set);
    if (!set)
        die("malloc");
    for (long long p = 0; p < pages; p++)
        region[p * PAGE] = (char)p;
    mark(0, 0);
    for (long long v = 0; v < visits; v++) {
        long long c = (long long)(next_unit(&s) * nr_chunks);
        for (long long i = 0; i < pass; i++)
            set[i] = c * chunk_pages + (long long)(next_unit(&s) * chunk_pages);
        for (long long it = 0; it < iterations; it++)
            for (long long i = 0; i < pass; i++)
                checksum[0] += *(volatile unsigned char *)(region + set[i] * PAGE);
        mark(0, (int)(v + 1));
    }
    free(set);
    return NULL;
}

int main(int argc, char **argv)
{
    nargs = argc - 1;
    args = argv + 1;
    pages = arg_int("total", NULL) / PAGE;
    chunk_pages = arg_int("chunk", NULL) / PAGE;
    nr_chunks = pages / chunk_pages;
    visits = arg_int("visits", NULL);
    iterations = arg_int("iterations", NULL);
    pass = arg_int("accesses", "0");
    if (!pass)
        pass = chunk_pages;
    seed = (uint64_t)arg_int("seed", "0");
    struct policy policy = parse_policy(arg_str("policy", "default"));
    bind_cpus(arg_str("cpunodebind", ""));
    region = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED)
        die("mmap anon");
    bind_region(region, pages * PAGE, policy, 0);
    run_tasks(1, task_main);
    return 0;
}
