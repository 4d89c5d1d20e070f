/* tierlab's `fio` workload in a real kernel (tierlab/workloads/fio.py): buffered reads of files with
 * fio's psync engine (one pread() per I/O) or its io_uring engine (raw io_uring system calls, no
 * liburing: `iodepth` reads in flight per job).
 *
 * Each of `numjobs` jobs is a process (fio forks one per job) reading its own file DIR/fio.J.0, or,
 * with shared=1, all of them DIR/fio.shared. The job's page cache follows file_policy (the task's
 * mempolicy: page-cache folios are allocated under the reading task's policy). With fadvise_hint=1
 * the file is announced as POSIX_FADV_RANDOM (randread) or POSIX_FADV_SEQUENTIAL (read) when the job
 * opens it, as fio does. pre_read=1: every job reads its file once sequentially in `bs` calls (with
 * a shared file only job 0) and MARKs; then all jobs start together (a barrier), as the model's
 * jobs do after its load phase. A job then issues `loops` passes of `size / bs` I/Os of `bs` bytes:
 *   rw=read      blocks 0, 1, 2, ... of each pass;
 *   rw=randread  every block once per pass in a random order (a fresh permutation per pass, fio's
 *                random map); norandommap=1: each block drawn uniformly, repeats allowed;
 *                dist=zipf|pareto|normal (dist_param its theta, h or dev): fio's generators
 *                (lib/zipf.c, lib/gauss.c as tierlab/workloads/fio_dist.py gives them: rank, then
 *                fio's multiplicative hash, plus a per-job offset for zipf and pareto, modulo the
 *                blocks), no random map.
 * A job MARKs every log_ios I/Os (the model's throughput log marks).
 *
 * What differs from real fio: the random numbers are splitmix64 seeded by (seed, job), not fio's
 * Tausworthe generator (same laws, other sequences); the file is laid out on the guest's disk by
 * the host and the guest's page cache starts empty (fio's invalidate=1); no write, mixed, time-based,
 * ramp or start-delay jobs (the host refuses them); fio's own statistics (latency histograms, its
 * JSON) are not kept, only the program's start, marks and end; the io_uring engine reaps completions
 * with io_uring_enter(GETEVENTS, min_complete=1) and refills what completed (fio's default
 * iodepth_batch_complete_min=1), no SQPOLL, no registered files or buffers (fio's defaults); the
 * sync engine reads with pread() as psync does (fio's sync seeks and calls read(): the same read path).
 *
 * args: dir= size= bs= numjobs= rw=read|randread ioengine=psync|sync|io_uring iodepth= loops=
 *       norandommap= dist=random|zipf|pareto|normal dist_param= fadvise_hint= pre_read= shared=
 *       file_policy= log_ios= seed= (and, for tests, trace_blocks=N: job 0 prints the block of each of its
 *       first N I/Os as `@@tierlab fioblock B`)
 */
#include "common.h"
#include <linux/io_uring.h>
#include <sys/wait.h>

static const char *dir;
static long long size, bs, nblocks, loops, log_ios, iodepth;
static int numjobs, randread, norandommap, uring, fadvise_hint, pre_read, shared;
static struct policy file_policy;
static uint64_t seed;
static enum { D_RANDOM, D_ZIPF, D_PARETO, D_NORMAL } dist;
static double dist_param;
static long long trace_blocks;             /* job 0 prints its first trace_blocks blocks */
static int marks;                           /* this job's MARKs so far */
static unsigned long long *sums;            /* per job, in memory shared with the parent */
static pthread_barrier_t *start_barrier;    /* process-shared: the jobs start together */

/* ---- which block each I/O reads ------------------------------------------------------------- */

#define GR_PRIME_64 0x9E37FFFFFFFC0001ULL     /* fio's hash.h golden-ratio prime */
#define FRAND32_MAX 4294967295.0
#define ZIPF_MAX_GEN 10000000LL

struct blockgen {
    uint64_t s;                 /* splitmix64 state */
    uint32_t *perm;             /* randread with the random map: this pass's order */
    long long pass;
    uint64_t rand_off;          /* zipf, pareto: fio's per-job offset of the hashed rank */
    double zetan, zeta2, eta;   /* zipf */
};

static uint32_t rand32(uint64_t *s) { return (uint32_t)(next_random(s) >> 32); }
static double unit32(uint64_t *s) { return rand32(s) / FRAND32_MAX; }     /* fio's __rand() / FRAND32_MAX */

static void blockgen_init(struct blockgen *g, int job)
{
    memset(g, 0, sizeof *g);
    g->s = seed * 0x100000001b3ULL + (uint64_t)job + 1;
    g->pass = -1;
    if (randread && dist == D_RANDOM && !norandommap) {
        g->perm = malloc(nblocks * sizeof *g->perm);
        if (!g->perm)
            die("malloc");
    }
    if (dist == D_ZIPF || dist == D_PARETO)
        g->rand_off = rand32(&g->s);
    if (dist == D_ZIPF) {
        double theta = dist_param, z = 0;
        long long n = nblocks < ZIPF_MAX_GEN ? nblocks : ZIPF_MAX_GEN;
        for (long long i = 1; i <= n; i++)
            z += pow(1.0 / (double)i, theta);
        g->zetan = z;
        g->zeta2 = 1.0 + pow(0.5, theta);
        g->eta = (1.0 - pow(2.0 / (double)nblocks, 1.0 - theta)) / (1.0 - g->zeta2 / g->zetan);
    }
}

static long long zipf_rank(struct blockgen *g)
{
    double theta = dist_param, u = unit32(&g->s), rz = u * g->zetan;
    if (rz < 1.0)
        return 0;
    if (rz < 1.0 + pow(0.5, theta))
        return 1;
    double tail = (double)nblocks * pow(g->eta * u - g->eta + 1.0, 1.0 / (1.0 - theta));
    if (!(tail >= 0))               /* NaN */
        tail = 0;
    if (tail > 0x1.0p63)
        tail = 0x1.0p63;
    return (long long)(uint64_t)floor(tail);         /* 1 + tail, 0-based */
}

static uint64_t gauss_value(struct blockgen *g)
{
    uint64_t n = (uint64_t)nblocks, sum = 0;
    for (int i = 0; i < 12; i++)
        sum += rand32(&g->s) % (n + 1);
    uint64_t s = (sum + 11) / 12;
    long long stddev = 0;
    if (dist_param != 0.0) {
        stddev = (long long)ceil((double)nblocks * dist_param / 100.0);
        if (stddev > nblocks / 2)
            stddev = nblocks / 2;
    }
    if (stddev) {
        double r = rand32(&g->s);
        long long d = (long long)(stddev * (r / (FRAND32_MAX + 1.0))) - stddev / 2;
        while ((uint64_t)d + s >= n)          /* fio's unsigned comparison: a negative sum is too large */
            d /= 2;
        s += (uint64_t)d;
    }
    return s;
}

static long long pick_block(struct blockgen *g, long long i);

static long long next_block(int job, struct blockgen *g, long long i)
{
    long long b = pick_block(g, i);
    if (job == 0 && i < trace_blocks)
        dprintf(1, "@@tierlab fioblock %lld\n", b);
    return b;
}

static long long pick_block(struct blockgen *g, long long i)
{
    long long idx = i % nblocks;
    if (!randread)
        return idx;
    if (dist != D_RANDOM) {
        uint64_t v;
        if (dist == D_ZIPF)
            v = (uint64_t)zipf_rank(g);
        else if (dist == D_PARETO)
            v = (uint64_t)floor((double)(nblocks - 1) * pow(unit32(&g->s), log(dist_param) / log(1.0 - dist_param)));
        else
            v = gauss_value(g);
        return (long long)((v * GR_PRIME_64 + g->rand_off) % (uint64_t)nblocks);
    }
    if (norandommap)
        return (long long)(next_unit(&g->s) * nblocks);
    long long pass = i / nblocks;
    if (pass != g->pass) {          /* a new pass: a fresh order of every block */
        g->pass = pass;
        for (long long b = 0; b < nblocks; b++)
            g->perm[b] = (uint32_t)b;
        for (long long b = nblocks - 1; b > 0; b--) {
            long long j = (long long)(next_unit(&g->s) * (b + 1));
            uint32_t x = g->perm[b]; g->perm[b] = g->perm[j]; g->perm[j] = x;
        }
    }
    return g->perm[idx];
}

/* ---- the engines ---------------------------------------------------------------------------- */

static void psync_job(int job, int fd, char *buf, struct blockgen *g)
{
    long long total = loops * nblocks;
    for (long long i = 0; i < total; i++) {
        long long b = next_block(job, g, i);
        if (pread(fd, buf, bs, b * bs) != bs)
            die("pread");
        sums[job] += (unsigned char)buf[(i * 64) % bs];
        if ((i + 1) % log_ios == 0)
            mark(job, marks++);
    }
}

struct ring {
    int fd;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
};

static void ring_setup(struct ring *r, unsigned entries)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    r->fd = (int)syscall(SYS_io_uring_setup, entries, &p);
    if (r->fd < 0)
        die("io_uring_setup");
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (p.features & IORING_FEAT_SINGLE_MMAP)
        sq_len = cq_len = sq_len > cq_len ? sq_len : cq_len;
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    if (sq == MAP_FAILED)
        die("mmap io_uring sq ring");
    char *cq = sq;
    if (!(p.features & IORING_FEAT_SINGLE_MMAP)) {
        cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
        if (cq == MAP_FAILED)
            die("mmap io_uring cq ring");
    }
    r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED)
        die("mmap io_uring sqes");
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

/* Queue a read of block b into slot `slot`'s buffer (not yet submitted). */
static void ring_queue(struct ring *r, int fd, char *buf, long long b, unsigned slot)
{
    unsigned tail = *r->sq_tail, i = tail & *r->sq_mask;
    struct io_uring_sqe *sqe = &r->sqes[i];
    memset(sqe, 0, sizeof *sqe);
    sqe->opcode = IORING_OP_READ;
    sqe->fd = fd;
    sqe->off = (uint64_t)(b * bs);
    sqe->addr = (uint64_t)(uintptr_t)(buf + (long long)slot * bs);
    sqe->len = (uint32_t)bs;
    sqe->user_data = slot;
    r->sq_array[i] = i;
    __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

static void uring_job(int job, int fd, char *buf, struct blockgen *g)
{
    struct ring r;
    ring_setup(&r, (unsigned)iodepth);
    long long total = loops * nblocks, issued = 0, done = 0;
    unsigned queued = 0;
    for (unsigned slot = 0; slot < iodepth && issued < total; slot++, queued++)
        ring_queue(&r, fd, buf, next_block(job, g, issued++), slot);
    while (done < total) {
        /* submit what is queued and wait for at least one completion; what the kernel did not
         * take this time stays queued for the next call */
        long ret = syscall(SYS_io_uring_enter, r.fd, queued, 1, IORING_ENTER_GETEVENTS, NULL, 0);
        if (ret < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EBUSY)
                continue;
            die("io_uring_enter");
        }
        queued -= (unsigned)ret;
        unsigned head = *r.cq_head, tail = __atomic_load_n(r.cq_tail, __ATOMIC_ACQUIRE);
        for (; head != tail; head++) {
            struct io_uring_cqe *cqe = &r.cqes[head & *r.cq_mask];
            unsigned slot = (unsigned)cqe->user_data;
            if (cqe->res != bs) {
                errno = cqe->res < 0 ? -cqe->res : EIO;
                die("io_uring read");
            }
            sums[job] += (unsigned char)buf[(long long)slot * bs + (done * 64) % bs];
            done++;
            if (done % log_ios == 0)
                mark(job, marks++);
            if (issued < total) {
                ring_queue(&r, fd, buf, next_block(job, g, issued++), slot);
                queued++;
            }
        }
        __atomic_store_n(r.cq_head, head, __ATOMIC_RELEASE);
    }
    close(r.fd);
}

/* ---- a job ---------------------------------------------------------------------------------- */

static void job_main(int job)
{
    char path[4096];
    if (shared)
        snprintf(path, sizeof path, "%s/fio.shared", dir);
    else
        snprintf(path, sizeof path, "%s/fio.%d.0", dir, job);
    set_task_policy(file_policy);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die(path);
    if (fadvise_hint && posix_fadvise(fd, 0, 0, randread ? POSIX_FADV_RANDOM : POSIX_FADV_SEQUENTIAL) != 0)
        die("posix_fadvise");
    long long slots = uring ? iodepth : 1;
    char *buf = mmap(NULL, slots * bs, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        die("mmap buffer");
    struct blockgen g;
    blockgen_init(&g, job);
    if (pre_read) {
        if (!shared || job == 0) {
            for (long long b = 0; b < nblocks; b++)
                if (pread(fd, buf, bs, b * bs) != bs)
                    die("pread (pre_read)");
            mark(job, marks++);
        }
        int rc = pthread_barrier_wait(start_barrier);
        if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD) {
            errno = rc;
            die("pthread_barrier_wait");
        }
    }
    if (uring)
        uring_job(job, fd, buf, &g);
    else
        psync_job(job, fd, buf, &g);
    close(fd);
}

int main(int argc, char **argv)
{
    nargs = argc - 1;
    args = argv + 1;
    dir = arg_str("dir", "/mnt");
    size = arg_int("size", NULL);
    bs = arg_int("bs", "4096");
    numjobs = (int)arg_int("numjobs", "1");
    const char *rw = arg_str("rw", "read"), *engine = arg_str("ioengine", "psync"), *d = arg_str("dist", "random");
    iodepth = arg_int("iodepth", "1");
    loops = arg_int("loops", "1");
    norandommap = (int)arg_int("norandommap", "0");
    dist_param = arg_float("dist_param", "0");
    fadvise_hint = (int)arg_int("fadvise_hint", "1");
    pre_read = (int)arg_int("pre_read", "0");
    shared = (int)arg_int("shared", "0");
    file_policy = parse_policy(arg_str("file_policy", "default"));
    log_ios = arg_int("log_ios", "1024");
    seed = (uint64_t)arg_int("seed", "0");
    trace_blocks = arg_int("trace_blocks", "0");
    randread = !strcmp(rw, "randread");
    uring = !strcmp(engine, "io_uring");
    dist = !strcmp(d, "zipf") ? D_ZIPF : !strcmp(d, "pareto") ? D_PARETO : !strcmp(d, "normal") ? D_NORMAL : D_RANDOM;
    errno = EINVAL;
    if (!randread && strcmp(rw, "read"))
        die("rw: accepted read, randread");
    if (!uring && strcmp(engine, "psync") && strcmp(engine, "sync"))
        die("ioengine: accepted psync, sync, io_uring");
    if (dist == D_RANDOM && strcmp(d, "random"))
        die("dist: accepted random, zipf, pareto, normal");
    if (bs <= 0 || bs % PAGE || size < bs || numjobs < 1 || numjobs > MAX_TASKS || loops < 1 || log_ios < 1
        || iodepth < 1 || iodepth > 4096)
        die("size, bs, numjobs, loops, log_ios or iodepth out of range");
    nblocks = size / bs;

    sums = mmap(NULL, numjobs * sizeof *sums + sizeof *start_barrier, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sums == MAP_FAILED)
        die("mmap shared");
    start_barrier = (pthread_barrier_t *)(sums + numjobs);
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    if (pthread_barrier_init(start_barrier, &ba, (unsigned)numjobs) != 0)
        die("pthread_barrier_init");

    dprintf(1, "@@tierlab start %lld\n", now_ns());
    for (int j = 0; j < numjobs; j++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            job_main(j);
            _exit(0);
        }
    }
    int failed = 0, status;
    for (int j = 0; j < numjobs; j++) {
        if (wait(&status) < 0)
            die("wait");
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    if (failed) {
        dprintf(1, "@@tierlab error a fio job failed\n");
        return 1;
    }
    unsigned long long sum = 0;
    for (int j = 0; j < numjobs; j++)
        sum += sums[j];
    dprintf(1, "@@tierlab done %lld %llu\n", now_ns(), sum);
    raise(SIGSTOP);
    return 0;
}
