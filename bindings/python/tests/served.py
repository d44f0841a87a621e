"""served.py - what the service tests share (not a test itself): start
`seedpipe serve` and wait for its ready line, stop it (its exit status and
output; killed when it does not end), and read a two-rank region on two
threads."""
import subprocess
import threading

import pytest

import seedpipe


def start(cmd):
    """`seedpipe serve` run as cmd, once it printed `ready` (a test failure
    with its output when it did not)."""
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline()
    if not line.startswith("ready "):
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"serve did not get ready: {line}{out}{err}")
    return p


def stop(p, terminate=False, timeout=30):
    """(returncode, stdout, stderr) of p once it ended (SIGTERM first with
    terminate); killed, and the timeout raised, when it does not end."""
    if terminate and p.poll() is None:
        p.terminate()
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err


def two_rank_digests(region):
    """{rank: [batch digests]} of ranks 0 and 1 of region, read at once on
    two threads (each rank's client waits for the other's slices)."""
    got, errors = {}, []

    def consume(rank):
        try:
            with seedpipe.attach(region, rank=rank) as cl:
                got[rank] = [cl.batch_digest() for _ in cl.stream()]
        except Exception as e:      # reported below
            errors.append(e)

    ts = [threading.Thread(target=consume, args=(r,)) for r in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors, errors
    return got
