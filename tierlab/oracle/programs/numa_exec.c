/* Run a command on given CPUs under a given memory policy, as `numactl --physcpubind --membind`
 * would (busybox has no numactl): sched_setaffinity and set_mempolicy, then execv. Both are
 * inherited across fork and exec, so the command's children (Redis's BGSAVE child) keep them.
 *
 * usage: tierlab-numa-exec cpus=0 policy=default -- /path/to/program args...
 *   cpus:   a CPU list (0, 0-1, 0,2); empty: leave the affinity alone
 *   policy: tierlab's policy syntax (common.h): default, bind:0,1, preferred:1, interleave:0,1,
 *           bind|numa_balancing:0,1 (MPOL_F_NUMA_BALANCING)
 */
#include "common.h"
#include <sched.h>

int main(int argc, char **argv)
{
    int sep = 1;
    while (sep < argc && strcmp(argv[sep], "--"))
        sep++;
    if (sep + 1 >= argc) {
        dprintf(1, "@@tierlab error numa_exec: usage: tierlab-numa-exec cpus=.. policy=.. -- program args\n");
        return 2;
    }
    nargs = sep - 1;
    args = argv + 1;
    set_cpus(arg_str("cpus", ""));
    set_task_policy(parse_policy(arg_str("policy", "default")));
    execv(argv[sep + 1], argv + sep + 1);
    die("numa_exec: execv");
    return 1;
}
