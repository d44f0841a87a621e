"""bench/epoch_rate.py - images/s of a loader, shared by torch_dataloader.py
and recipes.py: one warm-up epoch (workers, page cache), then `epochs`
timed ones; the best epoch's images/s. Each batch is touched (summed), as
a model would read it."""
import time


def rate(make, epochs):
    dl = make()
    best = 0.0
    for epoch in range(epochs + 1):
        t0, n = time.perf_counter(), 0
        for x, y in dl:
            n += len(y)
            x.sum()
        dt = time.perf_counter() - t0
        if epoch:
            best = max(best, n / dt)
    if hasattr(dl, "close"):
        dl.close()
    return best
