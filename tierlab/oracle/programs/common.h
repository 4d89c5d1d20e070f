/* Shared helpers of tierlab's guest workload programs (the C files beside this header).
 *
 * Arguments are key=value words (sizes in bytes, as the host computed them from the workload's
 * parsed params). Output lines start with "@@tierlab " so the host's console parser
 * (tierlab/oracle/console.py) can pick them out of the serial console:
 *   @@tierlab start NS               the program starts (CLOCK_MONOTONIC ns)
 *   @@tierlab mark TASK INDEX NS     a task's MARK (as tierlab's workloads place them)
 *   @@tierlab done NS CHECKSUM       all tasks finished; the program then stops itself (SIGSTOP)
 *                                    so the host's "after" dump sees its memory still in place
 * Memory policies are set with the raw set_mempolicy/mbind system calls (no libnuma).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096L
#define MPOL_DEFAULT 0
#define MPOL_PREFERRED 1
#define MPOL_BIND 2
#define MPOL_INTERLEAVE 3
#define MPOL_LOCAL 4
#define MAX_TASKS 4096

static int nargs;
static char **args;

static inline void die(const char *what)
{
    dprintf(1, "@@tierlab error %s: %s\n", what, strerror(errno));
    exit(1);
}

static inline const char *arg_str(const char *key, const char *dflt)
{
    size_t n = strlen(key);
    for (int i = 0; i < nargs; i++)
        if (!strncmp(args[i], key, n) && args[i][n] == '=')
            return args[i] + n + 1;
    if (!dflt) {
        dprintf(1, "@@tierlab error missing argument %s\n", key);
        exit(2);
    }
    return dflt;
}

static inline long long arg_int(const char *key, const char *dflt) { return atoll(arg_str(key, dflt)); }
static inline double arg_float(const char *key, const char *dflt) { return atof(arg_str(key, dflt)); }

static inline long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void mark(int task, int index)
{
    dprintf(1, "@@tierlab mark %d %d %lld\n", task, index, now_ns());
}

#define MPOL_F_NUMA_BALANCING (1 << 13)

/* A memory policy as tierlab writes it: default, bind:0,1, preferred:1, interleave:0,1, and
 * bind|numa_balancing:1,2 (MPOL_F_NUMA_BALANCING: the VMA is NUMA-scanned under a bind). */
struct policy { int mode; unsigned long mask; };

static inline struct policy parse_policy(const char *s)
{
    struct policy p = { MPOL_DEFAULT, 0 };
    const char *colon = strchr(s, ':'), *bar = strchr(s, '|');
    size_t n = bar && (!colon || bar < colon) ? (size_t)(bar - s) : colon ? (size_t)(colon - s) : strlen(s);
    if (!strncmp(s, "bind", n) && n == 4) p.mode = MPOL_BIND;
    else if (!strncmp(s, "preferred", n) && n == 9) p.mode = MPOL_PREFERRED;
    else if (!strncmp(s, "interleave", n) && n == 10) p.mode = MPOL_INTERLEAVE;
    for (const char *c = colon; c && *c; ) {
        c++;
        p.mask |= 1UL << atoi(c);
        c = strchr(c, ',');
    }
    if (bar && !strncmp(bar, "|numa_balancing", 15))
        p.mode |= MPOL_F_NUMA_BALANCING;
    return p;
}

/* The calling thread's policy (page cache follows the allocating task's policy, not a VMA's). */
static inline void set_task_policy(struct policy p)
{
    if (p.mode != MPOL_DEFAULT && syscall(SYS_set_mempolicy, p.mode, &p.mask, 64) != 0)
        die("set_mempolicy");
}

/* Add the CPUs of a cpulist ("0-3,8", as sysfs writes it; ends at a NUL or a newline) to `set`. */
static inline void cpu_list_add(cpu_set_t *set, const char *list)
{
    for (const char *c = list; c && *c && *c != '\n'; c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL) {
        int lo = atoi(c), hi = lo;
        const char *dash = strchr(c, '-'), *comma = strchr(c, ',');
        if (dash && (!comma || dash < comma))
            hi = atoi(dash + 1);
        for (int i = lo; i <= hi; i++)
            CPU_SET(i, set);
    }
}

/* Pin the calling thread to a CPU list such as "0", "0-3" or "0,2-3" (sched_setaffinity); an
 * empty list leaves it where it is. */
static inline void set_cpus(const char *list)
{
    if (!*list)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    cpu_list_add(&set, list);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        die("sched_setaffinity");
}

/* Pin the calling thread to the CPUs of the nodes in `nodes` ("1" or "0,1"; empty: leave the
 * affinity alone), from /sys/devices/system/node/nodeN/cpulist, as `numactl --cpunodebind` does. */
static inline void bind_cpus(const char *nodes)
{
    if (!*nodes)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const char *c = nodes; c && *c; c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL) {
        char path[128], list[1024];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", atoi(c));
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            die(path);
        ssize_t n = read(fd, list, sizeof list - 1);
        close(fd);
        if (n < 0)
            die(path);
        list[n] = 0;
        cpu_list_add(&set, list);
    }
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        die("sched_setaffinity");
}

/* A VMA's policy. tierlab's "default" means local allocation whatever the task's policy is, so it
 * becomes MPOL_LOCAL when the task has a policy of its own. */
static inline void bind_region(void *addr, size_t len, struct policy p, int task_has_policy)
{
    if (p.mode == MPOL_DEFAULT && !task_has_policy)
        return;
    int mode = p.mode == MPOL_DEFAULT ? MPOL_LOCAL : p.mode;
    unsigned long mask = p.mask;
    if (syscall(SYS_mbind, addr, len, mode, mode == MPOL_LOCAL ? NULL : &mask, 64, 0) != 0)
        die("mbind");
}

/* splitmix64: the programs' own random numbers (the host model uses numpy's; the laws match, the
 * sequences do not). */
static inline uint64_t next_random(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline double next_unit(uint64_t *s) { return (next_random(s) >> 11) * 0x1.0p-53; }

/* Each task adds what it read here, so the compiler cannot drop the reads. */
static unsigned long long checksum[MAX_TASKS];

/* Run `fn` as `tasks` threads between the start and done lines, then stop (SIGSTOP) so the host's
 * "after" dump sees the program's memory still in place. */
static inline void run_tasks(int tasks, void *(*fn)(void *))
{
    static pthread_t th[MAX_TASKS];
    dprintf(1, "@@tierlab start %lld\n", now_ns());
    for (long t = 0; t < tasks; t++)
        if (pthread_create(&th[t], NULL, fn, (void *)t) != 0)
            die("pthread_create");
    unsigned long long sum = 0;
    for (int t = 0; t < tasks; t++) {
        pthread_join(th[t], NULL);
        sum += checksum[t];
    }
    dprintf(1, "@@tierlab done %lld %llu\n", now_ns(), sum);
    raise(SIGSTOP);
}
