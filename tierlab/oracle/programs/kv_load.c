/* A memtier_benchmark-like load generator for the Redis oracle entry (redis-memtier): `conns`
 * connections to one Redis server over TCP, spread over `threads` threads (one epoll each), each
 * connection keeping `pipeline` requests in flight, SET and GET in the ratio `ratio` (1:1 alternates
 * them, as memtier does), keys "memtier-<n>" with n uniform in [key_min, key_max] drawn for every
 * request (memtier's --key-pattern R:R), values `data_size` bytes of 'x' (memtier's default value
 * buffer; --random-data is not the default), RESP protocol. A connection sends `requests` requests
 * (memtier's -n) and stops.
 *
 * Like memtier's libevent output buffer, each connection copies every request it sends (the value
 * included) into its own output buffer, which holds up to `pipeline` requests (a ring of
 * pipeline * (data_size + 64) bytes); so the client's memory is about conns * pipeline * data_size
 * (halved by the GETs' short requests), and `policy` (tierlab's memory policy syntax, as common.h
 * parses it) and `cpus` (a CPU list, e.g. 1 or 0-1; empty: any) say where it lives and runs.
 *
 * sequential=1 gives connection i the keys key_min + i*requests + 0, 1, 2, ... (mod the key range)
 * instead of random ones: a fill (with ratio=1:0). marks=0 prints no start/done lines (a fill before
 * the measured run).
 *
 * Output: "@@tierlab kv T_NS SETS GETS HITS MISSES ERRORS" every `report_s` seconds (0: never), then
 * "@@tierlab kv-result ..." with ops/s. stop=1 stops the process (SIGSTOP) at the end, as the other
 * programs do; the default 0 exits (a wrapper script does the stopping).
 *
 * args: host= port= conns= threads= pipeline= requests= key_min= key_max= data_size= ratio=
 *       policy= cpus= seed= report_s= stop= sequential= marks=
 */
#include "common.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define MAX_CONNS 4096

struct conn {
    int fd, thread;
    char *out;                      /* ring of out_cap bytes */
    size_t out_cap, out_head, out_len;
    long long sent, replies, total; /* requests sent (queued), replies parsed, to send */
    int want_out;                   /* EPOLLOUT registered */
    uint64_t rng;
    long long set_count;            /* for the ratio */
    long long index;                /* this connection's number */
    /* reply parser */
    int in_body;
    long long body_left;
    char line[128];
    int line_len;
    long long sets, gets, hits, misses, errors;
};

static struct conn conns[MAX_CONNS];
static int nconns, nthreads, pipeline_depth, sets_per_cycle, gets_per_cycle;
static long long requests, key_min, key_max, data_size;
static char *value;
static double report_s;
static int sequential;
static volatile int finished_threads;

static void append(struct conn *c, const char *p, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        dprintf(1, "@@tierlab error kv_load: output ring overflow\n");
        exit(1);
    }
    size_t tail = (c->out_head + c->out_len) % c->out_cap;
    size_t first = n < c->out_cap - tail ? n : c->out_cap - tail;
    memcpy(c->out + tail, p, first);
    memcpy(c->out, p + first, n - first);
    c->out_len += n;
}

static void queue_request(struct conn *c)
{
    char key[48], head[160];
    long long k = sequential ? key_min + (c->index * requests + c->sent) % (key_max - key_min + 1)
                             : key_min + (long long)(next_unit(&c->rng) * (double)(key_max - key_min + 1));
    int klen = snprintf(key, sizeof key, "memtier-%lld", k);
    long long pos = c->set_count++ % (sets_per_cycle + gets_per_cycle);
    if (pos < sets_per_cycle) {
        int n = snprintf(head, sizeof head, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%lld\r\n", klen, key, data_size);
        append(c, head, n);
        append(c, value, data_size);
        append(c, "\r\n", 2);
        c->sets++;
    } else {
        int n = snprintf(head, sizeof head, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", klen, key);
        append(c, head, n);
        c->gets++;
    }
    c->sent++;
}

static void fill(struct conn *c)
{
    while (c->sent < c->total && c->sent - c->replies < pipeline_depth)
        queue_request(c);
}

/* write what the socket takes; 0 when the ring is empty */
static int flush_out(struct conn *c)
{
    while (c->out_len) {
        struct iovec iov[2];
        size_t first = c->out_cap - c->out_head < c->out_len ? c->out_cap - c->out_head : c->out_len;
        iov[0].iov_base = c->out + c->out_head;
        iov[0].iov_len = first;
        iov[1].iov_base = c->out;
        iov[1].iov_len = c->out_len - first;
        ssize_t w = writev(c->fd, iov, iov[1].iov_len ? 2 : 1);
        if (w < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 1;
            die("kv_load: writev");
        }
        c->out_head = (c->out_head + w) % c->out_cap;
        c->out_len -= w;
    }
    return 0;
}

static void reply_done(struct conn *c) { c->replies++; }

static void parse(struct conn *c, const char *p, size_t n)
{
    while (n) {
        if (c->in_body) {
            size_t take = (long long)n < c->body_left ? n : (size_t)c->body_left;
            c->body_left -= take;
            p += take;
            n -= take;
            if (!c->body_left) {
                c->in_body = 0;
                c->hits++;
                reply_done(c);
            }
            continue;
        }
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p + 1) : n;
        if (c->line_len + take >= sizeof c->line) {
            dprintf(1, "@@tierlab error kv_load: reply line too long\n");
            exit(1);
        }
        memcpy(c->line + c->line_len, p, take);
        c->line_len += take;
        p += take;
        n -= take;
        if (!nl)
            continue;
        c->line[c->line_len] = 0;
        c->line_len = 0;
        if (c->line[0] == '+') {
            reply_done(c);
        } else if (c->line[0] == '$') {
            long long len = atoll(c->line + 1);
            if (len < 0) {
                c->misses++;
                reply_done(c);
            } else {
                c->in_body = 1;
                c->body_left = len + 2;
            }
        } else if (c->line[0] == '-') {
            if (c->errors++ < 3)
                dprintf(1, "@@tierlab kv-error %s", c->line);
            reply_done(c);
        } else {
            dprintf(1, "@@tierlab error kv_load: unexpected reply %s", c->line);
            exit(1);
        }
    }
}

static void set_out_interest(int ep, struct conn *c, int want)
{
    if (want == c->want_out)
        return;
    struct epoll_event ev = { .events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c };
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        die("kv_load: epoll_ctl");
    c->want_out = want;
}

static void report(const char *tag)
{
    long long s = 0, g = 0, h = 0, m = 0, e = 0;
    for (int i = 0; i < nconns; i++) {
        s += conns[i].sets; g += conns[i].gets; h += conns[i].hits; m += conns[i].misses; e += conns[i].errors;
    }
    dprintf(1, "@@tierlab %s %lld %lld %lld %lld %lld %lld\n", tag, now_ns(), s, g, h, m, e);
}

static void *worker(void *arg)
{
    long t = (long)arg;
    int ep = epoll_create1(0);
    if (ep < 0)
        die("kv_load: epoll_create1");
    int mine = 0;
    char *in = malloc(1 << 16);
    for (int i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        if (c->thread != t)
            continue;
        mine++;
        struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
        c->want_out = 1;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
            die("kv_load: epoll_ctl add");
        fill(c);
    }
    int open_conns = mine;
    long long next_report = now_ns() + (long long)(report_s * 1e9);
    struct epoll_event evs[64];
    while (open_conns) {
        int n = epoll_wait(ep, evs, 64, 100);
        if (n < 0 && errno != EINTR)
            die("kv_load: epoll_wait");
        for (int k = 0; k < n; k++) {
            struct conn *c = evs[k].data.ptr;
            if (evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                for (;;) {
                    ssize_t r = read(c->fd, in, 1 << 16);
                    if (r < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                            break;
                        die("kv_load: read");
                    }
                    if (r == 0) {
                        dprintf(1, "@@tierlab error kv_load: the server closed a connection\n");
                        exit(1);
                    }
                    parse(c, in, r);
                    if (r < (1 << 16))
                        break;
                }
                fill(c);
            }
            int pending = flush_out(c);
            set_out_interest(ep, c, pending);
            if (c->replies == c->total && c->fd >= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->fd = -1;
                open_conns--;
            }
        }
        if (t == 0 && report_s > 0 && now_ns() >= next_report) {
            report("kv");
            next_report += (long long)(report_s * 1e9);
        }
    }
    __atomic_add_fetch(&finished_threads, 1, __ATOMIC_SEQ_CST);
    if (t == 0)  /* keep reporting while the other threads finish */
        while (__atomic_load_n(&finished_threads, __ATOMIC_SEQ_CST) < nthreads) {
            usleep(100000);
            if (report_s > 0 && now_ns() >= next_report) {
                report("kv");
                next_report += (long long)(report_s * 1e9);
            }
        }
    return NULL;
}

int main(int argc, char **argv)
{
    nargs = argc - 1;
    args = argv + 1;
    const char *host = arg_str("host", "127.0.0.1");
    int port = arg_int("port", "6379");
    nconns = arg_int("conns", "4");
    nthreads = arg_int("threads", "1");
    pipeline_depth = arg_int("pipeline", "16");
    requests = arg_int("requests", "1000");
    key_min = arg_int("key_min", "0");
    key_max = arg_int("key_max", "9999");
    data_size = arg_int("data_size", "32");
    report_s = arg_float("report_s", "0");
    sequential = arg_int("sequential", "0");
    int marks = arg_int("marks", "1");
    uint64_t seed = arg_int("seed", "1");
    const char *ratio = arg_str("ratio", "1:1");
    sets_per_cycle = atoi(ratio);
    gets_per_cycle = strchr(ratio, ':') ? atoi(strchr(ratio, ':') + 1) : 0;
    if (nconns < 1 || nconns > MAX_CONNS || nthreads < 1 || nthreads > nconns || pipeline_depth < 1 ||
        key_max < key_min || data_size < 1 || sets_per_cycle + gets_per_cycle < 1) {
        dprintf(1, "@@tierlab error kv_load: bad arguments\n");
        return 2;
    }
    set_cpus(arg_str("cpus", ""));
    set_task_policy(parse_policy(arg_str("policy", "default")));

    value = malloc(data_size);
    memset(value, 'x', data_size);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        dprintf(1, "@@tierlab error kv_load: bad host %s\n", host);
        return 2;
    }
    for (int i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0)
            die("kv_load: socket");
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            die("kv_load: connect");
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        c->thread = i % nthreads;
        c->index = i;
        c->total = requests;
        c->rng = seed * 0x100000001b3ULL + i;
        c->out_cap = (size_t)pipeline_depth * (data_size + 64) + 4096;
        c->out = malloc(c->out_cap);
        if (!c->out)
            die("kv_load: malloc");
    }
    static pthread_t th[MAX_CONNS];
    long long t0 = now_ns();
    if (marks)
        dprintf(1, "@@tierlab start %lld\n", t0);
    for (long t = 0; t < nthreads; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)t) != 0)
            die("pthread_create");
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    long long t1 = now_ns();
    if (marks)
        report("kv");
    long long s = 0, g = 0, h = 0, m = 0, e = 0;
    for (int i = 0; i < nconns; i++) {
        s += conns[i].sets; g += conns[i].gets; h += conns[i].hits; m += conns[i].misses; e += conns[i].errors;
    }
    double secs = (t1 - t0) / 1e9;
    dprintf(1, "@@tierlab %s seconds=%.3f ops=%lld ops_per_s=%.1f sets=%lld gets=%lld hits=%lld "
            "misses=%lld errors=%lld\n", marks ? "kv-result" : "kv-fill", secs, s + g, (s + g) / secs, s, g, h, m, e);
    if (marks)
        dprintf(1, "@@tierlab done %lld %lld\n", t1, h);
    if (arg_int("stop", "0"))
        raise(SIGSTOP);
    return 0;
}
