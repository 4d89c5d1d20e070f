/* tierlab's `xsbench` workload in a real kernel (tierlab/workloads/xsbench.py): XSBench's
 * history-based macroscopic cross-section lookups over the unionized energy grid (seed 004's
 * benchmark), with the geometry, the pages each lookup touches, the read/write mix and the thread
 * count of the model's workload.
 *
 * Memory: four anonymous mappings in the model's region order, each its own VMA (a PROT_NONE guard
 * page between two, so they do not merge): the nuclide grids (n_iso x n_gp points of 6 doubles,
 * 48 bytes; isotope k's grid is points k*n_gp .. k*n_gp + n_gp-1, sorted by energy), the unionized
 * energy array (N = n_iso x n_gp doubles, sorted), the index grid (one int per union energy and
 * isotope, N x n_iso) and the "stacks" (one page per thread: the lookup's 5-double accumulator).
 *
 * Initialisation: each of the `threads` threads writes its share of each grid, grid after grid (the
 * pages [pages*t/T, pages*(t+1)/T) of each, every element that starts in them), MARKs, and waits
 * at a barrier for the others (the model's Chunk phase; XSBench's main thread writes them alone).
 * The values are uniform: union energy i is i/N, nuclide point j of any isotope has energy j/n_gp,
 * and the index grid's entry (i, k) is the point of isotope k just below union energy i, i.e.
 * min(i / n_iso, n_gp - 2). So the model's shortcut (the search ends at floor(e x N), a nuclide's
 * bracketing point is floor(e x n_gp)) is what the real search computes here.
 *
 * Lookups: thread t runs particles/threads (+1 for the first particles % threads) particles of
 * `lookups` lookups each. A lookup draws a uniform energy e and a material by `mat_dist`, then
 *   - binary-searches the energy array (lo = 0, hi = N-1, one load of energy[mid] per step);
 *   - reads the index grid row of the result: its first and last entry (the row's 1-2 pages, as
 *     the model touches them) and, per nuclide of the material, that nuclide's entry (in those pages);
 *   - per nuclide, loads the bracketing low point's energy (8 bytes at the point's start: the page
 *     the model names) and accumulates into the 5-double vector;
 *   - stores the vector into the thread's page of the stacks mapping (the model's stack store);
 *   - write_share (what-if, not XSBench): with that probability also stores into the first
 *     nuclide's low point (its energy, rewritten with its own value).
 * Each thread MARKs after its last lookup. cpunodebind= pins the threads as numactl does.
 * trace_lookups=N (for tests/test_oracle_xsbench.py) prints thread 0's first N lookups, each as its
 * energy (hex float), material and the pages it touched in the model's order and terms (region
 * 0-3 : page within it): "@@tierlab xslookup E MAT r:p r:p ...".
 *
 * Differences from the model's stream (workloads/xsbench.py), none in pages touched per lookup:
 *   - random numbers: splitmix64, not numpy's sequences (the same laws: uniform energies, the
 *     material distribution passed in by the host); the material tables are the model's own
 *     (passed in as `mats`);
 *   - the search ends at the lower bound of e in the array, so for e >= (N-1)/N (one lookup in N)
 *     its row is N-2 where the model's is N-1;
 *   - XSBench reads both bracketing points (96 bytes, which cross a page boundary for ~2 % of the
 *     nuclide reads); this reads the low point's first double, one access on the model's page;
 *   - the initialisation writes every byte of the grids (the model: one store per page), and each
 *     thread's real stack, code and libc pages exist besides the model's regions (a few pages).
 *
 * args: n_iso= n_gp= particles= lookups= threads= mats=a,b,..;c,..;.. mat_dist=p0,p1,..
 *       write_share= cpunodebind= seed= trace_lookups=
 */
#include "common.h"

struct point { double energy, total, elastic, absorption, fission, nu_fission; };

#define MAX_MATS 64
static long long n_iso, n_gp, N, T, particles, lookups;
static struct point *nuc;
static double *egrid;
static int *index_grid;
static char *stacks;
static long long nuc_pages, e_pages, idx_pages;
static int nmat, mat_len[MAX_MATS], *mat_nucs[MAX_MATS];
static double mat_cum[MAX_MATS], write_share;
static uint64_t seed;
static long long trace_lookups;
static const char *cpunodes;
static pthread_barrier_t barrier;

/* trace_lookups: one lookup's pages, printed at its end */
#define TRACE_MAX 1024
static long long trace_buf[TRACE_MAX];
static int trace_n;

static inline void touch(int on, int region, long long page)
{
    if (on && trace_n < TRACE_MAX)
        trace_buf[trace_n++] = region * (1LL << 40) + page;
}

static long long pages_of(long long bytes) { return bytes ? (bytes + PAGE - 1) / PAGE : 1; }

/* Elements of `size` bytes (of `n`) whose start lies in thread t's share of a grid of `pages` pages. */
static void share(long long pages, long long size, long long n, int t, long long *lo, long long *hi)
{
    long long b0 = pages * t / T * PAGE, b1 = pages * (t + 1) / T * PAGE;
    *lo = (b0 + size - 1) / size;
    *hi = (b1 + size - 1) / size;
    if (*hi > n) *hi = n;
    if (*lo > *hi) *lo = *hi;
}

static void *task_main(void *arg)
{
    int t = (int)(long)arg;
    long long lo, hi;
    bind_cpus(cpunodes);
    share(nuc_pages, sizeof(struct point), N, t, &lo, &hi);
    for (long long q = lo; q < hi; q++) {
        long long k = q / n_gp, j = q % n_gp;
        nuc[q] = (struct point){ (double)j / n_gp, 1.0 + k, 0.5, 0.25, 0.125, 0.0625 };
    }
    share(e_pages, sizeof(double), N, t, &lo, &hi);
    for (long long i = lo; i < hi; i++)
        egrid[i] = (double)i / N;
    share(idx_pages, sizeof(int), N * n_iso, t, &lo, &hi);
    for (long long m = lo; m < hi; m++) {
        long long j = m / n_iso / n_iso;
        index_grid[m] = (int)(j < n_gp - 2 ? j : n_gp - 2);
    }
    mark(t, 0);
    pthread_barrier_wait(&barrier);

    uint64_t s = seed * 0x100000001b3ULL + (uint64_t)t + 1;
    long long mine = (particles / T + (t < particles % T)) * lookups;
    volatile double *vec = (volatile double *)(stacks + (long long)t * PAGE);
    for (long long l = 0; l < mine; l++) {
        int tr = t == 0 && l < trace_lookups;
        if (tr)
            trace_n = 0;        /* thread 0's buffer: another thread must not reset it mid-lookup */
        double e = next_unit(&s);
        double u = next_unit(&s) * mat_cum[nmat - 1];
        int mat = 0;
        while (mat < nmat - 1 && mat_cum[mat] <= u)       /* first material whose cumulative share > u */
            mat++;
        long long a = 0, b = N - 1;
        while (b - a > 1) {
            long long mid = (a + b) / 2;
            touch(tr, 1, mid * (long long)sizeof(double) / PAGE);
            if (egrid[mid] <= e) a = mid; else b = mid;
        }
        const int *row = index_grid + a * n_iso;
        long long row0 = a * n_iso * (long long)sizeof(int) / PAGE;
        long long row1 = (a * n_iso + n_iso - 1) * (long long)sizeof(int) / PAGE;
        touch(tr, 2, row0);
        if (row1 != row0)
            touch(tr, 2, row1);
        double macro[5] = { 0 };
        macro[4] += *(volatile const int *)&row[0] + *(volatile const int *)&row[n_iso - 1];
        volatile double *first = NULL;
        for (int j = 0; j < mat_len[mat]; j++) {
            long long k = mat_nucs[mat][j];
            struct point *p = &nuc[k * n_gp + row[k]];
            touch(tr, 0, (k * n_gp + row[k]) * (long long)sizeof(struct point) / PAGE);
            double en = *(volatile double *)&p->energy;
            if (!first)
                first = &p->energy;
            macro[j % 5] += en;
        }
        if (write_share > 0 && next_unit(&s) < write_share && first)
            *first = *first;
        for (int k = 0; k < 5; k++)
            vec[k] = macro[k];
        touch(tr, 3, t);
        if (tr) {
            char line[TRACE_MAX * 24 + 64];
            int n = snprintf(line, sizeof line, "@@tierlab xslookup %a %d", e, mat);
            for (int i = 0; i < trace_n; i++)
                n += snprintf(line + n, sizeof line - n, " %lld:%lld", trace_buf[i] >> 40,
                              trace_buf[i] & ((1LL << 40) - 1));
            dprintf(1, "%s\n", line);
        }
        checksum[t] += (unsigned long long)(macro[0] * 1024);
    }
    mark(t, 1);
    return NULL;
}

static void parse_mats(const char *s)
{
    for (nmat = 0; *s && nmat < MAX_MATS; nmat++) {
        const char *end = strchr(s, ';');
        if (!end) end = s + strlen(s);
        int n = 1;
        for (const char *c = s; c < end; c++)
            n += *c == ',';
        mat_nucs[nmat] = malloc(n * sizeof(int));
        if (!mat_nucs[nmat])
            die("malloc");
        mat_len[nmat] = 0;
        for (const char *c = s; c < end; c = strchr(c, ',') && strchr(c, ',') < end ? strchr(c, ',') + 1 : end) {
            int k = atoi(c);
            if (k < 0 || k >= n_iso) {
                dprintf(1, "@@tierlab error mats: nuclide %d outside 0..%lld\n", k, n_iso - 1);
                exit(2);
            }
            mat_nucs[nmat][mat_len[nmat]++] = k;
        }
        s = *end ? end + 1 : end;
    }
}

int main(int argc, char **argv)
{
    nargs = argc - 1;
    args = argv + 1;
    n_iso = arg_int("n_iso", NULL);
    n_gp = arg_int("n_gp", NULL);
    N = n_iso * n_gp;
    particles = arg_int("particles", NULL);
    lookups = arg_int("lookups", NULL);
    T = arg_int("threads", NULL);
    write_share = arg_float("write_share", "0");
    cpunodes = arg_str("cpunodebind", "");
    seed = (uint64_t)arg_int("seed", "0");
    trace_lookups = arg_int("trace_lookups", "0");
    parse_mats(arg_str("mats", NULL));
    double acc = 0;
    const char *d = arg_str("mat_dist", NULL);
    for (int m = 0; m < nmat; m++) {
        acc += atof(d);
        mat_cum[m] = acc;
        d = strchr(d, ',');
        if (!d && m < nmat - 1) {
            dprintf(1, "@@tierlab error mat_dist: fewer shares than materials (%d)\n", nmat);
            exit(2);
        }
        d = d ? d + 1 : "";
    }
    if (T < 1 || T > MAX_TASKS || n_gp < 2 || particles < T) {
        dprintf(1, "@@tierlab error threads, n_gp or particles out of range\n");
        exit(2);
    }
    nuc_pages = pages_of(N * (long long)sizeof(struct point));
    e_pages = pages_of(N * (long long)sizeof(double));
    idx_pages = pages_of(N * n_iso * (long long)sizeof(int));
    long long sizes[4] = { nuc_pages, e_pages, idx_pages, T };
    long long total = 0;
    for (int r = 0; r < 4; r++)
        total += sizes[r] + 1;
    char *base = mmap(NULL, total * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        die("mmap reserve");
    char *at[4];
    for (int r = 0, off = 0; r < 4; off += sizes[r] + 1, r++) {
        at[r] = mmap(base + (long long)off * PAGE, sizes[r] * PAGE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (at[r] == MAP_FAILED)
            die("mmap grid");
    }
    nuc = (struct point *)at[0];
    egrid = (double *)at[1];
    index_grid = (int *)at[2];
    stacks = at[3];
    if (pthread_barrier_init(&barrier, NULL, (unsigned)T) != 0)
        die("pthread_barrier_init");
    run_tasks((int)T, task_main);
    return 0;
}
