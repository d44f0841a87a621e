"""The Python backend's worker processes: dataset[i] and the collate call
run in processes seedpipe forks and owns, batches come back through
shared memory (_pybatch.py), and a worker that dies has its batches redone.

    pool = Pool(job, workers=4, ring=8)
    pool.submit(token, epoch, b, indices, reps)   # at most `ring` in flight
    batch = pool.take(token)                      # that batch, whoever computed it

Each worker is a fork of the trainer process (as torch's DataLoader does
on Linux), talking to it over its own AF_UNIX SOCK_SEQPACKET socket pair:
tasks go down (a few indices: the batch's work, and a buffer's memfd the
first time that worker writes into it), small replies come up ("done",
buffer, bytes used, its size; or an exception). The trainer assigns each
batch to the worker with the fewest batches queued: which worker computes
a batch decides nothing, since every sample is seeded from its own key
(job.compute). Batch buffers are the trainer's: one per batch in flight,
plus those whose batches the caller still holds (reused once freed).

Death: a worker whose socket closes is reaped (its signal read), replaced
by a new fork with the same id (worker_init_fn runs again), and its
queued batches are given to the workers again, unchanged, so the stream
is the same; a batch that was being computed when its worker died
MAX_DEATHS times is an error naming it and the signal. An exception in
dataset[i] or collate_fn reaches the trainer with its traceback, the
sample index and the batch (job.reraise).
"""
from __future__ import annotations

import mmap
import os
import pickle
import select
import signal
import socket
import sys
import traceback
import weakref

from . import _pybatch

MAX_DEATHS = 3
_MSG = 1 << 20
_TB = 32 << 10


class _Buf:
    __slots__ = ("id", "fd", "size", "map", "lease", "busy", "seen")

    def __init__(self, bid):
        self.id, self.fd, self.size = bid, os.memfd_create(f"seedpipe-batch-{bid}"), 0
        self.map, self.lease, self.busy, self.seen = None, None, False, set()

    def free(self):
        return not self.busy and (self.lease is None or self.lease() is None)

    def mapping(self, size):
        if size > self.size or self.map is None:
            self.size, self.map = size, mmap.mmap(self.fd, size)
        return self.map


class _Worker:
    __slots__ = ("wid", "pid", "sock", "queue")

    def __init__(self, wid, pid, sock):
        self.wid, self.pid, self.sock, self.queue = wid, pid, sock, []


def _death_name(status):
    if os.WIFSIGNALED(status):
        s = os.WTERMSIG(status)
        try:
            return signal.Signals(s).name
        except ValueError:
            return f"signal {s}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else "unknown"


class Pool:
    """`job` has .compute(epoch, b, indices, reps, writer) -> (bytes written,
    cache status), .worker_start(wid, nworkers) (in the worker, once),
    .describe_error(exc) (in the worker) and .reraise(reply, epoch, b,
    indices) (in the trainer)."""

    def __init__(self, job, workers, ring):
        self.job, self.nworkers, self.ring = job, workers, max(1, ring)
        self.workers, self.bufs, self.tasks, self.done = {}, [], {}, {}
        self.deaths, self.orphans, self.closed, self.next_id = {}, set(), False, 0
        self._fin = weakref.finalize(self, Pool._kill_all, self.workers)
        for w in range(workers):
            self._spawn(w)

    # ---- processes ----
    def _spawn(self, wid):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        trainer = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:     # the worker: never returns into the trainer's code
            code = 1
            try:
                parent.close()
                for w in self.workers.values():
                    w.sock.close()
                _worker_main(self.job, child, wid, self.nworkers, trainer)
                code = 0
            except BaseException:     # noqa: B902 - report anything, then leave
                try:
                    traceback.print_exc()
                except BaseException:  # noqa: B902
                    pass
            finally:
                os._exit(code)
        child.close()
        self.workers[wid] = _Worker(wid, pid, parent)

    @staticmethod
    def _kill_all(workers):
        for w in list(workers.values()):
            try:
                os.kill(w.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(w.pid, 0)
            except ChildProcessError:
                pass
            w.sock.close()
        workers.clear()

    def pids(self):
        return [self.workers[w].pid for w in sorted(self.workers)]

    # ---- work ----
    def _buffer(self):
        for b in self.bufs:
            if b.free():
                return b
        if len(self.bufs) >= 2 * self.ring + 2:
            self._detach_held()
        b = _Buf(self.next_id)
        self.next_id += 1
        self.bufs.append(b)
        return b

    def _detach_held(self):
        """The caller keeps many batches (a list of them): their buffers leave
        the pool (their memory lives on with the batches' tensors; one file
        descriptor each, inside the mapping), and the workers close theirs."""
        for b in [b for b in self.bufs if not b.busy and b.lease is not None
                  and b.lease() is not None]:
            self.bufs.remove(b)
            os.close(b.fd)
            b.map = None
            for wid in b.seen:
                w = self.workers.get(wid)
                if w is not None:
                    try:
                        w.sock.send(pickle.dumps(("forget", b.id)))
                    except OSError:
                        pass

    def submit(self, token, epoch, b, indices, reps):
        buf = self._buffer()
        buf.busy, buf.lease = True, None
        self.tasks[token] = (epoch, b, list(indices), list(reps), buf)
        self._send(token, self._least_loaded())

    def _send(self, token, w):
        epoch, b, indices, reps, buf = self.tasks[token]
        msg = pickle.dumps(("task", token, epoch, b, indices, reps, buf.id, buf.size))
        fds = [] if w.wid in buf.seen else [buf.fd]
        w.queue.append(token)
        try:
            socket.send_fds(w.sock, [msg], fds)
            buf.seen.add(w.wid)
        except OSError:
            pass        # dead: found by the next wait, its queue then redone

    def take(self, token, timeout=None):
        """The batch of `token` (submitted earlier): waits for it, handling
        deaths; raises the worker's exception if its batch failed."""
        while token not in self.done:
            self._wait(timeout)
        res = self.done.pop(token)
        epoch, b, indices, reps, buf = self.tasks.pop(token)
        buf.busy = False
        if res[0] == "died":
            raise RuntimeError(res[1])
        if res[0] == "error":
            self.job.reraise(res, epoch, b, indices)
        _, nbytes, size, self.last_status = res
        batch, lease = _pybatch.read(buf.mapping(size), nbytes)
        buf.lease = weakref.ref(lease)
        return batch

    def discard(self, token):
        """Forget a submitted batch (an abandoned epoch): its buffer is freed
        now if it came back, else when its worker replies (or dies)."""
        if token in self.done:
            self.done.pop(token)
            self.tasks.pop(token)[4].busy = False
        elif token in self.tasks:
            self.orphans.add(token)

    def _wait(self, timeout):
        socks = {w.sock: w for w in self.workers.values()}
        ready, _, _ = select.select(list(socks), [], [], timeout)
        if not ready:
            raise RuntimeError(f"DataLoader timed out after {timeout} seconds (timeout=): no "
                               "batch came back from the workers in that time")
        for s in ready:
            w = socks[s]
            try:
                msg, _, _, _ = socket.recv_fds(s, _MSG, 0)
            except OSError:
                msg = b""
            if not msg:
                self._died(w)
            else:
                self._reply(w, pickle.loads(msg))

    def _forget(self, token):
        self.orphans.discard(token)
        self.done.pop(token, None)
        self.tasks.pop(token)[4].busy = False

    def _reply(self, w, msg):
        if msg[0] == "fatal":       # the worker could not start: nothing would run
            self.close()
            raise RuntimeError(f"seedpipe: worker {w.wid} failed to start (worker_init_fn, "
                               f"or the dataset in a new process):\n{msg[1]}")
        token = msg[1]
        if token in w.queue:
            w.queue.remove(token)
        if token in self.orphans:
            self._forget(token)
        elif token in self.tasks:
            self.done[token] = ("done", msg[2], msg[3], msg[4]) if msg[0] == "done" else msg

    def _least_loaded(self):
        return min(self.workers.values(), key=lambda x: (len(x.queue), x.wid))

    def _died(self, w):
        try:
            _, status = os.waitpid(w.pid, 0)
            why = _death_name(status)
        except ChildProcessError:
            why = "unknown"
        w.sock.close()
        del self.workers[w.wid]
        for b in self.bufs:
            b.seen.discard(w.wid)
        self._spawn(w.wid)
        queue = [t for t in w.queue if t in self.tasks]
        for t in [t for t in queue if t in self.orphans]:
            self._forget(t)
        queue = [t for t in queue if t in self.tasks]
        if queue:
            t = queue[0]            # the one it was computing: tasks run in order
            n = self.deaths.get(t, 0) + 1
            self.deaths[t] = n
            if n >= MAX_DEATHS:      # take() raises it, at that batch's turn
                epoch, b, indices, _, _ = self.tasks[t]
                self.done[t] = ("died", (
                    f"seedpipe: a worker died {n} times computing batch {b} of epoch {epoch} "
                    f"(dataset indices {indices[:16]}{' ...' if len(indices) > 16 else ''}), "
                    f"last by {why}: a sample that crashes its process (a segfault in a C "
                    "library, the OOM killer) is not retried forever. Find it with "
                    "num_workers=0, or give the workers more memory"))
                queue = queue[1:]
        for t in queue:
            self._send(t, self._least_loaded())

    def close(self):
        if self.closed:
            return
        self.closed = True
        for w in self.workers.values():
            try:
                w.sock.send(pickle.dumps(("stop",)))
            except OSError:
                pass
        self._fin()
        for b in self.bufs:
            os.close(b.fd)
            b.map = None
        self.bufs.clear()


def _worker_main(job, sock, wid, nworkers, trainer):
    """A worker's loop: run tasks in the order they came, reply each."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # the trainer decides when to stop
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG: die with the trainer
    except (OSError, AttributeError):
        pass
    if os.getppid() != trainer:                      # it died before the prctl
        return
    try:
        job.worker_start(wid, nworkers)
    except BaseException:   # noqa: B902 - user code: tell the trainer, then leave
        sock.send(pickle.dumps(("fatal", traceback.format_exc()[-_TB:])))
        return
    writers = {}
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, _MSG, 4)
        if not msg:
            return
        task = pickle.loads(msg)
        if task[0] == "stop":
            return
        if task[0] == "forget":
            w = writers.pop(task[1], None)
            if w is not None:
                w.close()
                os.close(w.fd)
            continue
        _, token, epoch, b, indices, reps, bid, size = task
        if fds:
            if bid in writers:
                writers[bid].close()
            writers[bid] = _pybatch.Writer(fds[0], size)
        w = writers[bid]
        w.size = max(w.size, size)  # grown by another worker since: mapped when used
        w.reset()
        try:
            nbytes, status = job.compute(epoch, b, indices, reps, w)
            reply = ("done", token, nbytes, w.size, status)
        except BaseException as e:   # noqa: B902 - user code: report it, keep serving
            reply = ("error", token) + job.describe_error(e)
        sock.send(pickle.dumps(reply))     # small: describe_error bounds its texts
