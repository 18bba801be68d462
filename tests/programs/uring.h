/* io_uring by raw syscalls, no liburing: a ring of 4 entries, one request at a time, waited
   for. Shared by the tests' C programs (tests/clients/egress.c, tests/programs/exerciser.c). */
#ifndef EVLAB_TEST_URING_H
#define EVLAB_TEST_URING_H

#include <errno.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef IORING_OP_FTRUNCATE   /* Linux 6.9; this machine's headers may be older */
#define IORING_OP_FTRUNCATE 55
#endif

struct ring {
    int fd;
    struct io_uring_params p;
    unsigned char *sq, *cq;
    struct io_uring_sqe *sqes;
    size_t sq_size, cq_size, sqes_size;
};

static inline void ring_close(struct ring *r)
{
    if (r->sqes != MAP_FAILED && r->sqes)
        munmap(r->sqes, r->sqes_size);
    if (r->cq != MAP_FAILED && r->cq && r->cq != r->sq)
        munmap(r->cq, r->cq_size);
    if (r->sq != MAP_FAILED && r->sq)
        munmap(r->sq, r->sq_size);
    if (r->fd >= 0)
        close(r->fd);
}

/* A ring of 4 entries; flags IORING_SETUP_SQPOLL with idle_ms for a polling kernel thread. */
static inline int ring_open(struct ring *r, unsigned flags, unsigned idle_ms)
{
    memset(r, 0, sizeof *r);
    r->p.flags = flags;
    r->p.sq_thread_idle = idle_ms;
    r->fd = (int)syscall(__NR_io_uring_setup, 4, &r->p);
    if (r->fd < 0)
        return -1;
    r->sq_size = r->p.sq_off.array + r->p.sq_entries * sizeof(unsigned);
    r->cq_size = r->p.cq_off.cqes + r->p.cq_entries * sizeof(struct io_uring_cqe);
    r->sqes_size = r->p.sq_entries * sizeof(struct io_uring_sqe);
    int single = (r->p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single)
        r->sq_size = r->cq_size = r->sq_size > r->cq_size ? r->sq_size : r->cq_size;
    r->sq = mmap(NULL, r->sq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
                 IORING_OFF_SQ_RING);
    r->cq = single ? r->sq : mmap(NULL, r->cq_size, PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
    r->sqes = mmap(NULL, r->sqes_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                   r->fd, IORING_OFF_SQES);
    if (r->sq == MAP_FAILED || r->cq == MAP_FAILED || r->sqes == MAP_FAILED) {
        ring_close(r);
        r->fd = -1;
        return -1;
    }
    return 0;
}

/* The next submission entry, zeroed (ring_submit publishes it). */
static inline struct io_uring_sqe *ring_sqe(struct ring *r)
{
    unsigned tail = *(unsigned *)(r->sq + r->p.sq_off.tail);
    unsigned mask = *(unsigned *)(r->sq + r->p.sq_off.ring_mask);
    struct io_uring_sqe *sqe = &r->sqes[tail & mask];
    memset(sqe, 0, sizeof *sqe);
    return sqe;
}

static inline int ring_submit(struct ring *r);

/* One request (op on fd, addr/len/off as the op reads them), submitted and waited for: its
   result (bytes, or -errno). */
static inline int ring_do(struct ring *r, int op, int fd, const void *addr, unsigned len, uint64_t off)
{
    struct io_uring_sqe *sqe = ring_sqe(r);
    sqe->opcode = (unsigned char)op;
    sqe->fd = fd;
    sqe->addr = (uint64_t)(uintptr_t)addr;
    sqe->len = len;
    sqe->off = off;
    return ring_submit(r);
}

/* IORING_OP_SPLICE of len bytes from fd_in (at off_in; -1: a pipe) to fd_out (at off_out). */
static inline int ring_splice(struct ring *r, int fd_in, int64_t off_in, int fd_out, int64_t off_out,
                       unsigned len)
{
    struct io_uring_sqe *sqe = ring_sqe(r);
    sqe->opcode = IORING_OP_SPLICE;
    sqe->fd = fd_out;
    sqe->off = (uint64_t)off_out;
    sqe->splice_fd_in = fd_in;
    sqe->splice_off_in = (uint64_t)off_in;
    sqe->len = len;
    return ring_submit(r);
}

/* Publish the entry ring_sqe gave and wait for its completion: its result. */
static inline int ring_submit(struct ring *r)
{
    unsigned *sq_tail = (unsigned *)(r->sq + r->p.sq_off.tail);
    unsigned mask = *(unsigned *)(r->sq + r->p.sq_off.ring_mask);
    unsigned *array = (unsigned *)(r->sq + r->p.sq_off.array);
    unsigned tail = *sq_tail, idx = tail & mask;
    array[idx] = idx;
    __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
    unsigned enter = IORING_ENTER_GETEVENTS, to_submit = 1;
    if (r->p.flags & IORING_SETUP_SQPOLL) {   /* its thread submits; wake it if it sleeps */
        to_submit = 0;
        unsigned sq_flags = __atomic_load_n((unsigned *)(r->sq + r->p.sq_off.flags),
                                            __ATOMIC_ACQUIRE);
        if (sq_flags & IORING_SQ_NEED_WAKEUP)
            enter |= IORING_ENTER_SQ_WAKEUP;
    }
    unsigned *cq_head = (unsigned *)(r->cq + r->p.cq_off.head);
    unsigned *cq_tail = (unsigned *)(r->cq + r->p.cq_off.tail);
    unsigned cq_mask = *(unsigned *)(r->cq + r->p.cq_off.ring_mask);
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(r->cq + r->p.cq_off.cqes);
    for (;;) {
        unsigned head = *cq_head;
        if (head != __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE)) {
            int res = cqes[head & cq_mask].res;
            __atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
            return res;
        }
        long n = syscall(__NR_io_uring_enter, r->fd, to_submit, 1, enter, NULL, 0);
        if (n < 0 && errno != EINTR)
            return -errno;
        if (n >= 0)
            to_submit = 0;
    }
}

#endif
