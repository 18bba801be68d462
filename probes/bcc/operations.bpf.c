// Operations as kernel evidence: signals the tracked tree sends, truncations it makes, and the
// lifetimes of processes the lab watches (a task's servers) and of the tree's own processes.
// Included by collector.bpf.c (its helpers, maps and -D flags: OPS_*, TRUNC_*, SIGF_*, from
// probes/bcc/abi.py); its records go to their own ring buffer, `ops`, read by
// probes/bcc/operations.py.
//
// Cost: signal_generate runs for every signal of the machine (rare: two hash lookups, three
// when the sender is tracked); the kill family and the truncating calls are cases of the
// collector's sys_exit switch, for tracked tasks only; a fork or an exit costs the rest of the
// machine one lookup in `watched`.

// A process the lab watches (a server's, by tgid), and what it forks: watch id (1..); the
// invocation its records go to is watch_inv[id] (0: recorded nowhere, its records are dropped).
BPF_HASH(watched, u32, u32, 4096);
BPF_ARRAY(watch_inv, u32, WATCH_SLOTS);
BPF_ARRAY(watch_lost, u64, WATCH_SLOTS);   // records of a watch the ring could not take

// The sender of the last signal of each number delivered to a tracked or watched process
// (keyed by its tgid), so that its exit, when that signal ends it, names who sent it. Least
// recently used entries go: an entry of an earlier process of the same tgid is older than the
// process (process_ended checks).
struct fatal_key { u32 tgid; u32 sig; };
struct fatal_val { u64 ts; u32 sender; u32 sender_inv; s32 code; u32 pad; };
BPF_TABLE("lru_hash", struct fatal_key, struct fatal_val, fatal, 16384);

struct op_event {
    u64 ts;
    u32 inv;
    u32 kind;         // OPS_*
    u32 tgid;         // the actor: the sender, the truncater, the process that began or ended
    u32 tid;
    u32 target;       // signal: the target's tgid; started: the parent's tgid
    u32 target_tid;   // signal: the target thread
    s32 sig;          // signal, kill call: the signal; exit: the fatal signal (0: none)
    s32 code;         // signal: si_code; truncation: TRUNC_* (how)
    s32 ret;          // signal: the kernel's result (0 delivered, 1 ignored, 2 pending...);
                      // kill call, truncation: 0 or -errno; exit: the exit code (wait status)
    u32 flags;        // SIGF_* bits
    u32 watch;        // the watch id of the target (signal) or of the actor (start, exit)
    s32 nr;           // signal, kill call: the syscall asked (x86-64 number)
    s64 arg;          // kill call, signal: the pid as the caller gave it (0, -pgid, -1, a pidfd)
    s64 arg2;         // tgkill, rt_tgsigqueueinfo: the tid as given
    u64 length;       // truncation: the length (fallocate: offset); exit: the sender's tgid
    u64 length2;      // fallocate: its length; exit: the sender's invocation
    u64 ino;          // truncation: the inode, its filesystem, its writers (i_writecount at the
    u64 dev;          // call's return) and the truncating process's own writable opens of it
    s32 writers;
    s32 own;
    s32 fd;
    u32 mode;         // fallocate: its mode; open: its flags
    char comm[16];    // the actor's
    char comm2[16];   // signal: the target's
    char name[PATH_BYTES];   // truncation: the file's name (its last component, from its
                             // dentry); by path: the path as given
};
BPF_RINGBUF_OUTPUT(ops, 256);

static __always_inline void ops_lost(u32 inv, u32 slot, u32 watch)
{
    if (inv && slot != ~0U) {
        add(slot, inv, CTR_LOST_EVENTS, 1);
    } else if (watch) {
        u64 *n = watch_lost.lookup(&watch);
        if (n)
            __sync_fetch_and_add(n, 1);
    }
}

static __always_inline struct op_event *op_reserve(u32 inv, u32 slot, u32 watch, u32 kind)
{
    struct op_event *e = ops.ringbuf_reserve(sizeof(struct op_event));
    if (!e) {
        ops_lost(inv, slot, watch);
        return 0;
    }
    // zeroed in pieces: one memset of the whole record is a call to memset past clang's bound
    __builtin_memset(e, 0, 128);
    __builtin_memset((char *)e + 128, 0, sizeof(*e) - 128);
    e->ts = bpf_ktime_get_ns();
    e->inv = inv;
    e->kind = kind;
    u64 id = bpf_get_current_pid_tgid();
    e->tgid = id >> 32;
    e->tid = (u32)id;
    e->watch = watch;
    bpf_get_current_comm(e->comm, sizeof(e->comm));
    return e;
}

static __always_inline u32 watch_of(u32 tgid, u32 *inv)
{
    u32 *w = watched.lookup(&tgid);
    if (!w)
        return 0;
    u32 id = *w;
    u32 *i = watch_inv.lookup(&id);
    *inv = i ? *i : 0;
    return id;
}

static __always_inline int is_kill_call(u64 nr)
{
    return nr == __NR_kill || nr == __NR_tkill || nr == __NR_tgkill
        || nr == __NR_rt_sigqueueinfo || nr == __NR_rt_tgsigqueueinfo
        || nr == __NR_pidfd_send_signal;
}

// A signal sent by the kill family: the syscall the sender is in, and a code a sender gives
// (SI_USER, SI_QUEUE, SI_TKILL, or another negative one from rt_sigqueueinfo) — not one the
// kernel makes on the sender's time (a timer's SI_TIMER, SEND_SIG_PRIV's SI_KERNEL from an
// interrupt that came while the sender was in such a call).
#define SI_USER_ 0
#define SI_KERNEL_ 0x80
#define SI_TIMER_ (-2)
static __always_inline int asked(u64 nr, s32 code)
{
    return is_kill_call(nr) && code <= 0 && code != SI_TIMER_;
}

// (int sig, struct kernel_siginfo *info, struct task_struct *task, int group, int result)
RAW_TRACEPOINT_PROBE(signal_generate)
{
    s32 sig = (s32)ctx->args[0];
    u64 info = ctx->args[1], task = ctx->args[2];
    u32 target = 0, target_tid = 0;
    bpf_probe_read_kernel(&target, sizeof(target), (void *)(task + TASK_TGID_OFF));
    bpf_probe_read_kernel(&target_tid, sizeof(target_tid), (void *)(task + TASK_PID_OFF));
    s32 code = SI_USER_;   // info 0: SEND_SIG_NOINFO (a user's); 1: SEND_SIG_PRIV (the kernel's)
    if (info == 1)
        code = SI_KERNEL_;
    else if (info)
        bpf_probe_read_kernel(&code, sizeof(code), (void *)(info + 8));   // si_code
    u32 tinv = 0, twatch = watch_of(target, &tinv);
    struct launch *mine = tracked.lookup(&target);
    struct task *t = tracked_task();
    u64 sender = bpf_get_current_pid_tgid() >> 32;
    if ((twatch || mine) && (s32)ctx->args[4] == 0) {   // delivered: the one that may end it
        struct fatal_key k = { .tgid = target, .sig = (u32)sig };
        struct fatal_val v = { .ts = bpf_ktime_get_ns(), .sender = (u32)sender,
                               .sender_inv = t ? t->inv : 0, .code = code };
        fatal.update(&k, &v);
    }
    if (!t)
        return 0;
    struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    u64 nr = regs ? regs->orig_ax : 0;
    if (!asked(nr, code))
        return 0;
    struct op_event *e = op_reserve(t->inv, t->slot, 0, OPS_SIGNAL);
    if (!e)
        return 0;
    e->target = target;
    e->target_tid = target_tid;
    e->sig = sig;
    e->code = code;
    e->ret = (s32)ctx->args[4];
    e->nr = (s32)nr;
    e->arg = (s32)regs->di;
    e->arg2 = nr == __NR_tgkill || nr == __NR_rt_tgsigqueueinfo ? (s32)regs->si : 0;
    e->watch = twatch;
    e->flags = ((s32)ctx->args[3] ? SIGF_GROUP : 0)
               | (mine && mine->inv == t->inv ? SIGF_OWN : 0)
               | (twatch ? SIGF_WATCHED : 0);
    bpf_probe_read_kernel_str(e->comm2, sizeof(e->comm2), (void *)(task + TASK_COMM_OFF));
    ops.ringbuf_submit(e, 0);
    return 0;
}

// The kill family's return, as the caller asked: (pid, sig) for kill, (tid, sig) for tkill,
// (tgid, tid, sig) for tgkill, (pid, sig, info) for rt_sigqueueinfo, (tgid, tid, sig, info)
// for rt_tgsigqueueinfo, (pidfd, sig, info, flags) for pidfd_send_signal.
static __always_inline void kill_called(struct task *t, u64 regs, u64 nr, s64 ret)
{
    struct op_event *e = op_reserve(t->inv, t->slot, 0, OPS_KILL_CALL);
    if (!e)
        return;
    int three = nr == __NR_tgkill || nr == __NR_rt_tgsigqueueinfo;
    e->nr = (s32)nr;
    e->arg = (s32)REG(regs, di);
    e->arg2 = three ? (s32)REG(regs, si) : 0;
    e->sig = (s32)(three ? REG(regs, dx) : REG(regs, si));
    e->ret = (s32)ret;
    ops.ringbuf_submit(e, 0);
}

// Writers of a truncated file: the inode's i_writecount (struct files open for writing on it,
// whoever holds them; negative while it is executed) at the call's return, and how many of
// those the truncating process itself holds (distinct struct files of its descriptor table on
// that inode, opened for writing: a dup'd descriptor is the same file). A table past
// OWN_FDS_MAX descriptors, or more than two such files of its own, is not counted whole: the
// record says so (UNCOUNTED).
#define FMODE_CREATED_ 0x100000
#define OWN_FDS_MAX 1024
// 1 if x is not 0, else 0, in ALU instructions: the walk's body below has no branch but its
// end, so the verifier follows one path through each of its OWN_FDS_MAX steps (a compare and
// jump in it forked a path per outcome, step after step). The empty asm hides -x from clang,
// which would turn the expression back into a compare and jump.
static __always_inline u64 nonzero(u64 x)
{
    u64 minus = 0 - x;
    asm volatile("" : "+r"(minus));
    return (x | minus) >> 63;
}

static __always_inline void own_writers(struct op_event *e, u64 inode)
{
    u64 task = bpf_get_current_task(), files = 0, fdt = 0, array = 0;
    u64 first = 0, second = 0, over = 0;
    u32 max = 0;
    bpf_probe_read_kernel(&files, sizeof(files), (void *)(task + TASK_FILES_OFF));
    if (files)
        bpf_probe_read_kernel(&fdt, sizeof(fdt), (void *)(files + FILES_FDT_OFF));
    if (fdt) {
        bpf_probe_read_kernel(&max, sizeof(max), (void *)(fdt + FDT_MAX_FDS_OFF));
        bpf_probe_read_kernel(&array, sizeof(array), (void *)(fdt + FDT_FD_OFF));
    }
    if (!array || max > OWN_FDS_MAX)
        e->flags |= TRUNCF_UNCOUNTED;
    if (!array)
        max = 0;
    for (u32 i = 0; i < OWN_FDS_MAX; i++) {
        if (i >= max)
            break;
        u64 file = 0, ino = 0;
        u32 mode = 0;   // an empty slot (file 0): neither read succeeds, nothing matches
        bpf_probe_read_kernel(&file, sizeof(file), (void *)(array + (u64)i * 8));
        bpf_probe_read_kernel(&ino, sizeof(ino), (void *)(file + FILE_INODE_OFF));
        bpf_probe_read_kernel(&mode, sizeof(mode), (void *)(file + FILE_MODE_OFF));
        // a writable file of the inode, not one already counted (a dup'd descriptor's)
        u64 match = nonzero(file) & (1 - nonzero(ino ^ inode)) & ((mode / FMODE_WRITE_) & 1)
                    & nonzero(file ^ first) & nonzero(file ^ second);
        u64 has1 = nonzero(first), has2 = nonzero(second);
        u64 to1 = match & (1 - has1), to2 = match & has1 & (1 - has2);
        over |= match & has1 & has2;
        first |= file & (0 - to1);
        second |= file & (0 - to2);
    }
    if (over)
        e->flags |= TRUNCF_UNCOUNTED;
    e->own = (first != 0) + (second != 0);
}

// A truncation of a tracked task: how (TRUNC_*), the struct file it went through (0: by path,
// whose inode is gone by the call's return), its arguments and result.
static __always_inline void truncated(struct task *t, u32 how, u64 file, s32 fd, u64 path,
                                      u64 length, u64 length2, u32 mode, s64 ret)
{
    struct op_event *e = op_reserve(t->inv, t->slot, 0, OPS_TRUNCATE);
    if (!e)
        return;
    e->code = how;
    e->fd = fd;
    e->length = length;
    e->length2 = length2;
    e->mode = mode;
    e->ret = (s32)ret;
    u64 inode = 0, sb = 0, dentry = 0, name = 0;
    if (file)
        bpf_probe_read_kernel(&inode, sizeof(inode), (void *)(file + FILE_INODE_OFF));
    if (inode) {
        bpf_probe_read_kernel(&e->ino, sizeof(e->ino), (void *)(inode + INODE_INO_OFF));
        bpf_probe_read_kernel(&sb, sizeof(sb), (void *)(inode + INODE_SB_OFF));
        if (sb)
            bpf_probe_read_kernel(&e->dev, sizeof(u32), (void *)(sb + SB_DEV_OFF));
        bpf_probe_read_kernel(&e->writers, sizeof(e->writers),
                              (void *)(inode + INODE_WRITECOUNT_OFF));
        own_writers(e, inode);
        bpf_probe_read_kernel(&dentry, sizeof(dentry), (void *)(file + FILE_DENTRY_OFF));
        if (dentry)
            bpf_probe_read_kernel(&name, sizeof(name), (void *)(dentry + DENTRY_NAME_OFF));
        if (name)
            bpf_probe_read_kernel_str(e->name, sizeof(e->name), (void *)name);
    } else {
        e->flags |= TRUNCF_NO_INODE;
        if (path)
            read_user_str(e->name, sizeof(e->name), (const void *)path);
    }
    ops.ringbuf_submit(e, 0);
}

// fallocate modes that take data away: PUNCH_HOLE, COLLAPSE_RANGE, ZERO_RANGE
#define FALLOC_LOSES 0x1a

static __always_inline int truncating(u64 nr)
{
    return nr == __NR_truncate || nr == __NR_ftruncate || nr == __NR_fallocate
        || nr == __NR_open || nr == __NR_openat || nr == __NR_openat2 || nr == __NR_creat;
}

// An open's flags (open, openat, openat2's open_how, creat's own), from its arguments.
static __always_inline u32 open_flags(u64 regs, u64 nr)
{
    u64 how = 0;   // struct open_how starts with its u64 flags
    if (nr == __NR_open)
        return (u32)REG(regs, si);
    if (nr == __NR_openat)
        return (u32)REG(regs, dx);
    if (nr == __NR_creat)
        return O_CREAT | O_WRONLY | O_TRUNC;
    read_user(&how, sizeof(how), (const void *)REG(regs, dx));
    return (u32)how;
}

// Whether an open with O_TRUNC truncated: it returned a descriptor of a regular file it did
// not create (O_CREAT making a new file truncates nothing, nor does O_TRUNC on a FIFO or a
// device).
static __always_inline int open_truncates(u64 file)
{
    u64 inode = 0;
    u32 fmode = 0;
    u16 imode = 0;
    if (!file)
        return 0;
    bpf_probe_read_kernel(&fmode, sizeof(fmode), (void *)(file + FILE_MODE_OFF));
    bpf_probe_read_kernel(&inode, sizeof(inode), (void *)(file + FILE_INODE_OFF));
    if (inode)
        bpf_probe_read_kernel(&imode, sizeof(imode), (void *)(inode + INODE_MODE_OFF));
    return !(fmode & FMODE_CREATED_) && (imode & S_IFMT_) == S_IFREG_;
}

// A truncating call of a tracked task returned: truncate(path, length), ftruncate(fd, length),
// fallocate(fd, mode, offset, len) with a mode that loses data, an open with O_TRUNC that
// truncated (x86-64: di, si, dx, r10). Refused ones too (ret), but for opens. One call of
// truncated() for them all: the verifier walks its loop once.
static __always_inline void truncation_done(struct task *t, u64 regs, u64 nr, s64 ret)
{
    s32 fd = (s32)REG(regs, di);
    u64 file = 0, path = 0, length = REG(regs, si), length2 = 0;
    u32 how = TRUNC_FD, mode = 0;
    if (nr == __NR_truncate) {
        how = TRUNC_PATH;
        path = REG(regs, di);
        fd = -1;
    } else if (nr == __NR_ftruncate) {
        file = file_of_fd(fd);
    } else if (nr == __NR_fallocate) {
        mode = (u32)REG(regs, si);
        if (!(mode & FALLOC_LOSES))
            return;
        how = TRUNC_FALLOCATE;
        file = file_of_fd(fd);
        length = REG(regs, dx);
        length2 = REG(regs, r10);
    } else {
        mode = open_flags(regs, nr);
        file = ret >= 0 ? file_of_fd(ret) : 0;
        if (!(mode & O_TRUNC) || !open_truncates(file))
            return;
        how = TRUNC_OPEN;
        fd = (s32)ret;
        path = nr == __NR_open || nr == __NR_creat ? REG(regs, di) : REG(regs, si);
        length = 0;
    }
    truncated(t, how, file, fd, path, length, length2, mode, ret);
}

#if HAVE_IO_URING
// io_uring's truncating requests, completed in a tracked task (the submitter, or one of its
// workers, which share its descriptors): FTRUNCATE, FALLOCATE with a mode that loses data, an
// OPENAT/OPENAT2 with O_TRUNC that truncated (res: its descriptor, or -errno). Without their
// offsets in the BTF, or for an open into a fixed-file slot (no descriptor to find its file
// by), the view is incomplete: a lost event. A program of its own beside the collector's
// io_uring_complete (probes/bcc/load.py attach_btf loads it as tp_btf): in that one it would
// cost every compile a third more.
int uring_truncations(struct bpf_raw_tracepoint_args *ctx)
{
    struct counters *c = 0;
    struct slot *s = 0;
    struct task *t = tracked_task_counters(&c, &s);
    if (!t)
        return 0;
    u64 req = ctx->args[1];
    s32 res = 0;
    u8 op = 0;
    bpf_probe_read_kernel(&res, sizeof(res), (void *)(ctx->args[2] + 8));   // cqe->res
    bpf_probe_read_kernel(&op, sizeof(op), (void *)(req + IOKIOCB_OPCODE_OFF));
    int open = op == 18 || op == 28;   // OPENAT, OPENAT2
    if (!open && op != 17 && op != 55)   // FALLOCATE, FTRUNCATE
        return 0;
#if HAVE_IO_URING_NAMING && HAVE_IO_URING_TRUNC
    u64 cmd = req + IOKIOCB_CMD_OFF, file = 0, length = 0, length2 = 0;
    u32 how = TRUNC_URING_FD, mode = 0, slot = 0;
    s32 fd = -1;
    if (open) {
        bpf_probe_read_kernel(&mode, sizeof(mode), (void *)(cmd + IOOPEN_HOW_FLAGS_OFF));
        if (!(mode & O_TRUNC) || res < 0)
            return 0;
        bpf_probe_read_kernel(&slot, sizeof(slot), (void *)(cmd + IOOPEN_FILE_SLOT_OFF));
        if (slot) {
            add(t->slot, t->inv, CTR_LOST_EVENTS, 1);
            return 0;
        }
        file = file_of_fd(res);
        if (!open_truncates(file))
            return 0;
        how = TRUNC_URING_OPEN;
        fd = res;
    } else {
        bpf_probe_read_kernel(&file, sizeof(file), (void *)(req + IOKIOCB_FILE_OFF));
        if (op == 55) {
            bpf_probe_read_kernel(&length, sizeof(length), (void *)(cmd + IOFTRUNC_LEN_OFF));
        } else {
            bpf_probe_read_kernel(&mode, sizeof(mode), (void *)(cmd + IOSYNC_MODE_OFF));
            if (!(mode & FALLOC_LOSES))
                return 0;
            how = TRUNC_URING_FALLOCATE;
            bpf_probe_read_kernel(&length, sizeof(length), (void *)(cmd + IOSYNC_OFF_OFF));
            bpf_probe_read_kernel(&length2, sizeof(length2), (void *)(cmd + IOSYNC_LEN_OFF));
        }
    }
    truncated(t, how, file, fd, 0, length, length2, mode, res);
#else
    add(t->slot, t->inv, CTR_LOST_EVENTS, 1);   // open: whether it truncated is not known
#endif
    return 0;
}
#endif

// A watched process forked another process (not a thread): watched as its parent is.
static __always_inline void watched_fork(u64 child_task)
{
    u32 tgid = bpf_get_current_pid_tgid() >> 32, inv = 0;
    u32 watch = watch_of(tgid, &inv);
    if (!watch)
        return;
    u32 child = 0, child_tgid = 0;
    bpf_probe_read_kernel(&child, sizeof(child), (void *)(child_task + TASK_PID_OFF));
    bpf_probe_read_kernel(&child_tgid, sizeof(child_tgid), (void *)(child_task + TASK_TGID_OFF));
    if (child != child_tgid)   // a thread: its process is watched already
        return;
    watched.update(&child, &watch);
    if (!inv)
        return;
    struct op_event *e = op_reserve(inv, ~0U, watch, OPS_STARTED);
    if (!e)
        return;
    e->tgid = child;
    e->tid = child;
    e->target = tgid;
    ops.ringbuf_submit(e, 0);
}

// The end of a process (its last thread) that is the tree's own (own_inv) or watched: its exit code
// and, when a signal ended it, who sent that signal (0: none was seen).
static __always_inline void process_ended(u32 own_inv, u32 own_slot, u32 tgid)
{
    u32 inv = 0, watch = watch_of(tgid, &inv);
    if (watch)
        watched.delete(&tgid);
    if (!own_inv && !inv)
        return;
    struct op_event *e = op_reserve(own_inv ? own_inv : inv, own_inv ? own_slot : ~0U, watch,
                                    OPS_EXIT);
    if (!e)
        return;
    u64 task = bpf_get_current_task();
    s32 code = 0;
    bpf_probe_read_kernel(&code, sizeof(code), (void *)(task + TASK_EXIT_CODE_OFF));
    e->ret = code;
    e->sig = code & 0x7f;
    e->flags = own_inv ? SIGF_OWN : SIGF_WATCHED;
    if (e->sig) {
        // a sender of this process's, not of an earlier one's of the same pid: sent after its
        // leader began (start_time: CLOCK_MONOTONIC, bpf_ktime_get_ns's clock)
        u64 leader = 0, began = 0;
        bpf_probe_read_kernel(&leader, sizeof(leader), (void *)(task + TASK_LEADER_OFF));
        if (leader)
            bpf_probe_read_kernel(&began, sizeof(began), (void *)(leader + TASK_START_OFF));
        struct fatal_key k = { .tgid = tgid, .sig = (u32)e->sig };
        struct fatal_val *v = fatal.lookup(&k);
        if (v && v->ts >= began) {
            e->length = v->sender;
            e->length2 = v->sender_inv;
            e->code = v->code;
            e->flags |= SIGF_SENDER;
        }
        fatal.delete(&k);
    }
    ops.ringbuf_submit(e, 0);
}
