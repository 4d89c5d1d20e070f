/* tierlab's `random-read` workload in a real kernel (tierlab/workloads/random_read.py).
 *
 * Tasks are threads of one process (tierlab's tasks share one mm). Each issues `accesses` reads of
 * one 4 KiB page chosen uniformly or by a zipf law (rank r has weight r^-zipf_theta, ranks
 * scattered over the region by a fixed permutation):
 *   target=anon            a 4 KiB copy out of an anonymous mapping (mbind to `policy`); task 0
 *                          first writes every page once, then MARKs;
 *   target=file, io=mmap   a 4 KiB copy through a mapping of DIR/data: a private writable one
 *                          (never written) by default, which the NUMA scanner walks as the model's
 *                          mapped file regions are walked; mmap=shared-ro maps it PROT_READ,
 *                          MAP_SHARED (what fio's mmap engine does for reads), which Linux 6.12's
 *                          task_numa_work() skips (read-only file mappings get no hint faults);
 *   target=file, io=read   a pread() of one page (fio's psync engine).
 * For files the page cache follows `policy` as the reading task's mempolicy. prefault=1: task 0
 * first reads the file once sequentially (through the mapping or with pread()), then MARKs. Like
 * fio, the random phase is announced to the kernel (POSIX_FADV_RANDOM / MADV_RANDOM) once the
 * sequential part is over. Every task MARKs at its end.
 *
 * args: dir= file_size= accesses= tasks= dist=uniform|zipf zipf_theta= target=file|anon
 *       io=mmap|read policy= prefault= seed= mmap=private-rw|shared-ro
 */
#include "common.h"

static long long pages, accesses, prefault;
static int zipf, anon, use_read, fd = -1;
static struct policy policy;
static char *region;
static double *cdf;
static uint32_t *perm;
static uint64_t seed;

static long long sample(uint64_t *s)
{
    if (!zipf)
        return (long long)(next_unit(s) * pages);
    double u = next_unit(s);
    long long lo = 0, hi = pages - 1;
    while (lo < hi) {            /* first rank whose cdf >= u (numpy searchsorted, side=left) */
        long long mid = (lo + hi) / 2;
        if (cdf[mid] < u) lo = mid + 1; else hi = mid;
    }
    return perm[lo];
}

static void *task_main(void *arg)
{
    int t = (int)(long)arg;
    char buf[PAGE] __attribute__((aligned(64)));
    uint64_t s = seed * 0x100000001b3ULL + (uint64_t)t + 1;
    if (!anon)
        set_task_policy(policy);
    int populate = t == 0 && (prefault || anon);
    if (populate) {
        for (long long p = 0; p < pages; p++) {
            if (anon)
                region[p * PAGE] = (char)p;
            else if (use_read) {
                if (pread(fd, buf, PAGE, p * PAGE) != PAGE)
                    die("pread");
            } else
                checksum[t] += *(volatile char *)(region + p * PAGE);
        }
        if (!anon && posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) != 0)
            die("posix_fadvise");
        if (!anon && !use_read && madvise(region, pages * PAGE, MADV_RANDOM) != 0)
            die("madvise");
        mark(t, 0);
    }
    for (long long i = 0; i < accesses; i++) {
        long long p = sample(&s);
        if (use_read) {
            if (pread(fd, buf, PAGE, p * PAGE) != PAGE)
                die("pread");
        } else
            memcpy(buf, region + p * PAGE, PAGE);
        checksum[t] += (unsigned char)buf[(i * 64) & (PAGE - 1)];
    }
    mark(t, populate);
    return NULL;
}

int main(int argc, char **argv)
{
    nargs = argc - 1;
    args = argv + 1;
    const char *dir = arg_str("dir", "/mnt");
    long long size = arg_int("file_size", NULL);
    pages = size / PAGE;
    accesses = arg_int("accesses", NULL);
    int tasks = (int)arg_int("tasks", "1");
    zipf = !strcmp(arg_str("dist", "uniform"), "zipf");
    double theta = arg_float("zipf_theta", "0.99");
    anon = !strcmp(arg_str("target", "file"), "anon");
    use_read = !anon && !strcmp(arg_str("io", "mmap"), "read");
    policy = parse_policy(arg_str("policy", "default"));
    prefault = arg_int("prefault", "0");
    seed = (uint64_t)arg_int("seed", "0");

    if (zipf) {                  /* the law's tables live in the guest's memory, as numpy's do in the model */
        cdf = malloc(pages * sizeof *cdf);
        perm = malloc(pages * sizeof *perm);
        if (!cdf || !perm)
            die("malloc");
        double acc = 0;
        for (long long r = 0; r < pages; r++)
            cdf[r] = acc += pow((double)(r + 1), -theta);
        for (long long r = 0; r < pages; r++)
            cdf[r] /= acc;
        uint64_t s = seed ^ 0x5bd1e995ULL;
        for (long long r = 0; r < pages; r++)
            perm[r] = (uint32_t)r;
        for (long long r = pages - 1; r > 0; r--) {
            long long j = (long long)(next_unit(&s) * (r + 1));
            uint32_t x = perm[r]; perm[r] = perm[j]; perm[j] = x;
        }
    }
    if (anon) {
        region = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED)
            die("mmap anon");
        bind_region(region, pages * PAGE, policy, 0);
    } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/data", dir);
        fd = open(path, O_RDONLY);
        if (fd < 0)
            die(path);
        if (!use_read) {
            int shared_ro = !strcmp(arg_str("mmap", "private-rw"), "shared-ro");
            region = mmap(NULL, pages * PAGE, shared_ro ? PROT_READ : PROT_READ | PROT_WRITE,
                          shared_ro ? MAP_SHARED : MAP_PRIVATE, fd, 0);
            if (region == MAP_FAILED)
                die("mmap file");
        }
        if (!prefault) {
            if (posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) != 0)
                die("posix_fadvise");
            if (!use_read && madvise(region, pages * PAGE, MADV_RANDOM) != 0)
                die("madvise");
        }
    }
    run_tasks(tasks, task_main);
    return 0;
}
