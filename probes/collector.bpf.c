// evlab's kernel observer (BCC). Loaded once per session by probes/bcc_collector.py and
// retargeted per invocation by writing the config map — never by recompiling.
// Every number Python reads back is defined in probes/collector_abi.py and passed as -D flags:
// counter ids (CTR_*), event kinds (EV_*), file operations (FOP_*), egress call kinds (EG_*),
// MAX_FUNCS, SYSCALL_SLOTS, BUSY_MIN_NS and PATH_MAX_LEN; none is defined here.
//
// Who is watched: a process the launcher (the evlab runner) forks while armed, and what it
// forks, is pending; the first exec of the client's path among them becomes tracked (the
// sandbox's launcher chain runs first); anything a tracked process forks or clones is tracked
// too. Egress is watched at the socket layer by programs attached to the client's own cgroup
// (end of this file), whatever syscall or io_uring submission produced it.
// Attribution is by process tree, never by name. Every probe returns early for untracked
// tasks after one hash lookup, so the cost for the rest of the machine is that lookup.
//
// Tracepoints only (this kernel has no kprobes); raw_syscalls covers every byte-moving
// syscall with one enter and one exit program; x86-64 syscall numbers.
#include <uapi/linux/ptrace.h>
#include <linux/socket.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/fcntl.h>
#include <asm/unistd_64.h>
#include <uapi/linux/bpf.h>
#include <linux/ip.h>

struct config {
    u32 launcher_tgid;    // the runner's pid: its forks are candidates while armed
    u32 armed_inv;        // invocation id for the next launch; 0 = not armed
    u32 source_len;       // bytes in source_path, without the NUL
    u32 client_len;       // bytes in client_path: only an exec of this path is the client
    char source_path[PATH_MAX_LEN];
    char client_path[PATH_MAX_LEN];
};
BPF_ARRAY(config, struct config, 1);

BPF_HASH(tracked, u32, u32, 8192);        // tid or tgid -> invocation id
BPF_HASH(pending_exec, u32, u32, 1024);   // forked by the launcher, counted from exec on
BPF_HASH(parent_of, u32, u32, 8192);      // tracked tgid -> tracked parent tgid (fd inheritance)

struct ckey { u32 inv; u32 id; };
BPF_PERCPU_HASH(counters, struct ckey, u64, 16384);

enum fd_kind { FD_OTHER = 0, FD_SOURCE = 1, FD_SOCKET = 2 };
struct fdkey { u32 tgid; s32 fd; };
BPF_HASH(fd_kinds, struct fdkey, u8, 65536);

struct inflight {
    u64 nr;
    s64 fd;           // the descriptor read from / written to (in_fd for sendfile/splice)
    s64 fd2;          // the other end for sendfile/splice, old fd for dup
    u8 source_open;   // an open of the source path
    u16 family;
    u16 port;
    u8 addr[16];
    u64 path;         // file syscalls: the user pointer to the path (new path for rename)
    u64 path2;        // rename: the old path
    s32 dfd;          // the directory fd a relative path is resolved against
    s32 dfd2;         // rename: the old path's directory fd
    u32 flags;        // open flags; unlinkat's AT_REMOVEDIR
};
BPF_HASH(inflight, u32, struct inflight, 8192);
// On-CPU clock of each tracked task: when it last went on the CPU (0 = off it), how long it
// has run since its last syscall that makes progress (see is_progress below), and how much of
// that the kernel spent in softirqs on its time (loopback traffic of other processes, say).
struct task_clock { u64 on_since; u64 stretch; u64 softirq; };
BPF_PERCPU_ARRAY(softirq_since, u64, 1);   // a softirq running on a tracked task's time
BPF_HASH(clocks, u32, struct task_clock, 8192);
// Tasks alive per invocation, and the process evlab launched: when that process ends, the
// tasks still alive are its leftovers (the sandbox's pid namespace then kills them).
BPF_HASH(live, u32, s64, 1024);
BPF_HASH(roots, u32, u32, 1024);
// Invocations whose tree has opened the source: stretches before that are start-up (an
// interpreter loading itself), judged apart from those during the work.
BPF_HASH(source_seen, u32, u8, 1024);
BPF_PERCPU_ARRAY(scratch, struct config, 1);

struct event {
    u64 ts;
    u32 inv;
    u32 kind;         // EV_CONNECT, EV_EXEC, EV_FORK, EV_EXIT or EV_EGRESS
    u32 tgid;
    u32 tid;
    u32 other;        // fork: child pid; exec: old pid;
                      // egress: call kind (EG_*) << 16 | socket type << 8 | IP protocol
    s32 ret;          // connect: 0 or -errno; exit: 1 for the launched process;
                      // egress: -1 when refused
    u16 family;
    u16 port;
    u8 addr[16];
    char comm[16];
    char filename[64];
};
BPF_RINGBUF_OUTPUT(events, 64);

// File operations of the tracked tree, for risk findings: successful opens (with their flags)
// and refused opens for writing, unlinks, rmdirs, renames, mkdirs, truncates, and chdirs (to
// resolve relative paths). Their own ring: the paths make them 10x larger than the other
// events, and an interpreter's start-up opens dozens of files in a burst.
struct file_event {
    u64 ts;
    u32 inv;
    u32 op;           // FOP_OPEN, FOP_UNLINK, FOP_RMDIR, FOP_RENAME, ... FOP_FCHDIR
    u32 tgid;
    u32 tid;
    s32 dfd;
    s32 dfd2;
    u32 flags;
    s32 ret;          // open: the new descriptor (so *at() calls on it can be resolved)
    char comm[16];
    char path[256];
    char path2[256];
};
BPF_RINGBUF_OUTPUT(file_events, 128);

static __always_inline void add(u32 inv, u32 id, u64 n)
{
    struct ckey k = { .inv = inv, .id = id };
    u64 zero = 0;
    u64 *v = counters.lookup_or_try_init(&k, &zero);
    if (v)
        *v += n;
}

static __always_inline struct event *reserve(u32 inv)
{
    struct event *e = events.ringbuf_reserve(sizeof(struct event));
    if (!e) {
        add(inv, CTR_LOST_EVENTS, 1);
        return 0;
    }
    __builtin_memset(e, 0, sizeof(*e));
    e->ts = bpf_ktime_get_ns();
    e->inv = inv;
    u64 id = bpf_get_current_pid_tgid();
    e->tgid = id >> 32;
    e->tid = (u32)id;
    bpf_get_current_comm(e->comm, sizeof(e->comm));
    return e;
}

// What kind of file is fd in tgid? A forked child inherits its parent's descriptors, so look
// up the parent chain when the child has no entry of its own (closes leave an FD_OTHER mark).
static __always_inline u8 fd_kind(u32 tgid, s64 fd)
{
    struct fdkey k = { .tgid = tgid, .fd = (s32)fd };
#pragma unroll
    for (int depth = 0; depth < 4; depth++) {
        u8 *kind = fd_kinds.lookup(&k);
        if (kind)
            return *kind;
        u32 *parent = parent_of.lookup(&k.tgid);
        if (!parent)
            return FD_OTHER;
        k.tgid = *parent;
    }
    return FD_OTHER;
}

static __always_inline void set_fd_kind(u32 tgid, s64 fd, u8 kind)
{
    struct fdkey k = { .tgid = tgid, .fd = (s32)fd };
    fd_kinds.update(&k, &kind);
}

static __always_inline int is_source_path(const char *user_path)
{
    int zero = 0;
    struct config *cfg = config.lookup(&zero);
    struct config *buf = scratch.lookup(&zero);
    if (!cfg || !buf || cfg->source_len == 0)
        return 0;
    int n = bpf_probe_read_user_str(buf->source_path, sizeof(buf->source_path), user_path);
    if (n != cfg->source_len + 1)
        return 0;
    for (int i = 0; i < PATH_MAX_LEN; i++) {
        if (i >= cfg->source_len)
            return 1;
        if (buf->source_path[i] != cfg->source_path[i])
            return 0;
    }
    return 1;
}

static __always_inline void emit_file(u32 inv, struct inflight *f, u32 op, s64 ret)
{
    add(inv, CTR_FILE_OPS, 1);
    struct file_event *e = file_events.ringbuf_reserve(sizeof(struct file_event));
    if (!e) {
        add(inv, CTR_LOST_EVENTS, 1);
        return;
    }
    e->ts = bpf_ktime_get_ns();
    e->inv = inv;
    e->op = op;
    u64 id = bpf_get_current_pid_tgid();
    e->tgid = id >> 32;
    e->tid = (u32)id;
    e->dfd = f->dfd;
    e->dfd2 = f->dfd2;
    e->flags = f->flags;
    e->ret = (s32)ret;
    bpf_get_current_comm(e->comm, sizeof(e->comm));
    e->path[0] = 0;
    e->path2[0] = 0;
    if (f->path)
        bpf_probe_read_user_str(e->path, sizeof(e->path), (const void *)f->path);
    if (f->path2)
        bpf_probe_read_user_str(e->path2, sizeof(e->path2), (const void *)f->path2);
    file_events.ringbuf_submit(e, 0);
}

static __always_inline void read_sockaddr(struct inflight *f, const void *uaddr)
{
    u16 family = 0;
    bpf_probe_read_user(&family, sizeof(family), uaddr);
    f->family = family;
    if (family == AF_INET) {
        struct sockaddr_in sin = {};
        bpf_probe_read_user(&sin, sizeof(sin), uaddr);
        f->port = ntohs(sin.sin_port);
        __builtin_memcpy(f->addr, &sin.sin_addr.s_addr, 4);
    } else if (family == AF_INET6) {
        struct sockaddr_in6 sin6 = {};
        bpf_probe_read_user(&sin6, sizeof(sin6), uaddr);
        f->port = ntohs(sin6.sin6_port);
        __builtin_memcpy(f->addr, &sin6.sin6_addr, 16);
    }
}

// Busy-work: on-CPU time a task spends between two syscalls that make progress. Spinning,
// or re-hashing a buffer in a loop, runs for long stretches without one; real work (reading,
// sending, waiting, even an interpreter starting up) enters the kernel every few hundred µs.
// Time passed preempted does not count (the clock stops at switch-out), so machine load does
// not lengthen a stretch. Calls that only look at the clock, yield or sleep do not end one
// (sleeping costs no CPU, so it cannot lengthen a stretch either).
static __always_inline int is_progress(u64 nr)
{
    switch (nr) {
    case __NR_sched_yield: case __NR_getpid: case __NR_gettid: case __NR_getppid:
    case __NR_clock_gettime: case __NR_gettimeofday: case __NR_time: case __NR_getrusage:
    case __NR_times: case __NR_clock_getres: case __NR_nanosleep: case __NR_clock_nanosleep:
    case __NR_pause:
        return 0;
    }
    return 1;
}

static __always_inline void end_stretch(u32 inv, struct task_clock *c, u64 now)
{
    u64 run = c->stretch;
    if (c->on_since) {
        add(inv, CTR_ONCPU_NS, now - c->on_since);
        run += now - c->on_since;
        c->on_since = now;
    }
    run = run > c->softirq ? run - c->softirq : 0;   // not the task's own computing
    c->stretch = 0;
    c->softirq = 0;
    if (run >= BUSY_MIN_NS) {
        add(inv, CTR_BUSY_NS, run);
        add(inv, CTR_BUSY_STRETCHES, 1);
    }
    u32 id = source_seen.lookup(&inv) ? CTR_BUSY_MAX_NS : CTR_BUSY_START_MAX_NS;
    struct ckey k = { .inv = inv, .id = id };   // per-CPU maximum, merged by max
    u64 zero = 0;
    u64 *max = counters.lookup_or_try_init(&k, &zero);
    if (max && run > *max)
        *max = run;
}

static __always_inline int track(u32 tid, u32 inv, u64 now)
{
    if (tracked.update(&tid, &inv))
        return -1;
    struct task_clock c = { .on_since = now };
    clocks.update(&tid, &c);
    s64 one = 1, *n = live.lookup(&inv);
    if (n)
        __sync_fetch_and_add(n, 1);
    else
        live.update(&inv, &one);
    return 0;
}

TRACEPOINT_PROBE(raw_syscalls, sys_enter)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32, tid = (u32)id;
    u32 *inv = tracked.lookup(&tgid);
    if (!inv)
        return 0;
    u64 nr = args->id;
    add(*inv, CTR_SYSCALLS, 1);
    add(*inv, CTR_SYSCALL_BASE + (u32)(nr & (SYSCALL_SLOTS - 1)), 1);
    if (is_progress(nr)) {
        struct task_clock *c = clocks.lookup(&tid);
        if (c)
            end_stretch(*inv, c, bpf_ktime_get_ns());
    }

    struct inflight f = { .nr = nr, .fd = (s64)args->args[0] };
    switch (nr) {
    case __NR_read: case __NR_pread64: case __NR_readv: case __NR_preadv: case __NR_preadv2:
    case __NR_recvfrom: case __NR_recvmsg:
    case __NR_write: case __NR_pwrite64: case __NR_writev: case __NR_pwritev: case __NR_pwritev2:
    case __NR_sendto: case __NR_sendmsg:
    case __NR_close: case __NR_socket: case __NR_accept: case __NR_accept4:
    case __NR_dup: case __NR_dup2: case __NR_dup3:
        break;
    case __NR_mmap:            // mmap(addr, len, prot, flags, fd, off): a mapped source
        f.fd = (s64)args->args[4];
        break;
    case __NR_sendfile:        // sendfile(out_fd, in_fd, ...): bytes move in_fd -> out_fd
        f.fd = (s64)args->args[1];
        f.fd2 = (s64)args->args[0];
        break;
    case __NR_splice:          // splice(fd_in, off_in, fd_out, ...)
        f.fd2 = (s64)args->args[2];
        break;
    case __NR_open:
        f.source_open = is_source_path((const char *)args->args[0]);
        f.path = args->args[0];
        f.dfd = AT_FDCWD;
        f.flags = (u32)args->args[1];
        break;
    case __NR_creat:
        f.path = args->args[0];
        f.dfd = AT_FDCWD;
        f.flags = O_CREAT | O_WRONLY | O_TRUNC;
        break;
    case __NR_openat:
        f.source_open = is_source_path((const char *)args->args[1]);
        f.path = args->args[1];
        f.dfd = (s32)args->args[0];
        f.flags = (u32)args->args[2];
        break;
    case __NR_openat2: {
        u64 how_flags = 0;   // struct open_how starts with its u64 flags
        bpf_probe_read_user(&how_flags, sizeof(how_flags), (const void *)args->args[2]);
        f.source_open = is_source_path((const char *)args->args[1]);
        f.path = args->args[1];
        f.dfd = (s32)args->args[0];
        f.flags = (u32)how_flags;
        break;
    }
    case __NR_unlink: case __NR_rmdir: case __NR_mkdir: case __NR_truncate: case __NR_chdir:
        f.path = args->args[0];
        f.dfd = AT_FDCWD;
        break;
    case __NR_fchdir:          // the new cwd is a descriptor's directory: reported unresolved
        f.dfd = (s32)args->args[0];
        break;
    case __NR_unlinkat: case __NR_mkdirat:
        f.path = args->args[1];
        f.dfd = (s32)args->args[0];
        f.flags = nr == __NR_unlinkat ? (u32)args->args[2] : 0;
        break;
    case __NR_rename:
        f.path2 = args->args[0];
        f.path = args->args[1];
        f.dfd = f.dfd2 = AT_FDCWD;
        break;
    case __NR_renameat: case __NR_renameat2:   // (olddfd, old, newdfd, new)
        f.path2 = args->args[1];
        f.dfd2 = (s32)args->args[0];
        f.path = args->args[3];
        f.dfd = (s32)args->args[2];
        break;
    case __NR_connect:
        add(*inv, CTR_CONNECTS, 1);
        read_sockaddr(&f, (const void *)args->args[1]);
        break;
    default:
        return 0;
    }
    inflight.update(&tid, &f);
    return 0;
}

TRACEPOINT_PROBE(raw_syscalls, sys_exit)
{
    u64 id = bpf_get_current_pid_tgid();
    u32 tgid = id >> 32, tid = (u32)id;
    struct inflight *f = inflight.lookup(&tid);
    if (!f)
        return 0;
    u32 *inv = tracked.lookup(&tgid);
    if (!inv) {
        inflight.delete(&tid);
        return 0;
    }
    s64 ret = args->ret;
    u64 nr = f->nr;
    u8 kind;
    switch (nr) {
    case __NR_read: case __NR_pread64: case __NR_readv: case __NR_preadv: case __NR_preadv2:
        if (ret > 0) {
            add(*inv, CTR_READ_CALLS, 1);
            add(*inv, CTR_READ_BYTES, ret);
            kind = fd_kind(tgid, f->fd);
            if (kind == FD_SOURCE)
                add(*inv, CTR_SOURCE_READ_BYTES, ret);
            else if (kind == FD_SOCKET)
                add(*inv, CTR_SOCK_RECV_BYTES, ret);
        }
        break;
    case __NR_recvfrom: case __NR_recvmsg:
        if (ret > 0) {
            add(*inv, CTR_READ_CALLS, 1);
            add(*inv, CTR_READ_BYTES, ret);
            add(*inv, CTR_SOCK_RECV_BYTES, ret);
        }
        break;
    case __NR_write: case __NR_pwrite64: case __NR_writev: case __NR_pwritev: case __NR_pwritev2:
        if (ret > 0) {
            add(*inv, CTR_WRITE_BYTES, ret);
            if (fd_kind(tgid, f->fd) == FD_SOCKET)
                add(*inv, CTR_SOCK_SENT_BYTES, ret);
        }
        break;
    case __NR_sendto: case __NR_sendmsg:
        if (ret > 0) {
            add(*inv, CTR_WRITE_BYTES, ret);
            add(*inv, CTR_SOCK_SENT_BYTES, ret);
        }
        break;
    case __NR_sendfile: case __NR_splice:
        if (ret > 0) {
            add(*inv, CTR_READ_BYTES, ret);
            add(*inv, CTR_WRITE_BYTES, ret);
            kind = fd_kind(tgid, f->fd);
            if (kind == FD_SOURCE)
                add(*inv, CTR_SOURCE_READ_BYTES, ret);
            else if (kind == FD_SOCKET)
                add(*inv, CTR_SOCK_RECV_BYTES, ret);
            if (fd_kind(tgid, f->fd2) == FD_SOCKET)
                add(*inv, CTR_SOCK_SENT_BYTES, ret);
        }
        break;
    case __NR_open: case __NR_openat: case __NR_openat2: case __NR_creat:
        if (ret >= 0) {
            set_fd_kind(tgid, ret, f->source_open ? FD_SOURCE : FD_OTHER);
            if (f->source_open) {
                u8 one = 1;
                add(*inv, CTR_SOURCE_OPENS, 1);
                source_seen.update(inv, &one);
            }
            emit_file(*inv, f, FOP_OPEN, ret);
        } else if (f->flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) {
            emit_file(*inv, f, FOP_OPEN, ret);   // a write the sandbox refused: still an attempt
        }
        break;
    case __NR_unlink: case __NR_unlinkat:
        if (ret == 0)
            emit_file(*inv, f, (f->flags & AT_REMOVEDIR) ? FOP_RMDIR : FOP_UNLINK, ret);
        break;
    case __NR_rmdir:
        if (ret == 0)
            emit_file(*inv, f, FOP_RMDIR, ret);
        break;
    case __NR_rename: case __NR_renameat: case __NR_renameat2:
        if (ret == 0)
            emit_file(*inv, f, FOP_RENAME, ret);
        break;
    case __NR_mkdir: case __NR_mkdirat:
        if (ret == 0)
            emit_file(*inv, f, FOP_MKDIR, ret);
        break;
    case __NR_truncate:
        if (ret == 0)
            emit_file(*inv, f, FOP_TRUNCATE, ret);
        break;
    case __NR_chdir:           // relative paths after it resolve against the new directory
        if (ret == 0)
            emit_file(*inv, f, FOP_CHDIR, ret);
        break;
    case __NR_fchdir:
        if (ret == 0)
            emit_file(*inv, f, FOP_FCHDIR, ret);
        break;
    case __NR_mmap:            // reads through the mapping are page faults, not syscalls
        if (ret >= 0 && f->fd >= 0 && fd_kind(tgid, f->fd) == FD_SOURCE)
            add(*inv, CTR_SOURCE_MMAPS, 1);
        break;
    case __NR_socket: case __NR_accept: case __NR_accept4:
        if (ret >= 0)
            set_fd_kind(tgid, ret, FD_SOCKET);
        break;
    case __NR_dup: case __NR_dup2: case __NR_dup3:
        if (ret >= 0)
            set_fd_kind(tgid, ret, fd_kind(tgid, f->fd));
        break;
    case __NR_close:
        if (ret == 0)
            set_fd_kind(tgid, f->fd, FD_OTHER);
        break;
    case __NR_connect: {
        struct event *e = reserve(*inv);
        if (e) {
            e->kind = EV_CONNECT;
            e->ret = (s32)ret;
            e->family = f->family;
            e->port = f->port;
            __builtin_memcpy(e->addr, f->addr, 16);
            events.ringbuf_submit(e, 0);
        }
        break;
    }
    }
    inflight.delete(&tid);
    return 0;
}

TRACEPOINT_PROBE(sched, sched_process_fork)
{
    u32 tgid = bpf_get_current_pid_tgid() >> 32;   // runs in the parent's context
    u32 child = args->child_pid;
    u32 *inv = tracked.lookup(&tgid);
    if (inv) {
        u32 v = *inv;
        if (track(child, v, 0))
            add(v, CTR_LOST_EVENTS, 1);   // a child we cannot follow: the view is incomplete
        parent_of.update(&child, &tgid);
        add(v, CTR_FORKS, 1);
        struct event *e = reserve(v);
        if (e) {
            e->kind = EV_FORK;
            e->other = child;
            events.ringbuf_submit(e, 0);
        }
        return 0;
    }
    // A process the launcher forked while armed, and whatever it forks in turn (the sandbox's
    // launcher chain: a shell, setpriv, bwrap and its pid-namespace init), waits for the exec
    // of the client's path.
    u32 *pending = pending_exec.lookup(&tgid);
    if (pending) {
        u32 v = *pending;
        pending_exec.update(&child, &v);
        return 0;
    }
    int zero = 0;
    struct config *cfg = config.lookup(&zero);
    if (cfg && cfg->armed_inv && tgid == cfg->launcher_tgid) {
        u32 v = cfg->armed_inv;
        pending_exec.update(&child, &v);
    }
    return 0;
}

TRACEPOINT_PROBE(sched, sched_process_exec)
{
    u32 pid = args->pid;
    u32 *inv = tracked.lookup(&pid);
    u32 v;
    if (inv) {
        v = *inv;
    } else {
        u32 *pending = pending_exec.lookup(&pid);
        if (!pending)
            return 0;
        v = *pending;
        // Only an exec of the configured client path is the client: the sandbox's own
        // programs stay pending, and a same-name twin forked by another thread of the
        // launcher (e.g. noise) is never taken for it.
        int zero = 0;
        struct config *cfg = config.lookup(&zero);
        struct config *buf = scratch.lookup(&zero);
        if (!cfg || !buf)
            return 0;
        if (cfg->client_len) {
            TP_DATA_LOC_READ_STR(buf->client_path, filename, sizeof(buf->client_path));
            for (int i = 0; i < PATH_MAX_LEN; i++) {  // both NUL-terminated: equal up to NUL
                char c = buf->client_path[i];
                if (c != cfg->client_path[i])
                    return 0;
                if (c == 0)
                    break;
            }
        }
        pending_exec.delete(&pid);
        track(pid, v, bpf_ktime_get_ns());   // exec runs on the CPU: start its clock now
        roots.update(&v, &pid);
    }
    add(v, CTR_EXECS, 1);
    struct event *e = reserve(v);
    if (e) {
        e->kind = EV_EXEC;
        e->other = args->old_pid;
        TP_DATA_LOC_READ_STR(e->filename, filename, sizeof(e->filename));
        events.ringbuf_submit(e, 0);
    }
    return 0;
}

TRACEPOINT_PROBE(sched, sched_process_exit)
{
    u32 tid = args->pid;
    pending_exec.delete(&tid);
    u32 *inv = tracked.lookup(&tid);
    if (!inv)
        return 0;
    u32 v = *inv;
    struct task_clock *c = clocks.lookup(&tid);
    if (c) {
        end_stretch(v, c, bpf_ktime_get_ns());   // a task killed mid-spin ends its stretch here
        clocks.delete(&tid);
    }
    s64 left = 0, *n = live.lookup(&v);
    if (n)
        left = __sync_fetch_and_add(n, -1) - 1;
    if (args->group_dead) {
        u32 tgid = bpf_get_current_pid_tgid() >> 32;
        u32 *root = roots.lookup(&v);
        int is_root = root && *root == tgid;
        if (is_root)
            add(v, CTR_LEFTOVER_TASKS, left > 0 ? left : 0);
        struct event *e = reserve(v);
        if (e) {
            e->kind = EV_EXIT;
            e->ret = is_root;
            events.ringbuf_submit(e, 0);
        }
    }
    // The pid may be reused by an unrelated process: forget it now. parent_of stays until
    // the collector clears the invocation, so a still-running child can resolve fds.
    tracked.delete(&tid);
    return 0;
}

TRACEPOINT_PROBE(sched, sched_switch)
{
    u32 prev = args->prev_pid, next = args->next_pid;
    u64 now = 0;
    u32 *inv = tracked.lookup(&prev);
    if (inv) {
        now = bpf_ktime_get_ns();
        add(*inv, CTR_SWITCHES_OUT, 1);
        struct task_clock *c = clocks.lookup(&prev);
        if (c && c->on_since) {
            add(*inv, CTR_ONCPU_NS, now - c->on_since);
            c->stretch += now - c->on_since;
            c->on_since = 0;
        }
    }
    if (tracked.lookup(&next)) {
        if (!now)
            now = bpf_ktime_get_ns();
        struct task_clock *c = clocks.lookup(&next);
        if (c) {
            c->on_since = now;
        } else {
            struct task_clock fresh = { .on_since = now };
            clocks.update(&next, &fresh);
        }
    }
    return 0;
}

// Softirqs that run on a tracked task's time (the kernel charges them to whoever is current)
// are subtracted from its busy stretch: the rest of the machine's traffic is not its waste.
TRACEPOINT_PROBE(irq, softirq_entry)
{
    u32 tid = (u32)bpf_get_current_pid_tgid();
    if (!tid || !tracked.lookup(&tid))
        return 0;
    int zero = 0;
    u64 *since = softirq_since.lookup(&zero);
    if (since)
        *since = bpf_ktime_get_ns();
    return 0;
}

TRACEPOINT_PROBE(irq, softirq_exit)
{
    int zero = 0;
    u64 *since = softirq_since.lookup(&zero);
    if (!since || !*since)
        return 0;
    u64 took = bpf_ktime_get_ns() - *since;
    *since = 0;
    u32 tid = (u32)bpf_get_current_pid_tgid();
    struct task_clock *c = clocks.lookup(&tid);
    if (c) {
        c->softirq += took;
        u32 *inv = tracked.lookup(&tid);
        if (inv)
            add(*inv, CTR_SOFTIRQ_NS, took);
    }
    return 0;
}

// Function-entry counters: one program per slot; the loader attaches slot i to symbol i.
static __always_inline int count_func(u32 slot)
{
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    u32 *inv = tracked.lookup(&tgid);
    if (inv)
        add(*inv, CTR_FUNC_BASE + slot, 1);
    return 0;
}
#define FUNC_SLOT(i) int on_func_##i(struct pt_regs *ctx) { return count_func(i); }
FUNC_SLOT(0) FUNC_SLOT(1) FUNC_SLOT(2) FUNC_SLOT(3)
FUNC_SLOT(4) FUNC_SLOT(5) FUNC_SLOT(6) FUNC_SLOT(7)
#if MAX_FUNCS != 8
#error "MAX_FUNCS (probes/collector_abi.py) must be the number of FUNC_SLOTs above"
#endif

// --- Egress, at the socket layer of the client's cgroup -------------------------------------
// Attached by the loader to each invocation's cgroup: connect (TCP, and UDP connect), UDP
// sendmsg with a destination (sendto/sendmsg/sendmmsg on an unconnected socket, io_uring
// submissions alike), and every packet a socket of the cgroup emits. Aggregated in the kernel
// per destination; the first sighting of a destination is also a ring-buffer event.
struct cg_conf { u32 inv; u32 deny; };
BPF_HASH(cg_inv, u64, struct cg_conf, 256);       // client cgroup id -> invocation, mode
struct dest_key { u32 inv; u16 family; u16 port; u8 addr[16]; };
BPF_HASH(egress_allow, struct dest_key, u8, 256);  // what the contract allows (receiver, proxy)

struct egress_key { u32 inv; u32 pid; u16 kind; u16 family; u16 port; u16 proto; u8 addr[16]; };
struct egress_val { u64 calls; u64 refused; u64 first; u64 last; };
BPF_HASH(egress, struct egress_key, struct egress_val, 4096);

struct flow_key { u32 inv; u16 family; u16 port; u8 proto; u8 pad[3]; u8 addr[16]; };
struct flow_val { u64 packets; u64 bytes; u64 first; u64 last; u64 dropped; };
BPF_HASH(flows, struct flow_key, struct flow_val, 4096);

static __always_inline int allowed(u32 inv, u16 family, u16 port, const u8 *addr)
{
    struct dest_key k = { .inv = inv, .family = family, .port = port };
    __builtin_memcpy(k.addr, addr, 16);
    return egress_allow.lookup(&k) != 0;
}

static __always_inline int sock_addr(struct bpf_sock_addr *ctx, u16 kind, u16 family)
{
    u64 cg = bpf_get_current_cgroup_id();
    struct cg_conf *conf = cg_inv.lookup(&cg);
    if (!conf)
        return 1;
    u32 inv = conf->inv;
    struct egress_key k = { .inv = inv, .kind = kind, .family = family };
    k.pid = bpf_get_current_pid_tgid() >> 32;
    k.port = ntohs((u16)ctx->user_port);
    k.proto = (u16)(ctx->type << 8 | (ctx->protocol & 0xff));
    if (family == AF_INET) {
        u32 ip = ctx->user_ip4;
        __builtin_memcpy(k.addr, &ip, 4);
    } else {
        u32 ip6[4];
        ip6[0] = ctx->user_ip6[0];
        ip6[1] = ctx->user_ip6[1];
        ip6[2] = ctx->user_ip6[2];
        ip6[3] = ctx->user_ip6[3];
        __builtin_memcpy(k.addr, ip6, 16);
    }
    int ok = allowed(inv, family, k.port, k.addr);
    int refuse = !ok && conf->deny;
    u64 now = bpf_ktime_get_ns();
    struct egress_val *v = egress.lookup(&k);
    if (v) {
        __sync_fetch_and_add(&v->calls, 1);
        if (refuse)
            __sync_fetch_and_add(&v->refused, 1);
        v->last = now;
    } else {
        struct egress_val fresh = { .calls = 1, .refused = refuse, .first = now, .last = now };
        if (egress.update(&k, &fresh))
            add(inv, CTR_EGRESS_LOST, 1);   // the totals are incomplete: never a pass
        struct event *e = reserve(inv);
        if (e) {
            e->kind = EV_EGRESS;
            e->family = family;
            e->port = k.port;
            e->other = k.proto | (u32)kind << 16;
            e->ret = refuse ? -1 : 0;   // -EPERM for the caller
            __builtin_memcpy(e->addr, k.addr, 16);
            events.ringbuf_submit(e, 0);
        }
    }
    return refuse ? 0 : 1;
}

int egress_connect4(struct bpf_sock_addr *ctx) { return sock_addr(ctx, EG_CONNECT, AF_INET); }
int egress_connect6(struct bpf_sock_addr *ctx) { return sock_addr(ctx, EG_CONNECT, AF_INET6); }
int egress_sendmsg4(struct bpf_sock_addr *ctx) { return sock_addr(ctx, EG_SENDMSG, AF_INET); }
int egress_sendmsg6(struct bpf_sock_addr *ctx) { return sock_addr(ctx, EG_SENDMSG, AF_INET6); }

// Every packet a socket of the cgroup emits, by the destination in its own headers (an
// unconnected socket's datagrams carry no peer in the socket): packets, payload bytes (after the
// IP and TCP/UDP headers), first and last.
int egress_packets(struct __sk_buff *skb)
{
    u64 cg = bpf_skb_cgroup_id(skb);
    struct cg_conf *conf = cg_inv.lookup(&cg);
    if (!conf)
        return 1;
    struct flow_key k = { .inv = conf->inv };
    u8 vihl = 0;
    if (bpf_skb_load_bytes(skb, 0, &vihl, 1))
        return 1;
    u32 l4 = 0;
    if ((vihl >> 4) == 4) {
        k.family = AF_INET;
        bpf_skb_load_bytes(skb, 9, &k.proto, 1);
        bpf_skb_load_bytes(skb, 16, k.addr, 4);
        l4 = (vihl & 0xf) * 4;
    } else if ((vihl >> 4) == 6) {
        k.family = AF_INET6;
        bpf_skb_load_bytes(skb, 6, &k.proto, 1);
        bpf_skb_load_bytes(skb, 24, k.addr, 16);
        l4 = 40;
    }
    u32 header = l4;   // bytes before the transport payload
    if (k.proto == IPPROTO_TCP || k.proto == IPPROTO_UDP) {
        u16 port = 0;
        bpf_skb_load_bytes(skb, l4 + 2, &port, 2);
        k.port = ntohs(port);
        u8 doff = 0x50;   // TCP data offset (words) in the high nibble; UDP: 8 bytes
        if (k.proto == IPPROTO_TCP)
            bpf_skb_load_bytes(skb, l4 + 12, &doff, 1);
        header += k.proto == IPPROTO_TCP ? (doff >> 4) * 4 : 8;
    }
    u64 payload = skb->len > header ? skb->len - header : 0;
    int drop = conf->deny && !allowed(conf->inv, k.family, k.port, k.addr);
    u64 now = bpf_ktime_get_ns();
    struct flow_val *v = flows.lookup(&k);
    if (v) {
        __sync_fetch_and_add(&v->packets, 1);
        __sync_fetch_and_add(&v->bytes, payload);
        if (drop)
            __sync_fetch_and_add(&v->dropped, 1);
        v->last = now;
    } else {
        struct flow_val fresh = { .packets = 1, .bytes = payload, .first = now, .last = now,
                                  .dropped = drop };
        if (flows.update(&k, &fresh))
            add(conf->inv, CTR_EGRESS_LOST, 1);
    }
    return drop ? 0 : 1;
}
