/* tierlab's `file-read` workload in a real kernel (tierlab/workloads/file_read.py).
 *
 * Each task (a thread; tierlab's tasks share one mm) reads its own file DIR/fileT from start to
 * end in read() calls of read_size bytes into an anonymous buffer, `cycles` times, with a MARK at
 * the end of each pass. With warmup=1 it first writes every page of the buffer and reads the file
 * once (the set-up pass, itself ending with a MARK). The page cache follows file_policy (the task's
 * policy: page-cache folios are allocated under the reading task's mempolicy), the buffer
 * buffer_policy (mbind).
 *
 * args: dir= file_size= read_size= cycles= tasks= file_policy= buffer_policy= warmup=
 */
#include "common.h"

static const char *dir;
static long long file_size, read_size, cycles, warmup;
static struct policy file_policy, buffer_policy;

static void read_pass(int fd, char *buf, int task)
{
    long long done = 0;
    while (done < file_size) {
        ssize_t n = pread(fd, buf, read_size, done);
        if (n <= 0)
            die("read");
        checksum[task] += (unsigned char)buf[0];
        done += n;
    }
}

static void *task_main(void *arg)
{
    int t = (int)(long)arg, marks = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/file%d", dir, t);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die(path);
    set_task_policy(file_policy);
    char *buf = mmap(NULL, read_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        die("mmap buffer");
    bind_region(buf, read_size, buffer_policy, file_policy.mode != MPOL_DEFAULT);
    if (warmup) {
        for (long long i = 0; i < read_size; i += PAGE)
            buf[i] = 1;
        read_pass(fd, buf, t);
        mark(t, marks++);
    }
    for (long long c = 0; c < cycles; c++) {
        read_pass(fd, buf, t);
        mark(t, marks++);
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    nargs = argc - 1;
    args = argv + 1;
    dir = arg_str("dir", "/mnt");
    file_size = arg_int("file_size", NULL);
    read_size = arg_int("read_size", NULL);      /* already capped at MAX_RW_COUNT and file_size */
    cycles = arg_int("cycles", NULL);
    warmup = arg_int("warmup", "1");
    int tasks = (int)arg_int("tasks", "1");
    file_policy = parse_policy(arg_str("file_policy", "default"));
    buffer_policy = parse_policy(arg_str("buffer_policy", "default"));
    run_tasks(tasks, task_main);
    return 0;
}
