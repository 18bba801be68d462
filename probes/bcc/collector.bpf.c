// evlab's kernel observer (BCC). Loaded once per session by probes/bcc/collector.py and
// retargeted per invocation by writing the config map — never by recompiling.
// Every number Python reads back is defined in probes/bcc/abi.py and passed as -D flags:
// counter ids (CTR_*), event kinds (EV_*), file operations (FOP_*), egress call kinds (EG_*),
// MAX_FUNCS, SYSCALL_SLOTS, COUNTER_SPACE, INV_SLOTS, BUSY_MIN_NS and PATH_MAX_LEN; none is
// defined here.
//
// Who is watched: a process the launcher (the evlab runner) forks while armed, and what it
// forks, is pending; the first exec of the client's path among them becomes tracked (the
// sandbox's launcher chain runs first); anything a tracked process forks or clones is tracked
// too. Egress is watched at the socket layer by programs attached to the client's own cgroup
// (end of this file), whatever syscall or io_uring submission produced it.
// Attribution is by process tree, never by name.
//
// What it costs (this kernel has no kprobes and no fentry; it has tp_btf): one program runs
// on every syscall of the machine, on raw_syscalls' sys_exit (BTF-typed, loaded by
// probes/bcc/btf.py; the functions named btf_*), and for a task that is not tracked it
// returns after one lookup in the tid-keyed `tasks` hash (lock-free for a lookup). The
// syscall's arguments are read from its saved registers at exit, so nothing runs at sys_enter.
// A tracked task's state lives in `tasks`; its invocation's counters are a per-CPU array slot
// (INV_SLOTS of them, assigned by Python), so the tracked path does no further hash lookup
// for a read(2). sched_switch (tp_btf) costs the rest of the machine two lookups, the softirq
// raw tracepoints one each. x86-64 syscall numbers and registers.
// Headers that stay in uapi: linux/ip.h, linux/in.h and linux/socket.h pull in much of the
// kernel's own headers, which took 1.4 of the 1.5 s this file took to compile. The few
// constants they gave are ABI, so they are written here. So is struct pt_regs, x86-64's saved
// registers (the layout ptrace(2) also gives): uapi/linux/ptrace.h pulls in the kernel's
// asm/ptrace.h and its page headers (~20 ms of the compile).
struct pt_regs {
    unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax,
        ip, cs, flags, sp, ss;
};
#include <uapi/linux/fcntl.h>
#include <asm/unistd_64.h>
#include <uapi/linux/bpf.h>
#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define EVLAB_SOCK_DGRAM 2   // socket(2)'s type: linux/net.h's enum sock_type, not in the UAPI
// bpf_probe_read_user and bpf_probe_read_user_str under names of their own (use these): at
// each call to a helper of those names, BCC 0.26's rewriter checks that the kernel has it by
// rebuilding a table of all of /proc/kallsyms, ~25 ms a call site (0.2 s of this file's
// compile). The kernels evlab runs on (5.15+, tp_btf) have it, and BCC then leaves the call as
// written: the programs' instructions are the same byte for byte.
static int (*read_user)(void *dst, u32 size, const void *unsafe_ptr) =
    (void *)BPF_FUNC_probe_read_user;
static int (*read_user_str)(void *dst, u32 size, const void *unsafe_ptr) =
    (void *)BPF_FUNC_probe_read_user_str;

struct config {
    u32 launcher_tgid;    // the runner's pid: its forks are candidates while armed
    u32 armed_inv;        // invocation id for the next launch; 0 = not armed
    u32 armed_slot;       // its counter slot
    u32 source_len;       // bytes in source_path, without the NUL
    u32 client_len;       // bytes in client_path: only an exec of this path is the client
    char source_path[PATH_MAX_LEN];
    char client_path[PATH_MAX_LEN];
    u64 source_dev;       // the source file itself (the kernel's dev_t of its filesystem and
    u64 source_ino;       // its inode): recognised whatever name or descriptor reaches it;
                          // source_ino 0: a tree, every file of the filesystem source_dev
    u64 target_dev;       // the filesystem the client writes its result to (0: none), a
                          // filesystem of its own: whatever path reaches a file, it is there
    u64 home_dev;         // with a target: the filesystem of the client's working directory
};
BPF_ARRAY(config, struct config, 1);
// Each invocation's own source and client paths (launcher_tgid and armed_* unused there):
// several invocations may run at once, each matched against its own paths.
BPF_HASH(inv_config, u32, struct config, 256);

// A tracked task: its invocation and counter slot, its on-CPU clock (when it last went on the
// CPU, 0 = off it; how long it has run since its last syscall that makes progress, see
// is_progress; how much of that the kernel spent in softirqs on its time), the kind of the
// descriptor it last read or wrote (valid while fd_gen has not moved), and whether its next
// sys_exit is the return of the fork or exec it was tracked in (entered before it was tracked:
// not counted).
enum skip { SKIP_NONE = 0, SKIP_FORK = 1, SKIP_EXEC = 2 };
struct task {
    u32 inv;
    u32 slot;
    u64 on_since;
    u64 stretch;
    u64 softirq;
    u64 runtime_seen;   // the scheduler's runtime of the task when last reconciled (clock_out)
    u64 counted;        // on-CPU time counted into the tree since then
    u64 stretch_rt;     // the scheduler's runtime of the task when its current stretch began
    u64 fd_gen;
    s32 fd;
    u8 fd_kind;
    u8 skip;
};
// Keyed by tid, not task storage: a tracing program's task-storage lookup may be refused (it
// only try-locks the CPU's storage lock), which would hide a tracked task's syscalls, reads
// and time; a hash lookup never is. Entries are made at fork (before the child first runs)
// and at the client's exec, and go at exit (task_ended): a tid is reused only after that.
BPF_HASH(tasks, u32, struct task, 16384);

// base: a launch-chain task's runtime when it joined the client's cgroup (0: born in it, or no
// cgroup): only what it ran after is the chain's share of the cgroup's CPU (launch_oncpu_ns)
struct launch { u32 inv; u32 slot; u64 base; };
BPF_HASH(tracked, u32, struct launch, 8192);   // tid -> invocation: the tree's live tasks
BPF_HASH(pending_exec, u32, struct launch, 1024);   // forked by the launcher, tracked from exec

// Counters of an invocation: one per-CPU array slot; ids are CTR_* (maxima merged by max),
// CTR_FUNC_BASE + function slot, CTR_SYSCALL_BASE + syscall number. `slots` says which
// invocation owns a slot (a task left over from a finished invocation counts nowhere) and
// whether its tree has opened the source: stretches before that are start-up (an interpreter
// loading itself), judged apart from those during the work.
// The map's value is declared as bytes and used as struct counters (counters_of): BCC builds
// a text reader and writer of every map's value, compiled for the host at load, with one
// argument per array element (1,152 for u64 c[], ~40 ms of the compile) but one string for a
// byte array. Python reads a slot's raw bytes either way (probes/bcc/counters.py).
struct counters { u64 c[COUNTER_SPACE]; };
struct counter_bytes { u8 b[COUNTER_SPACE * 8]; };
BPF_PERCPU_ARRAY(counters, struct counter_bytes, INV_SLOTS);
struct slot { u32 inv; u32 source_seen; };
BPF_ARRAY(slots, struct slot, INV_SLOTS);

// FD_UNKNOWN: closed here, so its next use says what it is by the file behind it. FD_OWN: a
// place of the client's own, where it can keep what it derived from the source: a regular
// file on a tmpfs (in the sandbox every writable place is one: its working directory, /tmp,
// /dev/shm; a memfd too) or a pipe. Reads of those are counted apart (own_read_bytes).
// FD_TARGET: a file of the target's filesystem (config.target_dev), written and read apart.
// FD_ELSEWHERE: with a target, a named regular file on none of the target's, the source's or
// the working directory's filesystems: where a client whose result is a folder has no business
// writing, whatever path reached it (a symbolic link planted in the target, say).
enum fd_kind { FD_OTHER = 0, FD_SOURCE = 1, FD_SOCKET = 2, FD_UNKNOWN = 3, FD_OWN = 4,
               FD_TARGET = 5, FD_ELSEWHERE = 6 };
struct fdkey { u32 tgid; s32 fd; };
// An entry holds for the file it was made for only: a number closed without an event of ours
// (close_range, close-on-exec) or another process's same number is another file (#44). The
// file by its struct file and its inode: a freed struct file is soon another's (the slab hands
// it out again), and both freed and taken again by files of the same kind is what it takes to
// be wrong.
struct fdkind { u64 file; u64 inode; u8 kind; };
BPF_HASH(fd_kinds, struct fdkey, struct fdkind, 65536);
BPF_ARRAY(fd_gen, u64, 1);                 // moves whenever fd_kinds does: task caches go stale
// Pages of the source (or of the client's own files) a process had mapped by its faults, each
// with the generation of its mappings it was mapped in (mapped_in): counted once per
// generation, exact whatever order the kernel maps its windows in (#44).
struct mapped_page { u32 tgid; u32 pad; u64 inode; u64 index; };
BPF_TABLE("lru_hash", struct mapped_page, u64, mapped_pages, 65536);
BPF_TABLE("lru_hash", u32, u64, map_gens, 16384);   // tgid -> its mappings' generation
#define WINDOW_PAGES_MAX 512   // a fault-around window, or a 2 MiB folio's, at the most

static __always_inline void mappings_changed(void)
{
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    u64 gen = bpf_ktime_get_ns();
    map_gens.update(&tgid, &gen);
}

BPF_PERCPU_ARRAY(softirq_since, u64, 1);   // a softirq running on a tracked task's time
// Tasks alive per invocation, and the process evlab launched: when that process ends, the
// tasks still alive are its leftovers (the sandbox's pid namespace then kills them).
BPF_HASH(live, u32, s64, 1024);
BPF_HASH(roots, u32, u32, 1024);
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
// and refused opens for writing; unlinks, rmdirs, renames, links, mkdirs and metadata changes
// (chmod, chown, utimes, xattrs, truncate), refused or not (ret); chdirs (to resolve relative
// paths). Their own ring: the paths make them 10x larger than the other
// events, and an interpreter's start-up opens dozens of files in a burst.
#define PATH_BYTES 256
struct file_event {
    u64 ts;
    u32 inv;
    u32 op;           // FOP_OPEN, FOP_UNLINK, FOP_RMDIR, FOP_RENAME, ... FOP_FCHDIR
    u32 tgid;
    u32 tid;
    s32 dfd;
    s32 dfd2;
    u32 flags;
    s32 ret;          // open: the new descriptor (so *at() calls on it can be resolved);
                      // any other: 0 or -errno
    char comm[16];
    char path[PATH_BYTES];
    char path2[PATH_BYTES];
};
BPF_RINGBUF_OUTPUT(file_events, 1024);   // 4 MiB: a sync of hundreds of files in 100 ms

// A syscall's saved registers, read at its exit: the BTF-typed pt_regs of sys_exit, loaded
// directly (an integer address, so that BCC does not turn the loads into probe reads).
#define REGS(ctx) ((u64)(ctx)->args[0])
#define REG(regs, field) (*(u64 *)((regs) + __builtin_offsetof(struct pt_regs, field)))

// The counters of a task's invocation, or 0 when its slot has moved on to another invocation.
static __always_inline struct counters *counters_of(u32 slot, u32 inv, struct slot **owner)
{
    struct slot *s = slots.lookup(&slot);
    if (!s || s->inv != inv || inv == 0)
        return 0;
    if (owner)
        *owner = s;
    return (struct counters *)counters.lookup(&slot);
}

static __always_inline void add(u32 slot, u32 inv, u32 id, u64 n)
{
    struct counters *c = counters_of(slot, inv, 0);
    if (c && id < COUNTER_SPACE)
        c->c[id] += n;
}

static __always_inline struct task *tracked_task(void)
{
    u32 tid = bpf_get_current_pid_tgid();
    return tasks.lookup(&tid);
}

// The calling task when it is tracked and its invocation still holds its slot, with that
// invocation's counters (*c) and slot (*s); 0 otherwise.
static __always_inline struct task *tracked_task_counters(struct counters **c, struct slot **s)
{
    struct task *t = tracked_task();
    if (!t)
        return 0;
    *c = counters_of(t->slot, t->inv, s);
    return *c && *s ? t : 0;
}

// Fields of a BTF-typed task_struct (a tp_btf argument, or bpf_get_current_task_btf()) are
// loaded directly, not with a probe-read helper: the verifier checks each load against the
// kernel's BTF. The task is an integer address so that BCC does not rewrite the loads into
// probe reads; the offsets are this kernel's, from its BTF (BCC compiles against Debian's
// headers, whose layout may differ).
#define CURRENT_TASK ((u64)bpf_get_current_task_btf())

// The tracked task of a task_struct the tracepoint handed us, by its tid.
static __always_inline struct task *task_of(u64 task)
{
    u32 tid = *(u32 *)(task + TASK_PID_OFF);
    return tid ? tasks.lookup(&tid) : 0;
}

static __always_inline void fd_changed(void)
{
    int zero = 0;
    u64 *gen = fd_gen.lookup(&zero);
    if (gen)
        __sync_fetch_and_add(gen, 1);
}

static __always_inline struct event *reserve(u32 slot, u32 inv)
{
    struct event *e = events.ringbuf_reserve(sizeof(struct event));
    if (!e) {
        add(slot, inv, CTR_LOST_EVENTS, 1);
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

// What a file is, by the inode behind it: a socket, the invocation's source (its device and
// inode, whatever path, link, bind mount or descriptor reached it), or anything else. Pointer
// chasing with probe reads, at this kernel's offsets (from its BTF); only on a descriptor's
// first use, an open and an io_uring completion, never per read.
#define S_IFMT_ 0170000
#define S_IFSOCK_ 0140000
#define S_IFREG_ 0100000
#define S_IFIFO_ 0010000
#define S_IFDIR_ 0040000
#define TMPFS_MAGIC_ 0x01021994
#define PROC_SUPER_MAGIC_ 0x9fa0

// A procfs file of the current process's own /proc/<tgid>/ or /proc/<tgid>/task/<tid>/
// directory (its settings: coredump_filter, comm, oom_score_adj...), however it was named:
// the struct pid the inode was made for (proc_inode.pid; none for /proc/sys and the other
// global entries) is that of a task of the current thread group. Another process's entries
// are not. By pointer, not by pid number: inside the sandbox's pid namespace its /proc names
// other numbers than the kernel's.
static __always_inline int own_proc_file(u64 inode)
{
#if HAVE_PROC_OWN
    u64 pid = 0, first = 0;
    u32 tgid = 0;
    bpf_probe_read_kernel(&pid, sizeof(pid),
                          (void *)(inode - PROC_INODE_VFS_OFF + PROC_INODE_PID_OFF));
    if (pid)   // tasks[PIDTYPE_PID]: the one task whose pid this is
        bpf_probe_read_kernel(&first, sizeof(first), (void *)(pid + PID_TASKS_OFF));
    if (!first)
        return 0;
    bpf_probe_read_kernel(&tgid, sizeof(tgid),
                          (void *)(first - TASK_PID_LINKS_OFF + TASK_TGID_OFF));
    return tgid == bpf_get_current_pid_tgid() >> 32;
#else
    return 0;
#endif
}

static __always_inline u8 kind_of_inode(u32 inv, u64 inode)
{
    u64 sb = 0, ino = 0, magic = 0;
    u16 mode = 0;
    u32 dev = 0;
    if (!inode)
        return FD_OTHER;
    bpf_probe_read_kernel(&mode, sizeof(mode), (void *)(inode + INODE_MODE_OFF));
    if ((mode & S_IFMT_) == S_IFSOCK_)
        return FD_SOCKET;
    struct config *cfg = inv_config.lookup(&inv);
    if (!cfg || !(cfg->source_dev || cfg->target_dev))
        return FD_OTHER;
    bpf_probe_read_kernel(&ino, sizeof(ino), (void *)(inode + INODE_INO_OFF));
    bpf_probe_read_kernel(&sb, sizeof(sb), (void *)(inode + INODE_SB_OFF));
    if (sb) {
        bpf_probe_read_kernel(&dev, sizeof(dev), (void *)(sb + SB_DEV_OFF));
        bpf_probe_read_kernel(&magic, sizeof(magic), (void *)(sb + SB_MAGIC_OFF));
    }
    if (cfg->target_dev && dev == cfg->target_dev)
        return FD_TARGET;
    if (dev == cfg->source_dev && (ino == cfg->source_ino || !cfg->source_ino))
        return FD_SOURCE;
    if (cfg->target_dev && (mode & S_IFMT_) == S_IFREG_ && dev != cfg->home_dev
        && !(magic == PROC_SUPER_MAGIC_ && own_proc_file(inode))) {   // its own settings
        u32 nlink = 0;   // none: a memfd, an O_TMPFILE never linked (no trace left anywhere)
        bpf_probe_read_kernel(&nlink, sizeof(nlink), (void *)(inode + INODE_NLINK_OFF));
        if (nlink)
            return FD_ELSEWHERE;
    }
    if (!cfg->source_dev)   // what a client keeps of its own is only asked of a source's
        return FD_OTHER;
    if ((mode & S_IFMT_) == S_IFIFO_ || ((mode & S_IFMT_) == S_IFREG_ && magic == TMPFS_MAGIC_))
        return FD_OWN;
    return FD_OTHER;
}

static __always_inline u8 kind_of_file(u32 inv, u64 file)
{
    u64 inode = 0;
    if (!file || bpf_probe_read_kernel(&inode, sizeof(inode), (void *)(file + FILE_INODE_OFF)))
        return FD_OTHER;
    return kind_of_inode(inv, inode);
}

// The file behind the current task's descriptor fd (its files_struct's fd table), or 0.
static __always_inline u64 file_of_fd(s64 fd)
{
    u64 task = bpf_get_current_task(), files = 0, fdt = 0, array = 0, file = 0;
    u32 max = 0;
    if (fd < 0 || bpf_probe_read_kernel(&files, sizeof(files), (void *)(task + TASK_FILES_OFF))
        || !files)
        return 0;
    bpf_probe_read_kernel(&fdt, sizeof(fdt), (void *)(files + FILES_FDT_OFF));
    if (!fdt)
        return 0;
    bpf_probe_read_kernel(&max, sizeof(max), (void *)(fdt + FDT_MAX_FDS_OFF));
    if ((u64)fd >= max)
        return 0;
    bpf_probe_read_kernel(&array, sizeof(array), (void *)(fdt + FDT_FD_OFF));
    if (array)
        bpf_probe_read_kernel(&file, sizeof(file), (void *)(array + (u64)fd * 8));
    return file;
}

// What kind of file is fd in the current process (tgid): its entry while the descriptor still
// holds the file the entry was made for, else what the file behind it is, resolved and then
// remembered. Never another process's entry for the same number: a forked child's descriptor
// is its parent's only until either closes it (rsync's generator closes its end of a socketpair
// its receiving process keeps and opens the target's folders under that number while that
// process writes to its end: the file list was counted as written to the target, #44).
static __always_inline u8 fd_kind_of(u32 inv, u32 tgid, s64 fd)
{
    struct fdkey k = { .tgid = tgid, .fd = (s32)fd };
    struct fdkind now = { .file = file_of_fd(fd) };
    if (now.file)
        bpf_probe_read_kernel(&now.inode, sizeof(now.inode), (void *)(now.file + FILE_INODE_OFF));
    struct fdkind *known = fd_kinds.lookup(&k);
    if (known && known->file == now.file && known->inode == now.inode
        && known->kind != FD_UNKNOWN)
        return known->kind;
    now.kind = kind_of_file(inv, now.file);
    fd_kinds.update(&k, &now);
    return now.kind;
}

// The same, remembered by the task for the descriptor it used last (a read loop asks about
// one descriptor again and again) until any descriptor of the tree changes kind.
static __always_inline u8 fd_kind(struct task *t, s64 fd)
{
    int zero = 0;
    u64 *genp = fd_gen.lookup(&zero);
    u64 gen = genp ? *genp : 0;
    if (t->fd_gen == gen && t->fd == (s32)fd)
        return t->fd_kind;
    u8 kind = fd_kind_of(t->inv, bpf_get_current_pid_tgid() >> 32, fd);
    t->fd_gen = gen;
    t->fd = (s32)fd;
    t->fd_kind = kind;
    return kind;
}

static __always_inline void set_fd_kind(s64 fd, u8 kind)
{
    struct fdkey k = { .tgid = bpf_get_current_pid_tgid() >> 32, .fd = (s32)fd };
    struct fdkind v = { .file = file_of_fd(fd), .kind = kind };
    if (v.file)
        bpf_probe_read_kernel(&v.inode, sizeof(v.inode), (void *)(v.file + FILE_INODE_OFF));
    fd_kinds.update(&k, &v);
    fd_changed();
}

static __always_inline int is_source_path(u32 inv, const char *user_path)
{
    int zero = 0;
    struct config *cfg = inv_config.lookup(&inv);
    struct config *buf = scratch.lookup(&zero);
    if (!cfg || !buf || cfg->source_len == 0)
        return 0;
    int n = read_user_str(buf->source_path, sizeof(buf->source_path), user_path);
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

// A file operation's record: its paths are read from the caller's memory at the syscall's exit.
struct fileop { u64 path; u64 path2; s32 dfd; s32 dfd2; u32 flags; };
#define FILE_EVENTS_PER_CPU 20000

// An open that may change the file system: refused, it is still an attempt on record.
#define OPEN_WRITES (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)

// Counts a file operation; whether its event may still go to user space. Filtered early:
// past the cap a flood is counted here and never crosses to user space, where evlab keeps at
// most KERNEL_EVENTS_MAX of an invocation's events anyway (sessions/lab/invocation.py). Per
// CPU, so an invocation sends at most cap x CPUs.
static __always_inline int file_event_due(struct counters *c)
{
    c->c[CTR_FILE_OPS]++;
    return c->c[CTR_FILE_OPS] <= FILE_EVENTS_PER_CPU;
}

static __always_inline void emit_file(struct task *t, struct counters *c, struct fileop *f,
                                      u32 op, s64 ret)
{
    if (!file_event_due(c))
        return;
    struct file_event *e = file_events.ringbuf_reserve(sizeof(struct file_event));
    if (!e) {
        c->c[CTR_LOST_EVENTS]++;
        return;
    }
    e->ts = bpf_ktime_get_ns();
    e->inv = t->inv;
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
        read_user_str(e->path, sizeof(e->path), (const void *)f->path);
    if (f->path2)
        read_user_str(e->path2, sizeof(e->path2), (const void *)f->path2);
    file_events.ringbuf_submit(e, 0);
}

// Busy-work: on-CPU time a task spends between two syscalls that make progress. Spinning,
// or re-hashing a buffer in a loop, runs for long stretches without one; real work (reading,
// sending, waiting, even an interpreter starting up) enters the kernel every few hundred µs.
// Time passed preempted does not count (the clock stops at switch-out), so machine load does
// not lengthen a stretch. Calls that only look at the clock, yield or sleep do not end one
// (sleeping costs no CPU, so it cannot lengthen a stretch either). A stretch ends when such a
// syscall returns (or the task exits).
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

// The scheduler's own on-CPU total of a task (task_struct.se.sum_exec_runtime, at its offset in
// this kernel from BTF: TASK_RUNTIME_OFF): exact at a switch out, up to a tick behind otherwise.
static __always_inline u64 runtime_of(u64 task)
{
#if TASK_RUNTIME_OFF >= 0
    return *(u64 *)(task + TASK_RUNTIME_OFF);
#else
    return 0;
#endif
}

// This kernel does not call sched_switch for every switch in (seen with ftrace: a task
// switched out twice with no switch in between, after a switch to some of the platform's own
// tasks), so a tracked task can run with its clock stopped. The first event that finds it so,
// a syscall's return or its exit, restarts the clock and counts what the scheduler says it ran
// meanwhile, up to its last tick. Every syscall is seen, so none came in between: that time
// belongs to the current stretch. clock_out reconciles the rest at the switch out.
static __always_inline void clock_missed(struct task *t, struct counters *c, u64 task,
                                         u64 now)
{
    c->c[CTR_SWITCH_INS_MISSED]++;
    u64 runtime = runtime_of(task), seen = t->runtime_seen + t->counted;
    u64 behind = runtime > seen ? runtime - seen : 0;
    c->c[CTR_ONCPU_NS] += behind;
    t->stretch += behind;
    t->counted += behind;
    t->on_since = now;
}

// A switch out: the clock stops, and is reconciled with the scheduler's runtime, exact here.
// Time it ran beyond what was counted is a whole slice whose switch in went unseen and that
// made no syscall (the current stretch, all of it), or the part of a slice before the event
// that restarted its clock which the runtime then did not show yet (a tick at most: CPU time
// only, as it may have come before a syscall that ended a stretch).
static __always_inline void clock_out(struct task *t, struct counters *c, u64 task, u64 now)
{
    int running = t->on_since != 0;
    if (running) {
        u64 ran = now - t->on_since;
        if (c)
            c->c[CTR_ONCPU_NS] += ran;
        t->counted += ran;
        t->stretch += ran;
        t->on_since = 0;
    } else if (c) {
        c->c[CTR_SWITCH_INS_MISSED]++;
    }
#if TASK_RUNTIME_OFF >= 0
    u64 runtime = runtime_of(task);
    u64 ran = runtime > t->runtime_seen ? runtime - t->runtime_seen : 0;
    if (ran > t->counted) {
        if (c)
            c->c[CTR_ONCPU_NS] += ran - t->counted;
        if (!running)
            t->stretch += ran - t->counted;
    }
    t->runtime_seen = runtime;
    t->counted = 0;
#endif
}

static __always_inline void end_stretch(struct task *t, struct counters *c, struct slot *s,
                                        u64 now)
{
    u64 run = t->stretch;
    if (t->on_since) {
        c->c[CTR_ONCPU_NS] += now - t->on_since;
        t->counted += now - t->on_since;
        run += now - t->on_since;
        t->on_since = now;
    }
    // The clock's stretch counts time the host took the vCPU away (steal) as the task's; the
    // scheduler's runtime does not, but is read up to a tick late at either end. So the
    // stretch is at most the lesser of the clock's and runtime + a tick: what busy_*max_ns
    // keep, and cpu-budget judges.
#if TASK_RUNTIME_OFF >= 0
    u64 rt = runtime_of(CURRENT_TASK);
    u64 ran = rt > t->stretch_rt ? rt - t->stretch_rt : 0;
    if (ran + TICK_NS < run)
        run = ran + TICK_NS;
    t->stretch_rt = rt;
#endif
    run = run > t->softirq ? run - t->softirq : 0;   // not the task's own computing
    t->stretch = 0;
    t->softirq = 0;
    if (run >= BUSY_MIN_NS) {
        c->c[CTR_BUSY_NS] += run;
        c->c[CTR_BUSY_STRETCHES]++;
        if (!s->source_seen)   // summed over every task of the tree: start-up is judged whole
            c->c[CTR_BUSY_START_NS] += run;
    }
    // per-CPU maxima, merged by max
    u64 *max = s->source_seen ? &c->c[CTR_BUSY_MAX_NS] : &c->c[CTR_BUSY_START_MAX_NS];
    if (run > *max)
        *max = run;
}

static __always_inline void count_syscall(struct counters *c, u64 nr)
{
    c->c[CTR_SYSCALLS]++;
    c->c[CTR_SYSCALL_BASE + (nr & (SYSCALL_SLOTS - 1))]++;
}

static __always_inline void read_sockaddr(struct event *e, const void *uaddr)
{
    // struct sockaddr_in (16 bytes) and sockaddr_in6 (28) by their fixed ABI offsets: the
    // port at 2, the address at 4 or 8 (their headers cost a quarter second of compile)
    u16 family = 0;
    read_user(&family, sizeof(family), uaddr);
    e->family = family;
    u8 sa[28] = {};
    if (family == AF_INET) {
        read_user(sa, 16, uaddr);
        __builtin_memcpy(e->addr, sa + 4, 4);
    } else if (family == AF_INET6) {
        read_user(sa, 28, uaddr);
        __builtin_memcpy(e->addr, sa + 8, 16);
    } else {
        return;
    }
    e->port = (u16)sa[2] << 8 | sa[3];
}

// An open that returned: the new descriptor's kind (the source, by the path it named), and its
// file event; a refused open for writing is recorded too (an attempt the sandbox stopped).
static __always_inline void opened(struct task *t, struct counters *c, struct slot *s,
                                   struct fileop *f, int may_be_source, s64 ret)
{
    if (ret >= 0) {
        // by the path evlab gave (cheap), else by the file it opened (another name for it)
        u8 kind = may_be_source && is_source_path(t->inv, (const char *)f->path) ? FD_SOURCE
                  : kind_of_file(t->inv, file_of_fd(ret));
        if (kind == FD_SOURCE && !may_be_source)
            kind = FD_OTHER;
        set_fd_kind(ret, kind);
        if (kind == FD_SOURCE) {
            c->c[CTR_SOURCE_OPENS]++;
            s->source_seen = 1;
        }
        emit_file(t, c, f, FOP_OPEN, ret);
    } else if (f->flags & OPEN_WRITES) {
        emit_file(t, c, f, FOP_OPEN, ret);
    }
}

// A `kill` fault's trigger (sessions/lab/target_faults.py): once its invocation has written
// `after` bytes to the target, the process whose write crossed them is stopped (SIGSTOP) as
// that write returns, before it can write more or end by itself, whatever the machine's load;
// the lab kills the whole tree at its next look. One lookup per write to the target only.
struct stop { u64 after; u64 written; };
BPF_HASH(stop_at, u32, struct stop, 256);
#define SIGSTOP_ 19

// Bytes written to each target file, by its inode (whatever name or descriptor reached it):
// Python reads and frees an invocation's entries when it finishes. One full is a lost event.
struct target_file { u32 inv; u32 pad; u64 ino; };
BPF_HASH(target_files, struct target_file, u64, 16384);

static __always_inline void target_written(struct task *t, struct counters *c, u64 n, u64 file)
{
    c->c[CTR_TARGET_WRITE_BYTES] += n;
    u64 inode = 0;
    if (!file || bpf_probe_read_kernel(&inode, sizeof(inode), (void *)(file + FILE_INODE_OFF))
            || !inode) {
        c->c[CTR_LOST_EVENTS]++;
    } else {
        struct target_file key = { .inv = t->inv };
        bpf_probe_read_kernel(&key.ino, sizeof(key.ino), (void *)(inode + INODE_INO_OFF));
        u64 *bytes = target_files.lookup(&key);
        if (!bytes && target_files.insert(&key, &n) == 0)
            bytes = 0;                                // made with these bytes
        else if (!bytes && !(bytes = target_files.lookup(&key)))
            c->c[CTR_LOST_EVENTS]++;                  // full
        if (bytes)   // there before, or made by another CPU's first write in between
            __sync_fetch_and_add(bytes, n);
    }
    struct stop *s = stop_at.lookup(&t->inv);
    if (!s)
        return;
    __sync_fetch_and_add(&s->written, n);
    if (s->written >= s->after)   // a write on another CPU may send it too: stopped either way
        bpf_send_signal(SIGSTOP_);
}

// n bytes read from a file of this kind (FD_*), counted by what it is: the source, a socket,
// one of the client's own files, the target. A syscall's or an io_uring request's alike.
static __always_inline void read_from(struct counters *c, u8 kind, s64 n)
{
    if (kind == FD_SOURCE)
        c->c[CTR_SOURCE_READ_BYTES] += n;
    else if (kind == FD_SOCKET)
        c->c[CTR_SOCK_RECV_BYTES] += n;
    else if (kind == FD_OWN)
        c->c[CTR_OWN_READ_BYTES] += n;
    else if (kind == FD_TARGET)
        c->c[CTR_TARGET_READ_BYTES] += n;
}

// n bytes written to a file of this kind: a socket, the target (file: its struct file, read
// only for the target's), elsewhere.
static __always_inline void written_to(struct task *t, struct counters *c, u8 kind, s64 n,
                                       u64 file)
{
    if (kind == FD_SOCKET)
        c->c[CTR_SOCK_SENT_BYTES] += n;
    else if (kind == FD_TARGET)
        target_written(t, c, n, file);
    else if (kind == FD_ELSEWHERE)
        c->c[CTR_ELSEWHERE_WRITE_BYTES] += n;
}

// Bytes moved by the read and write families: all of them, and those of the source's and of
// sockets' descriptors. in_fd/out_fd < 0: not that direction.
static __always_inline void moved(struct task *t, struct counters *c, s64 in_fd, s64 out_fd,
                                  s64 ret)
{
    if (in_fd >= 0)
        read_from(c, fd_kind(t, in_fd), ret);
    if (out_fd >= 0) {
        u8 kind = fd_kind(t, out_fd);
        written_to(t, c, kind, ret, kind == FD_TARGET ? file_of_fd(out_fd) : 0);
    }
}

// A shared mapping of a target file opened for writing: what is stored through it is written
// with no syscall (and no inotify event) at all, so its bytes are not in target_write_bytes;
// counted, whatever the mapping's protection now (mprotect may add PROT_WRITE later).
#define MAP_SHARED_ 0x01
#define FMODE_WRITE_ 0x2
static __always_inline void target_mapped(struct counters *c, s64 fd)
{
    u32 mode = 0;
    u64 file = file_of_fd(fd);
    if (file)
        bpf_probe_read_kernel(&mode, sizeof(mode), (void *)(file + FILE_MODE_OFF));
    if (mode & FMODE_WRITE_)
        c->c[CTR_TARGET_WRITE_MAPS]++;
}

// A write to the target's filesystem refused for want of space (ENOSPC): it was full.
#define ENOSPC_ 28
static __always_inline void no_space(struct task *t, struct counters *c, s64 out_fd, s64 ret)
{
    if (ret == -ENOSPC_ && out_fd >= 0 && fd_kind(t, out_fd) == FD_TARGET)
        c->c[CTR_TARGET_NO_SPACE]++;
}

static __always_inline void connected(struct task *t, struct counters *c, u64 regs, s64 ret)
{
    c->c[CTR_CONNECTS]++;
    struct event *e = reserve(t->slot, t->inv);
    if (e) {
        e->kind = EV_CONNECT;
        e->ret = (s32)ret;
        read_sockaddr(e, (const void *)REG(regs, si));
        events.ringbuf_submit(e, 0);
    }
}

// File syscalls that change something: their file events, refused or not (ret: 0 or -errno;
// a refused change is still an attempt, on the read-only source say), but a chdir only once it
// moved the process. Arguments: x86-64 di, si, dx, r10.
static __always_inline void file_changed(struct task *t, struct counters *c, u64 regs, u64 nr,
                                         s64 ret)
{
    if (ret != 0 && (nr == __NR_chdir || nr == __NR_fchdir))
        return;
    struct fileop f = { .dfd = AT_FDCWD, .dfd2 = AT_FDCWD };
    u32 op;
    switch (nr) {
    case __NR_unlink: case __NR_rmdir: case __NR_mkdir: case __NR_truncate: case __NR_chdir:
        f.path = REG(regs, di);
        op = nr == __NR_unlink ? FOP_UNLINK : nr == __NR_rmdir ? FOP_RMDIR
             : nr == __NR_mkdir ? FOP_MKDIR : nr == __NR_truncate ? FOP_TRUNCATE : FOP_CHDIR;
        break;
    case __NR_fchdir:          // the new cwd is a descriptor's directory: reported unresolved
        f.dfd = (s32)REG(regs, di);
        op = FOP_FCHDIR;
        break;
    case __NR_unlinkat: case __NR_mkdirat:
        f.path = REG(regs, si);
        f.dfd = (s32)REG(regs, di);
        f.flags = nr == __NR_unlinkat ? (u32)REG(regs, dx) : 0;
        op = nr == __NR_mkdirat ? FOP_MKDIR : (f.flags & AT_REMOVEDIR) ? FOP_RMDIR : FOP_UNLINK;
        break;
    case __NR_rename:
        f.path2 = REG(regs, di);
        f.path = REG(regs, si);
        op = FOP_RENAME;
        break;
    case __NR_link: case __NR_symlink:   // (old or the link's text, new): the new name first
        f.path2 = REG(regs, di);
        f.path = REG(regs, si);
        op = nr == __NR_link ? FOP_LINK : FOP_SYMLINK;
        break;
    case __NR_symlinkat:       // symlinkat(text, newdfd, new)
        f.path2 = REG(regs, di);
        f.path = REG(regs, dx);
        f.dfd = (s32)REG(regs, si);
        op = FOP_SYMLINK;
        break;
    case __NR_linkat:          // linkat(olddfd, old, newdfd, new, flags)
        f.path2 = REG(regs, si);
        f.dfd2 = (s32)REG(regs, di);
        f.path = REG(regs, r10);
        f.dfd = (s32)REG(regs, dx);
        f.flags = (u32)REG(regs, r8);
        op = FOP_LINK;
        break;
    default:                   // renameat, renameat2: (olddfd, old, newdfd, new)
        f.path2 = REG(regs, si);
        f.dfd2 = (s32)REG(regs, di);
        f.path = REG(regs, r10);
        f.dfd = (s32)REG(regs, dx);
        op = FOP_RENAME;
        break;
    }
    emit_file(t, c, &f, op, ret);
}

// Syscall numbers newer than the headers BCC compiles against (x86-64's, ABI)
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif
#define AT_EMPTY_PATH_ 0x1000

// A change to a file's metadata in the descriptor's file (fchmod, ftruncate, fallocate...),
// refused or not: an event only when that file is the source's, by the kernel's view of it
// (fd_kind); what it does to any other file is no clause's business. fd -1: not known (an
// io_uring request's registered file).
static __always_inline void source_meta(struct task *t, struct counters *c, u8 kind, s32 fd,
                                        u32 op, s64 ret)
{
    if (kind != FD_SOURCE)
        return;
    struct fileop f = { .dfd = fd, .dfd2 = AT_FDCWD };
    emit_file(t, c, &f, op, ret);
}

// Metadata changes: chmod, chown, utimes, the xattr calls, truncate and fallocate, by path (a
// file event, resolved where the process was, like a rename's) or by descriptor (an *at call
// given no path, or an empty one with AT_EMPTY_PATH: the descriptor's file), refused or not.
static __always_inline void meta_changed(struct task *t, struct counters *c, u64 regs, u64 nr,
                                         s64 ret)
{
    struct fileop f = { .dfd = AT_FDCWD, .dfd2 = AT_FDCWD };
    u32 op, fd_op = 0;
    switch (nr) {
    case __NR_fchmod: case __NR_fchown: case __NR_fsetxattr: case __NR_fremovexattr:
    case __NR_ftruncate: case __NR_fallocate:
        op = nr == __NR_fchmod ? FOP_FCHMOD : nr == __NR_fchown ? FOP_FCHOWN
             : nr == __NR_fsetxattr ? FOP_FSETXATTR : nr == __NR_fremovexattr ? FOP_FREMOVEXATTR
             : nr == __NR_ftruncate ? FOP_FTRUNCATE : FOP_FALLOCATE;
        source_meta(t, c, fd_kind(t, (s32)REG(regs, di)), (s32)REG(regs, di), op, ret);
        return;
    case __NR_chmod: case __NR_chown: case __NR_lchown: case __NR_utime: case __NR_utimes:
    case __NR_setxattr: case __NR_lsetxattr: case __NR_removexattr: case __NR_lremovexattr:
        f.path = REG(regs, di);
        op = nr == __NR_chmod ? FOP_CHMOD : nr == __NR_chown || nr == __NR_lchown ? FOP_CHOWN
             : nr == __NR_utime || nr == __NR_utimes ? FOP_UTIMES
             : nr == __NR_setxattr || nr == __NR_lsetxattr ? FOP_SETXATTR : FOP_REMOVEXATTR;
        break;
    case __NR_fchmodat: case __NR_fchmodat2:   // (dfd, path, mode[, flags])
        f.flags = nr == __NR_fchmodat2 ? (u32)REG(regs, r10) : 0;
        op = FOP_CHMOD, fd_op = FOP_FCHMOD;
        break;
    case __NR_fchownat:                        // (dfd, path, owner, group, flags)
        f.flags = (u32)REG(regs, r8);
        op = FOP_CHOWN, fd_op = FOP_FCHOWN;
        break;
    case __NR_utimensat: case __NR_futimesat:   // (dfd, path or NULL, times[, flags])
        f.flags = nr == __NR_utimensat ? (u32)REG(regs, r10) : 0;
        op = FOP_UTIMES, fd_op = FOP_FUTIMES;
        break;
    default:                                   // setxattrat, removexattrat: (dfd, path, flags..)
        f.flags = (u32)REG(regs, dx);
        op = nr == __NR_setxattrat ? FOP_SETXATTR : FOP_REMOVEXATTR;
        fd_op = nr == __NR_setxattrat ? FOP_FSETXATTR : FOP_FREMOVEXATTR;
        break;
    }
    if (fd_op) {
        f.dfd = (s32)REG(regs, di);
        f.path = REG(regs, si);
        char first = 0;
        if (f.path)
            read_user(&first, 1, (const void *)f.path);
        // the descriptor's own file: utimensat's and futimesat's NULL path, an empty one
        // with AT_EMPTY_PATH
        if (f.path ? !first && (f.flags & AT_EMPTY_PATH_) : op == FOP_UTIMES) {
            source_meta(t, c, f.dfd >= 0 ? fd_kind(t, f.dfd) : FD_OTHER, f.dfd, fd_op, ret);
            return;
        }
    }
    emit_file(t, c, &f, op, ret);
}

// The bytes of the first `count` messages of a sendmmsg/recvmmsg vector (struct mmsghdr: a
// 56-byte msghdr, then the kernel's msg_len; 64 bytes each). UIO_MAXIOV (1024) at most.
static __always_inline u64 mmsg_bytes(u64 vec, s64 count)
{
    u64 bytes = 0;
    for (int i = 0; i < 1024; i++) {
        if (i >= count)
            break;
        u32 len = 0;
        read_user(&len, sizeof(len), (void *)(vec + (u64)i * 64 + 56));
        bytes += len;
    }
    return bytes;
}

// A descriptor copied: its kind, and a file event when it is a folder's (paths relative to the
// copy resolve through it: rm -rf unlinks a folder's names through an F_DUPFD copy). Copies of
// anything else (a shell's dup2 of pipes and files, many a command) send nothing.
static __always_inline void duplicated(struct task *t, struct counters *c, s64 old, s64 fd)
{
    set_fd_kind(fd, fd_kind(t, old));
    u64 file = file_of_fd(fd), inode = 0;
    u16 mode = 0;
    if (file)
        bpf_probe_read_kernel(&inode, sizeof(inode), (void *)(file + FILE_INODE_OFF));
    if (inode)
        bpf_probe_read_kernel(&mode, sizeof(mode), (void *)(inode + INODE_MODE_OFF));
    if ((mode & S_IFMT_) != S_IFDIR_)
        return;
    struct fileop f = { .dfd = (s32)old, .dfd2 = AT_FDCWD };
    emit_file(t, c, &f, FOP_DUP, fd);
}

#include "operations.bpf.c"

// What a tracked task's syscall did, from its result and its arguments (still in the saved
// registers at exit). Only the syscalls below: every other one was just counted.
static __always_inline void syscall_done(struct task *t, struct counters *c, struct slot *s,
                                         u64 regs, u64 nr, s64 ret)
{
    struct fileop f = { .dfd = AT_FDCWD, .dfd2 = AT_FDCWD };
    switch (nr) {
    case __NR_read: case __NR_pread64: case __NR_readv: case __NR_preadv: case __NR_preadv2:
        if (ret > 0) {
            c->c[CTR_READ_CALLS]++;
            c->c[CTR_READ_BYTES] += ret;
            moved(t, c, REG(regs, di), -1, ret);
        }
        return;
    case __NR_recvfrom: case __NR_recvmsg:
        if (ret > 0) {
            c->c[CTR_READ_CALLS]++;
            c->c[CTR_READ_BYTES] += ret;
            c->c[CTR_SOCK_RECV_BYTES] += ret;
        }
        return;
    case __NR_write: case __NR_pwrite64: case __NR_writev: case __NR_pwritev: case __NR_pwritev2:
        if (ret > 0) {
            c->c[CTR_WRITE_BYTES] += ret;
            moved(t, c, -1, REG(regs, di), ret);
        } else {
            no_space(t, c, REG(regs, di), ret);
        }
        return;
    case __NR_sendto: case __NR_sendmsg:
        if (ret > 0) {
            c->c[CTR_WRITE_BYTES] += ret;
            c->c[CTR_SOCK_SENT_BYTES] += ret;
        }
        return;
    case __NR_sendmmsg: case __NR_recvmmsg: {   // ret: messages; their bytes are in msg_len
        u64 bytes = mmsg_bytes(REG(regs, si), ret);
        c->c[nr == __NR_sendmmsg ? CTR_WRITE_BYTES : CTR_READ_BYTES] += bytes;
        c->c[nr == __NR_sendmmsg ? CTR_SOCK_SENT_BYTES : CTR_SOCK_RECV_BYTES] += bytes;
        return;
    }
    case __NR_sendfile:        // sendfile(out_fd, in_fd, ...): bytes move in_fd -> out_fd
    case __NR_splice:          // splice(fd_in, off_in, fd_out, ...)
    case __NR_copy_file_range: // copy_file_range(fd_in, off_in, fd_out, ...)
        if (ret > 0) {
            c->c[CTR_READ_BYTES] += ret;
            c->c[CTR_WRITE_BYTES] += ret;
            if (nr == __NR_sendfile)
                moved(t, c, REG(regs, si), REG(regs, di), ret);
            else
                moved(t, c, REG(regs, di), REG(regs, dx), ret);
        } else {
            no_space(t, c, nr == __NR_sendfile ? REG(regs, di) : REG(regs, dx), ret);
        }
        return;
    case __NR_open:
        f.path = REG(regs, di);
        f.flags = (u32)REG(regs, si);
        opened(t, c, s, &f, 1, ret);
        return;
    case __NR_creat:
        f.path = REG(regs, di);
        f.flags = O_CREAT | O_WRONLY | O_TRUNC;
        opened(t, c, s, &f, 0, ret);
        return;
    case __NR_openat:
        f.path = REG(regs, si);
        f.dfd = (s32)REG(regs, di);
        f.flags = (u32)REG(regs, dx);
        opened(t, c, s, &f, 1, ret);
        return;
    case __NR_openat2: {
        u64 how_flags = 0;   // struct open_how starts with its u64 flags
        read_user(&how_flags, sizeof(how_flags), (const void *)REG(regs, dx));
        f.path = REG(regs, si);
        f.dfd = (s32)REG(regs, di);
        f.flags = (u32)how_flags;
        opened(t, c, s, &f, 1, ret);
        return;
    }
    case __NR_kill: case __NR_tkill: case __NR_tgkill: case __NR_rt_sigqueueinfo:
    case __NR_rt_tgsigqueueinfo: case __NR_pidfd_send_signal:
        kill_called(t, regs, nr, ret);
        return;
    case __NR_unlink: case __NR_rmdir: case __NR_mkdir: case __NR_truncate: case __NR_chdir:
    case __NR_fchdir: case __NR_unlinkat: case __NR_mkdirat:
    case __NR_rename: case __NR_renameat: case __NR_renameat2:
    case __NR_link: case __NR_linkat: case __NR_symlink: case __NR_symlinkat:
        file_changed(t, c, regs, nr, ret);
        return;
    case __NR_chmod: case __NR_fchmod: case __NR_fchmodat: case __NR_fchmodat2:
    case __NR_chown: case __NR_fchown: case __NR_lchown: case __NR_fchownat:
    case __NR_utime: case __NR_utimes: case __NR_utimensat: case __NR_futimesat:
    case __NR_setxattr: case __NR_lsetxattr: case __NR_fsetxattr: case __NR_setxattrat:
    case __NR_removexattr: case __NR_lremovexattr: case __NR_fremovexattr:
    case __NR_removexattrat: case __NR_ftruncate: case __NR_fallocate:
        meta_changed(t, c, regs, nr, ret);
        return;
    case __NR_mmap: {          // mmap(addr, len, prot, flags, fd, off): reads through a mapped
        s64 fd = (s64)REG(regs, r8);   // source are page faults (mapped_in), not syscalls
        mappings_changed();
        if (ret < 0 || fd < 0)
            return;
        u8 kind = fd_kind(t, fd);
        if (kind == FD_SOURCE)
            c->c[CTR_SOURCE_MMAPS]++;
        else if (kind == FD_TARGET && (REG(regs, r10) & MAP_SHARED_))
            target_mapped(c, fd);
        return;
    }
    case __NR_munmap: case __NR_madvise: case __NR_mremap: case __NR_process_madvise:
    case __NR_remap_file_pages: case __NR_mprotect:
        mappings_changed();   // pages may be gone: the next fault's window is a read again
        return;
    case __NR_socket: case __NR_accept: case __NR_accept4:
        if (ret >= 0)
            set_fd_kind(ret, FD_SOCKET);
        return;
    case __NR_dup: case __NR_dup2: case __NR_dup3:
        if (ret >= 0)
            duplicated(t, c, REG(regs, di), ret);
        return;
    case __NR_fcntl:           // F_DUPFD, F_DUPFD_CLOEXEC: a copy, as dup
        if (ret >= 0 && (REG(regs, si) == F_DUPFD || REG(regs, si) == F_DUPFD_CLOEXEC))
            duplicated(t, c, REG(regs, di), ret);
        return;
    case __NR_close:
        if (ret == 0)
            set_fd_kind(REG(regs, di), FD_UNKNOWN);
        return;
    case __NR_close_range:     // numbers closed at once: each task's last answer goes stale
        if (ret == 0)
            fd_changed();
        return;
    case __NR_connect:
        connected(t, c, regs, ret);
        return;
    }
}

static __always_inline int is_fork(u64 nr)
{
    return nr == __NR_clone || nr == __NR_clone3 || nr == __NR_fork || nr == __NR_vfork;
}

// Every syscall of the machine returns through here. A syscall is counted when it returns, so
// the two that never do are counted when the task exits (sched_process_exit), and one that a
// tracked task had entered before it was tracked (the fork or exec that made it tracked) is not.
int btf_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
    struct counters *c = 0;
    struct slot *s = 0;
    struct task *t = tracked_task_counters(&c, &s);
    if (!t)
        return 0;
    if (!t->on_since)   // running, its switch in unseen
        clock_missed(t, c, CURRENT_TASK, bpf_ktime_get_ns());
    u64 regs = REGS(ctx);
    u64 nr = REG(regs, orig_ax);
    s64 ret = (s64)ctx->args[1];
    if (t->skip) {
        u8 skip = t->skip;
        t->skip = SKIP_NONE;
        if (ret == 0 && (skip == SKIP_FORK ? is_fork(nr)
                         : nr == __NR_execve || nr == __NR_execveat))
            return 0;
    }
    if ((s64)nr == -1)         // rt_sigreturn restored registers that say "no syscall"
        nr = __NR_rt_sigreturn;
    count_syscall(c, nr);
    if (is_progress(nr))
        end_stretch(t, c, s, bpf_ktime_get_ns());
    syscall_done(t, c, s, regs, nr, ret);
    if (truncating(nr))   // apart: one copy of its descriptor-table walk for the verifier
        truncation_done(t, regs, nr, ret);
    return 0;
}

static __always_inline int track(u32 tid, struct launch *l);

// An io_uring worker or SQPOLL thread of a tracked process, seen for the first time as it goes
// on the CPU: the kernel makes these threads without the fork tracepoint, and they work (and
// spin) for the client, so they are tracked as its own. A flag test for every other task.
#define PF_IO_WORKER 0x00000010
static __always_inline struct task *adopted(u64 task)
{
    if (!(*(u32 *)(task + TASK_FLAGS_OFF) & PF_IO_WORKER))
        return 0;
    u32 tgid = *(u32 *)(task + TASK_TGID_OFF), tid = *(u32 *)(task + TASK_PID_OFF);
    struct task *leader = tasks.lookup(&tgid);
    if (!leader || !tid)
        return 0;
    struct launch l = { .inv = leader->inv, .slot = leader->slot };
    struct task init = { .inv = l.inv, .slot = l.slot, .fd_gen = ~0ULL, .fd = -1 };
    if (tasks.update(&tid, &init) || track(tid, &l)) {
        add(l.slot, l.inv, CTR_LOST_EVENTS, 1);   // the view is incomplete
        return 0;
    }
    return tasks.lookup(&tid);
}

// A tracked task's on-CPU clock runs from its switch in to its switch out (tp_btf: the
// program gets both tasks).
int btf_sched_switch(struct bpf_raw_tracepoint_args *ctx)
{
    // (bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int state)
    struct task *prev = task_of(ctx->args[1]);
    u64 now = 0;
    if (prev) {
        now = bpf_ktime_get_ns();
        struct counters *c = counters_of(prev->slot, prev->inv, 0);
        if (c)
            c->c[CTR_SWITCHES_OUT]++;
        clock_out(prev, c, ctx->args[1], now);
    }
    struct task *next = task_of(ctx->args[2]);
    if (!next && !(next = adopted(ctx->args[2])))
        return 0;
    next->on_since = now ? now : bpf_ktime_get_ns();
    return 0;
}

static __always_inline int track(u32 tid, struct launch *l)
{
    if (tracked.update(&tid, l))
        return -1;
    s64 one = 1, *n = live.lookup(&l->inv);
    if (n)
        __sync_fetch_and_add(n, 1);
    else
        live.update(&l->inv, &one);
    return 0;
}

// fork, exec and exit are raw tracepoint programs, like sys_exit's and sched_switch's: a
// perf-event tracepoint's detach waits for an RCU grace period (~70 ms, at every session's
// close); a raw tracepoint's does not.
RAW_TRACEPOINT_PROBE(sched_process_fork)
{
    // (struct task_struct *parent, struct task_struct *child); runs in the parent's context
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    u32 child = 0;
    bpf_probe_read_kernel(&child, sizeof(child), (void *)(ctx->args[1] + TASK_PID_OFF));
    struct task *t = tracked_task();
    if (t) {
        struct launch l = { .inv = t->inv, .slot = t->slot };
        // the child (process or thread) is tracked from its birth, before it first runs
        struct task init = { .inv = t->inv, .slot = t->slot, .fd_gen = ~0ULL, .fd = -1,
                             .skip = SKIP_FORK };
        if (tasks.update(&child, &init) || track(child, &l))
            add(l.slot, l.inv, CTR_LOST_EVENTS, 1);   // the view is incomplete
        map_gens.delete(&child);   // a new process: none of a former one's of that number
        add(l.slot, l.inv, CTR_FORKS, 1);
        struct event *e = reserve(l.slot, l.inv);
        if (e) {
            e->kind = EV_FORK;
            e->other = child;
            events.ringbuf_submit(e, 0);
        }
        return 0;
    }
    watched_fork(ctx->args[1]);
    // A process the launcher forked while armed, and whatever it forks in turn (the sandbox's
    // launcher chain: a shell, setpriv, bwrap and its pid-namespace init), waits for the exec
    // of the client's path.
    struct launch *pending = pending_exec.lookup(&tgid);
    if (pending) {
        struct launch l = *pending;
        l.base = 0;   // a new task: all its time is after its parent joined (or not)
        pending_exec.update(&child, &l);
        return 0;
    }
    int zero = 0;
    struct config *cfg = config.lookup(&zero);
    if (cfg && cfg->armed_inv && tgid == cfg->launcher_tgid) {
        struct launch l = { .inv = cfg->armed_inv, .slot = cfg->armed_slot };
        pending_exec.update(&child, &l);
    }
    return 0;
}

static __always_inline u64 since(u64 runtime, u64 base)
{
    return runtime > base ? runtime - base : 0;
}

// A launch-chain task joining a cgroup (the chain's shell writes itself into the client's, one
// hierarchy after another, before it execs the rest): what it ran before is not the cgroup's.
TRACEPOINT_PROBE(cgroup, cgroup_attach_task)
{
    u32 pid = args->pid;
    struct launch *pending = pending_exec.lookup(&pid);
    if (pending && !pending->base && pid == (u32)bpf_get_current_pid_tgid())
        pending->base = runtime_of(CURRENT_TASK);
    return 0;
}

// The path an exec was asked for (linux_binprm.filename, at its offset in this kernel).
static __always_inline void exec_filename(char *buf, u32 size, u64 bprm)
{
    u64 name = 0;
    bpf_probe_read_kernel(&name, sizeof(name), (void *)(bprm + BPRM_FILENAME_OFF));
    bpf_probe_read_kernel_str(buf, size, (void *)name);
}

RAW_TRACEPOINT_PROBE(sched_process_exec)
{
    // (struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm); p is current, its
    // pid already the thread group's if a thread exec'd
    u32 pid = bpf_get_current_pid_tgid();
    struct task *t = tracked_task();
    u32 old = ctx->args[1];
    if (!t && old != pid) {   // a thread's exec: it has taken its (exited) leader's tid
        struct task *was = tasks.lookup(&old);
        struct launch *wl = tracked.lookup(&old);
        if (was && wl) {
            struct task moved = *was;
            struct launch ml = *wl;
            if (tasks.update(&pid, &moved) || tracked.update(&pid, &ml))
                add(ml.slot, ml.inv, CTR_LOST_EVENTS, 1);
            tasks.delete(&old);
            tracked.delete(&old);
            t = tracked_task();
        }
    }
    struct launch l;
    if (t) {
        l.inv = t->inv;
        l.slot = t->slot;
        fd_changed();   // close-on-exec descriptors are gone
    } else {
        struct launch *pending = pending_exec.lookup(&pid);
        if (!pending)
            return 0;
        l = *pending;
        // Only an exec of the configured client path is the client: the sandbox's own
        // programs stay pending, and a same-name twin forked by another thread of the
        // launcher (e.g. noise) is never taken for it.
        int zero = 0;
        struct config *cfg = inv_config.lookup(&l.inv);
        struct config *buf = scratch.lookup(&zero);
        if (!cfg || !buf)
            return 0;
        if (cfg->client_len) {
            exec_filename(buf->client_path, sizeof(buf->client_path), ctx->args[2]);
            for (int i = 0; i < PATH_MAX_LEN; i++) {  // both NUL-terminated: equal up to NUL
                char ch = buf->client_path[i];
                if (ch != cfg->client_path[i])
                    return 0;
                if (ch == 0)
                    break;
            }
        }
        pending_exec.delete(&pid);
        add(l.slot, l.inv, CTR_LAUNCH_ONCPU_NS, since(runtime_of(CURRENT_TASK), l.base));
        // exec runs on the CPU: its clock starts now
        struct task init = { .inv = l.inv, .slot = l.slot, .on_since = bpf_ktime_get_ns(),
                             .runtime_seen = runtime_of(CURRENT_TASK),
                             .stretch_rt = runtime_of(CURRENT_TASK),
                             .fd_gen = ~0ULL, .fd = -1, .skip = SKIP_EXEC };
        if (tasks.update(&pid, &init) || track(pid, &l))
            add(l.slot, l.inv, CTR_LOST_EVENTS, 1);
        roots.update(&l.inv, &pid);
    }
    add(l.slot, l.inv, CTR_EXECS, 1);
    struct event *e = reserve(l.slot, l.inv);
    if (e) {
        e->kind = EV_EXEC;
        e->other = old;
        exec_filename(e->filename, sizeof(e->filename), ctx->args[2]);
        events.ringbuf_submit(e, 0);
    }
    return 0;
}

// A task's end: its last stretch, the exit or exit_group it called (a syscall that never
// returns: counted here, from the syscall number in its saved registers; a task killed by a
// signal called neither), its invocation's leftovers when it is the launched process.
static __always_inline void task_ended(struct task *t)
{
    struct slot *s = 0;
    struct counters *c = counters_of(t->slot, t->inv, &s);
    if (c && s) {
        u64 now = bpf_ktime_get_ns();
        if (!t->on_since)
            clock_missed(t, c, CURRENT_TASK, now);
        end_stretch(t, c, s, now);   // a task killed mid-spin ends its stretch
        struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
        u64 nr = regs ? regs->orig_ax : 0;
        if (nr == __NR_exit || nr == __NR_exit_group)
            count_syscall(c, nr);
    }
    u32 tid = bpf_get_current_pid_tgid();
    tasks.delete(&tid);   // not tracked from here on (the tid may be reused)
}

RAW_TRACEPOINT_PROBE(sched_process_exit)
{
    // (struct task_struct *p, bool group_dead); p is current
    u32 tid = bpf_get_current_pid_tgid();
    struct launch *chain = pending_exec.lookup(&tid);
    if (chain) {   // a task of the launch chain that never became the client (bwrap, say)
        add(chain->slot, chain->inv, CTR_LAUNCH_ONCPU_NS,
            since(runtime_of(CURRENT_TASK), chain->base));
        pending_exec.delete(&tid);
    }
    struct task *t = tracked_task();
    struct launch *l = tracked.lookup(&tid);
    if ((u8)ctx->args[1])   // group_dead: the process ends (the tree's own, or a watched one)
        process_ended(l ? l->inv : 0, l ? l->slot : 0, bpf_get_current_pid_tgid() >> 32);
    if (t)
        task_ended(t);
    if (!l)
        return 0;
    u32 inv = l->inv, slot = l->slot;
    s64 left = 0, *n = live.lookup(&inv);
    if (n)
        left = __sync_fetch_and_add(n, -1) - 1;
    if ((u8)ctx->args[1]) {   // group_dead
        u32 tgid = bpf_get_current_pid_tgid() >> 32;
        u32 *root = roots.lookup(&inv);
        int is_root = root && *root == tgid;
        if (is_root)
            add(slot, inv, CTR_LEFTOVER_TASKS, left > 0 ? left : 0);
        struct event *e = reserve(slot, inv);
        if (e) {
            e->kind = EV_EXIT;
            e->ret = is_root;
            events.ringbuf_submit(e, 0);
        }
    }
    // The pid may be reused by an unrelated process: forget it now.
    tracked.delete(&tid);
    return 0;
}

// Softirqs that run on a tracked task's time (the kernel charges them to whoever is current)
// are subtracted from its busy stretch: the rest of the machine's traffic is not its waste.
RAW_TRACEPOINT_PROBE(softirq_entry)
{
    if (!tracked_task())
        return 0;
    int zero = 0;
    u64 *since = softirq_since.lookup(&zero);
    if (since)
        *since = bpf_ktime_get_ns();
    return 0;
}

RAW_TRACEPOINT_PROBE(softirq_exit)
{
    int zero = 0;
    u64 *since = softirq_since.lookup(&zero);
    if (!since || !*since)
        return 0;
    u64 took = bpf_ktime_get_ns() - *since;
    *since = 0;
    struct task *t = tracked_task();
    if (t) {
        t->softirq += took;
        add(t->slot, t->inv, CTR_SOFTIRQ_NS, took);
    }
    return 0;
}

// Reads through a mapping are page faults, not syscalls: the kernel maps file pages into the
// tree's page tables a window at a time (fault-around, filemap_map_pages: up to 16 pages,
// within the mapping and the file) or one page (filemap_fault, when fault-around did not map
// it). Pages of the source, or of a place of the client's own, that a tracked task's fault
// mapped are bytes it read: one pass through a mapping counts as one pass, and each pass after
// an MADV_DONTNEED or a new mapping counts again. Raw tracepoints:
// (struct address_space *mapping, pgoff_t index[, pgoff_t last_index]).
#if HAVE_FILEMAP
static __always_inline void mapped_in(u64 mapping, u64 first, u64 last)
{
    struct task *t = tracked_task();
    if (!t || last < first)
        return;
    struct counters *c = counters_of(t->slot, t->inv, 0);
    if (!c)
        return;
    u64 inode = 0;
    bpf_probe_read_kernel(&inode, sizeof(inode), (void *)(mapping + MAPPING_HOST_OFF));
    u8 kind = kind_of_inode(t->inv, inode);
    if (kind != FD_SOURCE && kind != FD_OWN)
        return;
    // Each page of the window counts once while the process's mappings stay as they are: a
    // window overlaps the last (one not 64 KiB-aligned is clipped and the next repeats it), a
    // window whose pages were not all mapped (locked, not yet read) is asked again at the next
    // fault, and the kernel skips what is mapped. A mapping syscall (MADV_DONTNEED, munmap,
    // mmap) starts a new generation: every page mapped again is read again.
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    u64 *genp = map_gens.lookup(&tgid);
    u64 gen = genp ? *genp : 0;
    if (!genp) {
        gen = bpf_ktime_get_ns();
        map_gens.update(&tgid, &gen);
    }
    struct mapped_page k = { .tgid = tgid, .inode = inode };
    u64 pages = 0, n = last - first + 1;
    for (u32 i = 0; i < WINDOW_PAGES_MAX; i++) {
        if (i >= n)
            break;
        k.index = first + i;
        u64 *seen = mapped_pages.lookup(&k);
        if (seen && *seen == gen)
            continue;
        mapped_pages.update(&k, &gen);
        pages++;
    }
    if (n > WINDOW_PAGES_MAX) {   // past the bound: counted, never dropped (a read, not a pass)
        pages += n - WINDOW_PAGES_MAX;
    }
    u64 bytes = pages << 12;   // x86-64 pages
    if (kind == FD_SOURCE)
        c->c[CTR_SOURCE_MAPPED_BYTES] += bytes;
    else
        c->c[CTR_OWN_READ_BYTES] += bytes;
}

RAW_TRACEPOINT_PROBE(mm_filemap_map_pages)
{
    mapped_in(ctx->args[0], ctx->args[1], ctx->args[2]);
    return 0;
}

RAW_TRACEPOINT_PROBE(mm_filemap_fault)
{
    mapped_in(ctx->args[0], ctx->args[1], ctx->args[1]);
    return 0;
}
#endif

// Function-entry counters: slot i counts symbol i's entries. One uprobe_multi program for
// every slot, which its link's cookie names (probes/bcc/uprobes.py); on a kernel without
#if HAVE_IO_URING
// io_uring requests that name files: OPENAT OPENAT2 RENAMEAT UNLINKAT MKDIRAT SYMLINKAT
// LINKAT SETXATTR (uapi/linux/io_uring.h). No syscall names their files, so their file events
// come from the requests themselves: the paths, copied into the kernel as a request is prepared, are read
// when it is submitted (its own struct, in req->cmd, at this kernel's offsets from its BTF),
// and the event goes out when it completes, with its result, as a syscall's would.
static __always_inline int naming_op(u8 op)
{
    return op == 18 || op == 28 || (op >= 35 && op <= 39) || op == 42;   // 42: SETXATTR
}

BPF_TABLE("lru_hash", u64, struct file_event, uring_named, 1024);   // request -> its event
BPF_PERCPU_ARRAY(uring_scratch, struct file_event, 1);

#if HAVE_IO_URING_NAMING
// A struct filename's name (a kernel string), from the pointer at req + off.
static __always_inline void uring_path(char *dst, u64 req, int off)
{
    u64 filename = 0, name = 0;
    bpf_probe_read_kernel(&filename, sizeof(filename), (void *)(req + IOKIOCB_CMD_OFF + off));
    if (filename)
        bpf_probe_read_kernel(&name, sizeof(name), (void *)(filename + FILENAME_NAME_OFF));
    if (name)
        bpf_probe_read_kernel_str(dst, PATH_BYTES, (void *)name);
}

static __always_inline s32 uring_s32(u64 req, int off)
{
    s32 v = 0;
    bpf_probe_read_kernel(&v, sizeof(v), (void *)(req + IOKIOCB_CMD_OFF + off));
    return v;
}
#endif

// A raw tracepoint: (struct io_kiocb *req), after the request was prepared.
RAW_TRACEPOINT_PROBE(io_uring_submit_req)
{
    struct task *t = tracked_task();
    u64 req = ctx->args[0];
    u8 op = 0;
    if (!t)
        return 0;
    bpf_probe_read_kernel(&op, sizeof(op), (void *)(req + IOKIOCB_OPCODE_OFF));
    if (!naming_op(op))
        return 0;
#if HAVE_IO_URING_NAMING
    int zero = 0;
    struct file_event *e = uring_scratch.lookup(&zero);
    if (!e)
        return 0;
    __builtin_memset(e, 0, sizeof(*e));
    e->inv = t->inv;
    u64 id = bpf_get_current_pid_tgid();
    e->tgid = id >> 32;
    e->tid = (u32)id;
    e->dfd = e->dfd2 = AT_FDCWD;
    bpf_get_current_comm(e->comm, sizeof(e->comm));
    if (op == 18 || op == 28) {          // io_open: the new name, and open_how's u64 flags
        e->op = FOP_OPEN;
        e->dfd = uring_s32(req, IOOPEN_DFD_OFF);
        e->flags = (u32)uring_s32(req, IOOPEN_HOW_FLAGS_OFF);
        uring_path(e->path, req, IOOPEN_FILENAME_OFF);
    } else if (op == 36 || op == 37) {   // io_unlink, io_mkdir
        int unlink = op == 36;
        e->dfd = uring_s32(req, unlink ? IOUNLINK_DFD_OFF : IOMKDIR_DFD_OFF);
        e->flags = unlink ? (u32)uring_s32(req, IOUNLINK_FLAGS_OFF) : 0;
        e->op = !unlink ? FOP_MKDIR : (e->flags & AT_REMOVEDIR) ? FOP_RMDIR : FOP_UNLINK;
        uring_path(e->path, req, unlink ? IOUNLINK_FILENAME_OFF : IOMKDIR_FILENAME_OFF);
    } else if (op == 35) {               // io_rename: the new name first, as rename's event
        e->op = FOP_RENAME;
        e->dfd = uring_s32(req, IORENAME_NEW_DFD_OFF);
        e->dfd2 = uring_s32(req, IORENAME_OLD_DFD_OFF);
        uring_path(e->path, req, IORENAME_NEWPATH_OFF);
        uring_path(e->path2, req, IORENAME_OLDPATH_OFF);
    } else if (op == 42) {               // io_setxattr: its path (relative to the cwd)
        e->op = FOP_SETXATTR;
#if HAVE_IO_URING_XATTR
        uring_path(e->path, req, IOXATTR_FILENAME_OFF);
#endif
    } else {                             // io_link: SYMLINKAT (old: the link's text), LINKAT
        e->op = op == 38 ? FOP_SYMLINK : FOP_LINK;
        e->dfd = uring_s32(req, IOLINK_NEW_DFD_OFF);
        e->dfd2 = op == 38 ? AT_FDCWD : uring_s32(req, IOLINK_OLD_DFD_OFF);
        e->flags = op == 38 ? 0 : (u32)uring_s32(req, IOLINK_FLAGS_OFF);
        uring_path(e->path, req, IOLINK_NEWPATH_OFF);
        uring_path(e->path2, req, IOLINK_OLDPATH_OFF);
    }
    if (!e->path[0] || uring_named.update(&req, e))
        add(t->slot, t->inv, CTR_LOST_EVENTS, 1);   // a name the view cannot give: incomplete
#else
    add(t->slot, t->inv, CTR_LOST_EVENTS, 1);       // this kernel's BTF does not describe them
#endif
    return 0;
}

// Its completion (res: 0, a new descriptor, or -errno): sent as its syscall's event would be.
static __always_inline void uring_named_done(struct task *t, struct counters *c, u64 req,
                                             s32 res)
{
    struct file_event *e = uring_named.lookup(&req);
    if (!e)
        return;
    int open = e->op == FOP_OPEN;
    if (open && res >= 0)   // a fixed-file slot (file_slot) gives 0 and no descriptor
        set_fd_kind(res, kind_of_file(t->inv, file_of_fd(res)));
    // as a syscall's: a change, refused or not; an open that did or was refused writing
    if ((!open || res >= 0 || (e->flags & OPEN_WRITES)) && file_event_due(c)) {
        e->ts = bpf_ktime_get_ns();
        e->ret = res;
        if (file_events.ringbuf_output(e, sizeof(*e), 0))
            c->c[CTR_LOST_EVENTS]++;
    }
    uring_named.delete(&req);
}

// io_uring requests that move bytes, completed in a tracked task (the submitter, or one of its
// adopted workers): the read and write families of the request's file, like their syscalls.
// Opcodes are uapi/linux/io_uring.h's (read: READV READ_FIXED RECVMSG READ RECV
// READ_MULTISHOT RECV_ZC READV_FIXED; write: WRITEV WRITE_FIXED SENDMSG WRITE SEND SEND_ZC
// SENDMSG_ZC WRITEV_FIXED); SPLICE and TEE move bytes from their input descriptor
// (splice_fd_in) to the request's file, a read of one and a write of the other. A raw
// tracepoint: (struct io_ring_ctx *, void *req, cqe *).
RAW_TRACEPOINT_PROBE(io_uring_complete)
{
    struct counters *c = 0;
    struct slot *s = 0;
    struct task *t = tracked_task_counters(&c, &s);
    if (!t)
        return 0;
    s32 res = 0;
    u8 op = 0;
    u64 file = 0;
    bpf_probe_read_kernel(&res, sizeof(res), (void *)(ctx->args[2] + 8));   // cqe->res
    bpf_probe_read_kernel(&op, sizeof(op), (void *)(ctx->args[1] + IOKIOCB_OPCODE_OFF));
    if (naming_op(op)) {
        uring_named_done(t, c, ctx->args[1], res);
        return 0;
    }
    if (op == 17 || op == 41 || op == 55) {   // FALLOCATE, FSETXATTR, FTRUNCATE: its file's
        bpf_probe_read_kernel(&file, sizeof(file), (void *)(ctx->args[1] + IOKIOCB_FILE_OFF));
        source_meta(t, c, kind_of_file(t->inv, file), -1, op == 17 ? FOP_FALLOCATE
                    : op == 41 ? FOP_FSETXATTR : FOP_FTRUNCATE, res);
        return 0;
    }
    if (res <= 0 && res != -ENOSPC_)
        return 0;
    int in = op == 1 || op == 4 || op == 10 || op == 22 || op == 27 || op == 49 || op == 58
             || op == 60;
    int out = op == 2 || op == 5 || op == 9 || op == 23 || op == 26 || op == 47 || op == 48
              || op == 61;
    int splice = op == 30 || op == 33;
    if (!in && !out && !splice)
        return 0;
    bpf_probe_read_kernel(&file, sizeof(file), (void *)(ctx->args[1] + IOKIOCB_FILE_OFF));
    u8 kind = kind_of_file(t->inv, file);
    if (res < 0) {   // -ENOSPC: a write to the target refused for want of space
        if ((out || splice) && kind == FD_TARGET)
            c->c[CTR_TARGET_NO_SPACE]++;
        return 0;
    }
    c->c[CTR_IOURING_BYTES] += res;
    if (splice) {
        u8 from = FD_OTHER;
#if SPLICE_FD_IN_OFF >= 0
        s32 fd_in = -1;
        u32 flags = 0;
        bpf_probe_read_kernel(&fd_in, sizeof(fd_in), (void *)(ctx->args[1] + SPLICE_FD_IN_OFF));
        bpf_probe_read_kernel(&flags, sizeof(flags), (void *)(ctx->args[1] + SPLICE_FLAGS_OFF));
        if (!(flags & (1U << 31)))   // SPLICE_F_FD_IN_FIXED: a registered file, not a descriptor
            from = kind_of_file(t->inv, file_of_fd(fd_in));   // io-wq shares the client's table
        else
            c->c[CTR_UNATTRIBUTED_BYTES] += res;
#else
        c->c[CTR_UNATTRIBUTED_BYTES] += res;
#endif
        c->c[CTR_READ_BYTES] += res;
        c->c[CTR_WRITE_BYTES] += res;
        read_from(c, from, res);
        written_to(t, c, kind, res, file);
    } else if (in) {
        c->c[CTR_READ_BYTES] += res;
        read_from(c, kind, res);
    } else {
        c->c[CTR_WRITE_BYTES] += res;
        written_to(t, c, kind, res, file);
    }
    end_stretch(t, c, s, bpf_ktime_get_ns());   // bytes moved: progress, as a syscall's
    return 0;
}
#endif

// uprobe_multi, one classic uprobe program per slot.
static __always_inline int count_func(u32 slot)
{
    struct task *t = tracked_task();
    if (t)
        add(t->slot, t->inv, CTR_FUNC_BASE + slot, 1);
    return 0;
}
int on_func(struct pt_regs *ctx)
{
    u64 slot = bpf_get_attach_cookie(ctx);
    // the mask is the bound the verifier can see (MAX_FUNCS is a power of two, below)
    return slot < MAX_FUNCS ? count_func(slot & (MAX_FUNCS - 1)) : 0;
}
#define FUNC_SLOT(i) int on_func_##i(struct pt_regs *ctx) { return count_func(i); }
FUNC_SLOT(0) FUNC_SLOT(1) FUNC_SLOT(2) FUNC_SLOT(3)
FUNC_SLOT(4) FUNC_SLOT(5) FUNC_SLOT(6) FUNC_SLOT(7)
#if MAX_FUNCS != 8
#error "MAX_FUNCS (probes/bcc/abi.py) must be the number of FUNC_SLOTs above (a power of two)"
#endif

// The tracepoints of the tp_btf and raw tracepoint programs above, one per line in the form
// `evlab doctor` reads from this file (probes/doctor/kernel.py: it checks that each exists):
/*
TRACEPOINT_PROBE(raw_syscalls, sys_exit)
TRACEPOINT_PROBE(sched, sched_switch)
TRACEPOINT_PROBE(sched, sched_process_fork)
TRACEPOINT_PROBE(sched, sched_process_exec)
TRACEPOINT_PROBE(sched, sched_process_exit)
TRACEPOINT_PROBE(irq, softirq_entry)
TRACEPOINT_PROBE(irq, softirq_exit)
TRACEPOINT_PROBE(signal, signal_generate)
*/

// --- Egress, at the socket layer of the client's cgroup -------------------------------------
// Attached by the loader to each invocation's cgroup: connect (TCP, and UDP connect), UDP
// sendmsg with a destination (sendto/sendmsg/sendmmsg on an unconnected socket, io_uring
// submissions alike), and every packet a socket of the cgroup emits. Aggregated in the kernel
// per destination; the first sighting of a destination is also a ring-buffer event.
struct cg_conf { u32 inv; u32 slot; u32 deny; };
BPF_HASH(cg_inv, u64, struct cg_conf, 256);       // client cgroup id -> invocation, mode
struct dest_key { u32 inv; u16 family; u16 port; u8 addr[16]; };
// What the contract allows (the endpoint or its proxy: ALLOW) and what is refused whatever the
// mode (the endpoint's own port while a fault proxy stands in front of it: REFUSE).
#define DEST_ALLOW 1
#define DEST_REFUSE 2
BPF_HASH(egress_allow, struct dest_key, u8, 256);

struct egress_key { u32 inv; u32 pid; u16 kind; u16 family; u16 port; u16 proto; u8 addr[16]; };
struct egress_val { u64 calls; u64 refused; u64 first; u64 last; };
BPF_HASH(egress, struct egress_key, struct egress_val, 4096);

struct flow_key { u32 inv; u16 family; u16 port; u8 proto; u8 pad[3]; u8 addr[16]; };
struct flow_val { u64 packets; u64 bytes; u64 first; u64 last; u64 dropped; };
BPF_HASH(flows, struct flow_key, struct flow_val, 4096);

// Whether the kernel refuses (connect, datagram) or drops (packet) a destination.
static __always_inline int refused(struct cg_conf *conf, u16 family, u16 port, const u8 *addr)
{
    struct dest_key k = { .inv = conf->inv, .family = family, .port = port };
    __builtin_memcpy(k.addr, addr, 16);
    u8 *rule = egress_allow.lookup(&k);
    if (rule)
        return *rule == DEST_REFUSE;
    return conf->deny;
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
    // A datagram socket's connect() sends nothing (glibc's getaddrinfo connects one to each
    // candidate address to learn its source address): it is let through, and what such a socket
    // sends is counted, and refused, packet by packet in egress_packets.
    int refuse = kind == EG_CONNECT && ctx->type == EVLAB_SOCK_DGRAM
                 ? 0 : refused(conf, family, k.port, k.addr);
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
            add(conf->slot, inv, CTR_EGRESS_LOST, 1);   // the totals are incomplete: never a pass
        struct event *e = reserve(conf->slot, inv);
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
    int drop = refused(conf, k.family, k.port, k.addr);
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
            add(conf->slot, conf->inv, CTR_EGRESS_LOST, 1);
    }
    return drop ? 0 : 1;
}
