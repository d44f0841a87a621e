"""A token corpus through the loader (docs/tokens.md, determinism.md section
12): every window equals tests/tokens_ref.py's (written from the spec), every
token and document appears exactly once an epoch, docs windows never cross a
document, and the batches are the same at any worker count, world size and
micro-batch, across resumes and SIGKILLed workers.

The corpora are written here by a few lines of numpy from the MMIDIDX format
(megatron-core's indexed_dataset.py), independently of seedpipe's writer."""
import json
import os
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import seedpipe

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))
import tokens_ref as T  # noqa: E402

CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5, np.uint16: 8}


def write_corpus(prefix, docs, dtype=np.uint16):
    """PREFIX.bin + PREFIX.idx, one sequence a document."""
    dt = np.dtype(dtype)
    lens = np.array([len(d) for d in docs], dtype=np.int32)
    ptrs = np.zeros(len(docs), dtype=np.int64)
    if len(docs) > 1:
        ptrs[1:] = np.cumsum(lens[:-1].astype(np.int64)) * dt.itemsize
    with open(prefix + ".bin", "wb") as f:
        for d in docs:
            f.write(np.asarray(d, dtype=dt).tobytes())
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", CODES[dt.type]))
        f.write(struct.pack("<Q", len(docs)))
        f.write(struct.pack("<Q", len(docs) + 1))
        f.write(lens.tobytes())
        f.write(ptrs.tobytes())
        f.write(np.arange(len(docs) + 1, dtype=np.int64).tobytes())
    return prefix


def random_docs(rng, n, L, vocab=30000, tagged=False):
    """n documents: empty ones, short ones, some longer than L; with tagged,
    token = doc * 1000 + position (so a window says where it came from)."""
    out = []
    for d in range(n):
        r = rng.random()
        m = 0 if r < 0.08 else int(rng.integers(1, L)) if r < 0.8 else int(rng.integers(L, 3 * L + 2))
        out.append([d * 1000 + i for i in range(m)] if tagged else
                   [int(x) for x in rng.integers(1, vocab, size=m)])
    return out


def all_windows(loader):
    """{window index: its record} over one epoch, from batch_info's indices."""
    got = {}
    for batch in loader:
        idx = loader.batch_info.indices
        rec = batch["tokens"] if loader._tokens[1] == "concat" else None
        for i, w in enumerate(idx):
            if rec is not None:
                got[int(w)] = rec[i].tolist()
            else:
                got[int(w)] = np.concatenate(
                    [batch["tokens"][i], batch["labels"][i], batch["segment_ids"][i],
                     batch["position_ids"][i], batch["cu_seqlens"][i],
                     [batch["num_segments"][i]]]).tolist()
    return got


@pytest.mark.parametrize("packing", ["concat", "docs"])
@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
def test_windows_equal_the_reference(tmp_path, packing, dtype):
    rng = np.random.default_rng(7)
    L = 16
    docs = random_docs(rng, 60, L, vocab=60000 if dtype == np.uint16 else 2**31 - 1)
    prefix = write_corpus(str(tmp_path / "c"), docs, dtype)
    for epoch in (0, 1):
        ref = T.windows(docs, L, packing, eod=65535 if packing == "concat" else None, pad=0,
                        seed=5, epoch=epoch)
        ld = seedpipe.Loader(prefix, seq_len=L, packing=packing,
                             eod=65535 if packing == "concat" else None, seed=5, batch_size=4)
        ld.set_epoch(epoch)
        got = all_windows(ld)
        assert sorted(got) == list(range(len(ref)))
        for w, rec in got.items():
            assert rec == ref[w], (epoch, w)
        ld.close()


def test_concat_every_document_once(tmp_path):
    rng = np.random.default_rng(11)
    L = 32
    docs = random_docs(rng, 80, L, vocab=1000)
    EOD = 5000
    prefix = write_corpus(str(tmp_path / "c"), docs)
    ld = seedpipe.Loader(prefix, seq_len=L, eod=EOD, pad=7, seed=3, batch_size=8,
                         order="sequential")
    orders = []
    for epoch in (0, 1):
        wins = [b["tokens"].copy() for b in ld]
        wins = np.concatenate(wins)
        S = sum(len(d) for d in docs) + len(docs)
        stream = np.concatenate([wins[:, :L].reshape(-1), wins[-1, L:]])
        assert (stream[S:] == 7).all()                  # only padding after the stream
        stream = stream[:S].tolist()
        assert stream[-1] == EOD
        got, cur = [], []
        for t in stream:
            if t == EOD:
                got.append(tuple(cur))
                cur = []
            else:
                cur.append(t)
        assert sorted(got) == sorted(tuple(d) for d in docs)   # each document once, whole
        # inputs and targets: window w's targets are its inputs shifted by one
        assert (wins[:-1, L] == wins[1:, 0]).all()
        orders.append(got)
    assert orders[0] != orders[1]                          # another order each epoch
    ld.close()


def test_docs_every_document_once_never_crossing(tmp_path):
    rng = np.random.default_rng(12)
    L = 24
    docs = random_docs(rng, 120, L, tagged=True)
    prefix = write_corpus(str(tmp_path / "c"), docs, np.int32)
    ld = seedpipe.Loader(prefix, seq_len=L, packing="docs", pad=0, seed=9, batch_size=8)
    seen = {}
    used = windows = 0
    for b in ld:
        for i in range(len(b["tokens"])):
            windows += 1
            tok, lab = b["tokens"][i], b["labels"][i]
            seg, pos, cu = b["segment_ids"][i], b["position_ids"][i], b["cu_seqlens"][i]
            k = int(b["num_segments"][i])
            assert cu[0] == 0 and (np.diff(cu[:k + 1]) > 0).all() and (cu[k:] == cu[k]).all()
            for s in range(k):
                a, e = int(cu[s]), int(cu[s + 1])
                run = tok[a:e]
                d, p0 = divmod(int(run[0]), 1000)
                assert p0 % L == 0                                    # a piece starts at j*L
                assert (run == d * 1000 + np.arange(p0, p0 + e - a)).all()   # one document
                assert (seg[a:e] == s + 1).all() and (pos[a:e] == np.arange(e - a)).all()
                nxt = [d * 1000 + p for p in range(p0 + 1, p0 + e - a + 1)]
                want = [t if t - d * 1000 < len(docs[d]) else -100 for t in nxt]
                assert lab[a:e].tolist() == want                      # next token, same document
                seen.setdefault(d, []).append((p0, e - a))
                used += e - a
            assert (seg[int(cu[k]):] == 0).all() and (lab[int(cu[k]):] == -100).all()
    for d, doc in enumerate(docs):
        pieces = sorted(seen.get(d, []))
        assert sum(n for _, n in pieces) == len(doc)                  # every token, once
        assert [p for p, _ in pieces] == list(range(0, len(doc), L))  # consecutive pieces
    assert used == sum(len(d) for d in docs)
    ld.close()


def test_docs_padding_is_small(tmp_path):
    """Best-fit decreasing over a realistic (lognormal) length mix: the
    padding is a few percent at most (the bench states it at L=2048)."""
    rng = np.random.default_rng(3)
    L = 256
    lens = np.minimum(rng.lognormal(np.log(60), 1.0, 4000).astype(int) + 1, 4 * L)
    docs = [[1] * int(n) for n in lens]
    prefix = write_corpus(str(tmp_path / "c"), docs)
    ld = seedpipe.Loader(prefix, seq_len=L, packing="docs", batch_size=64)
    pad = total = 0
    for b in ld:
        pad += int((b["segment_ids"] == 0).sum())
        total += b["segment_ids"].size
    assert pad / total < 0.02, pad / total
    ld.close()


def corpus_loader(prefix, **kw):
    kw.setdefault("seq_len", 16)
    kw.setdefault("seed", 21)
    return seedpipe.Loader(prefix, **kw)


def digests(ld, n):
    out = []
    for b in ld.stream():
        out.append(ld.batch_digest())
        if len(out) == n:
            break
    return out


@pytest.mark.parametrize("packing", ["concat", "docs"])
def test_same_batches_any_workers_world_and_resume(tmp_path, packing):
    rng = np.random.default_rng(4)
    docs = random_docs(rng, 150, 16)
    prefix = write_corpus(str(tmp_path / "c"), docs)
    B = 8
    base = corpus_loader(prefix, packing=packing, batch_size=B, epochs=2)
    nb = len(base)
    ref = []
    for b in base.stream():
        ref.append({k: np.array(v) for k, v in b.items()})
    want = [base.batch_digest()]   # the last one: the in-process digest of the same bytes
    base.close()
    for workers in (1, 3):
        ld = corpus_loader(prefix, packing=packing, batch_size=B, epochs=2, workers=workers)
        got = [{k: np.array(v) for k, v in b.items()} for b in ld.stream()]
        assert len(got) == len(ref) == 2 * nb
        for g, r in zip(got, ref):
            assert all((g[k] == r[k]).all() for k in r)
        assert ld.batch_digest() == want[0]
        ld.close()
    # world 2 (micro-batch 4) for 3 batches, its state resumed at world 4 (micro-batch 2)
    ranks = [corpus_loader(prefix, packing=packing, batch_size=B, epochs=2, rank=r, world=2,
                           workers=2 if r == 0 else 0) for r in range(2)]
    its = [r.stream() for r in ranks]
    for q in range(3):
        parts = [next(it) for it in its]
        for k in ref[q]:
            assert (np.concatenate([p[k] for p in parts]) == ref[q][k]).all()
    state = ranks[0].state_dict()
    for r in ranks:
        r.close()
    world4 = [corpus_loader(prefix, packing=packing, batch_size=B, epochs=2, rank=r, world=4,
                            workers=1 if r == 3 else 0) for r in range(4)]
    for r in world4:
        r.load_state_dict(state)
    its = [r.stream() for r in world4]
    for q in range(3, 2 * nb):
        parts = [next(it) for it in its]
        for k in ref[q]:
            assert (np.concatenate([p[k] for p in parts]) == ref[q][k]).all(), (q, k)
    for r in world4:
        r.close()


def test_sigkilled_workers_change_nothing(tmp_path):
    rng = np.random.default_rng(8)
    docs = random_docs(rng, 400, 16)
    prefix = write_corpus(str(tmp_path / "c"), docs)
    ref = corpus_loader(prefix, packing="docs", batch_size=8, epochs=1)
    want = [{k: np.array(v) for k, v in b.items()} for b in ref.stream()]
    ref.close()
    ld = corpus_loader(prefix, packing="docs", batch_size=8, epochs=1, workers=2, ring=2)
    got = []
    for i, b in enumerate(ld.stream()):
        got.append({k: np.array(v) for k, v in b.items()})
        if i in (1, 4):
            for pid in ld.worker_pids():
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
    assert len(got) == len(want)
    for g, r in zip(got, want):
        assert all((g[k] == r[k]).all() for k in r)
    ld.close()


def test_int64_output_and_named_errors(tmp_path):
    docs = [[1, 2, 3], [4, 5], [6]]
    prefix = write_corpus(str(tmp_path / "c"), docs)
    ld = seedpipe.Loader(prefix, seq_len=2, dtype="int64", batch_size=2)
    b = next(iter(ld))
    assert b["tokens"].dtype == np.int64 and b["tokens"].shape == (2, 3)
    assert ld.spec == "tokens seq_len=2 packing=concat eod=none pad=0"
    ld.close()
    with pytest.raises(ValueError, match="packing"):
        seedpipe.Loader(prefix, seq_len=2, packing="bins")
    with pytest.raises(seedpipe.Error, match="concat's"):
        seedpipe.Loader(prefix, seq_len=2, packing="docs", eod=0)
    with pytest.raises(seedpipe.Error, match="float32"):
        seedpipe.Loader(prefix, seq_len=2, dtype="float32")
    with pytest.raises(seedpipe.Error, match="tokens seq_len=L"):
        seedpipe.Loader(prefix, pipeline="shapes-train")
    with pytest.raises(seedpipe.Error, match="no window"):
        seedpipe.Loader(write_corpus(str(tmp_path / "one"), [[9]]), seq_len=4)


def test_cli_digest_order_explain(tmp_path):
    bin_ = os.environ.get("SEEDPIPE_BIN")
    if not bin_:
        pytest.skip("SEEDPIPE_BIN is not set (the seedpipe tool)")
    rng = np.random.default_rng(5)
    docs = random_docs(rng, 50, 8, tagged=True)
    prefix = write_corpus(str(tmp_path / "c"), docs, np.int32)

    def run(*args):
        return subprocess.run([bin_, *args], capture_output=True, text=True, check=True).stdout

    a = run("digest", prefix + ".idx", "--seq-len", "8", "--packing", "docs", "--batch-size",
            "4", "--out", "-")
    b = run("digest", prefix, "--seq-len", "8", "--packing", "docs", "--batch-size", "4",
            "--workers", "3", "--out", "-")
    assert a.splitlines()[-1] == b.splitlines()[-1]
    ex = run("explain", prefix, "--seq-len", "8", "--packing", "docs", "--sample", "0")
    assert "document" in ex and "segment 1" in ex
    ld = seedpipe.Loader(prefix, seq_len=8, packing="docs", batch_size=4)
    assert ld.explain(0, 0).strip() in ex
    ld.close()


def test_torch_dropin_yields_token_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    import seedpipe.torch as spt
    rng = np.random.default_rng(6)
    docs = random_docs(rng, 90, 16)
    prefix = write_corpus(str(tmp_path / "c"), docs)
    want = corpus_loader(prefix, packing="docs", batch_size=8, seed=3)
    ref = [{k: np.array(v) for k, v in b.items()} for b in want]
    want.close()
    dl = spt.DataLoader(prefix, batch_size=4, shuffle=True, num_workers=2, seed=3, seq_len=16,
                        packing="docs", world=2, rank=1)
    got = list(dl)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert set(g) == set(r) and all(isinstance(t, torch.Tensor) for t in g.values())
        n = len(g["tokens"])
        for k in r:       # rank 1 of 2: the second half of each global batch
            assert (g[k].numpy() == r[k][len(r[k]) - n:]).all()
    dl.close()


@pytest.mark.parametrize("packing", ["concat", "docs"])
def test_blend_of_corpora(tmp_path, packing, shapes):
    """A .mix of token corpora: the slots follow section 10's schedule over
    the sources' windows, each source continuing its own order across its
    passes; the same at 0 and 3 workers."""
    rng = np.random.default_rng(13)
    a = random_docs(rng, 40, 8, vocab=1000)
    b = [[t + 20000 for t in d] for d in random_docs(rng, 25, 8, vocab=1000)]
    write_corpus(str(tmp_path / "a"), a)
    write_corpus(str(tmp_path / "b"), b)
    mix = tmp_path / "blend.mix"
    mix.write_text("3\ta\n1\tb\nlength\t50\n")
    for epoch in (0, 3):
        ref = T.blend_windows([a, b], ["3", "1"], 8, packing, None, 0, seed=2, epoch=epoch,
                              length=50)
        ld = seedpipe.Loader(str(mix), seq_len=8, packing=packing, seed=2, batch_size=5,
                             order="sequential")
        ld.set_epoch(epoch)
        got = [w.copy() for b_ in ld for w in (b_["tokens"] if packing == "concat" else
                                        np.concatenate([b_["tokens"], b_["labels"],
                                                        b_["segment_ids"], b_["position_ids"],
                                                        b_["cu_seqlens"],
                                                        b_["num_segments"][:, None]], axis=1))]
        assert len(got) == 50
        assert sum(s == 0 for s, _ in ref) in (37, 38)          # 3:1 within one window
        for (s, w), g in zip(ref, got):
            assert g.tolist() == w
        ld.close()
    base = seedpipe.Loader(str(mix), seq_len=8, packing=packing, seed=2, batch_size=5, epochs=2)
    d0 = digests(base, 20)
    base.close()
    pool = seedpipe.Loader(str(mix), seq_len=8, packing=packing, seed=2, batch_size=5, epochs=2,
                           workers=3)
    assert digests(pool, 20) == d0
    pool.close()
    bad = tmp_path / "bad.mix"
    bad.write_text("1\ta\n1\t%s\n" % shapes)
    with pytest.raises(seedpipe.Error, match="all token corpora or none"):
        seedpipe.Loader(str(bad), seq_len=8)


def _flat(batch):
    return [w.tolist() for w in batch["tokens"]]


def test_blend_weights_change_on_resume(tmp_path):
    """Section 12b: a 3:1:1 blend stopped mid-epoch and resumed with the
    .mix rewritten 1:1:2 switches at the state's position: the batches equal
    the reference's (each source's draws continued from where they
    stopped), each source's first pass is every window of it exactly once
    across the switch, the state and the manifest record the switch, a
    state after the switch resumes exactly at another worker count, and a
    blend of other sources is still refused."""
    rng = np.random.default_rng(14)
    corpora = [[[t + 100000 * s for t in d] for d in random_docs(rng, 24, 8, vocab=1000)]
               for s in range(3)]
    for s, docs in enumerate(corpora):
        write_corpus(str(tmp_path / f"c{s}"), docs, np.int32)
    mix = tmp_path / "blend.mix"
    mix.write_text("3\tc0\n1\tc1\n1\tc2\n")
    B, stop = 4, 5
    old = seedpipe.Loader(str(mix), seq_len=8, batch_size=B, epochs=3, seed=9)
    it = old.stream()
    seen = [_flat(next(it)) for _ in range(stop)]
    state = old.state_dict()
    nb = len(old)
    old.close()
    assert state["blend_since"] == [0, 0] and state["blend_weights"] == [3, 1, 1]
    assert 2 * stop < nb   # the switch falls mid-epoch, the run crosses an epoch

    mix.write_text("1\tc0\n1\tc1\n2\tc2\n")
    new = seedpipe.Loader(str(mix), seq_len=8, batch_size=B, epochs=3, seed=9)
    new.load_state_dict(state)
    it = new.stream()
    after = [_flat(next(it)) for _ in range(2 * nb - stop)]
    st2 = new.state_dict()
    new.close()
    q0 = stop * B
    assert st2["blend_since"] == [0, q0] and st2["blend_weights"] == [1, 1, 2]

    sizes = T.blend_sizes(corpora, 8)
    draws = T.blend_draws_at(sizes, ["3", "1", "1"], 0, q0)
    assert st2["blend_draws"] == draws
    since = (0, q0, draws)
    ref = []
    for epoch in (0, 1):
        w = T.blend_windows(corpora, ["1", "1", "2"], 8, seed=9, epoch=epoch, since=since)
        ref += [x[1] for x in w if x is not None]
    got = [w for b in after for w in b]
    assert got == ref[:len(got)]
    fresh = T.blend_windows(corpora, ["1", "1", "2"], 8, seed=9, epoch=0)
    assert got[:8] != [x[1] for x in fresh[q0:q0 + 8]]   # a switch, not a restart
    before = T.blend_windows(corpora, ["3", "1", "1"], 8, seed=9, epoch=0)
    assert [w for b in seen for w in b] == [x[1] for x in before[:q0]]

    # Each source's first pass, across the switch: its windows, each once.
    stream = [w for b in seen for w in b] + got
    for s, docs in enumerate(corpora):
        mine = [w for w in stream if w[0] // 100000 == s and w[0] >= 0]
        if len(mine) < sizes[s]:
            continue
        want = T.windows(docs, 8, "concat", None, 0, 9, 0)
        assert sorted(mine[:sizes[s]]) == sorted(want)

    # A state after the switch: the same batches at 2 workers.
    more = seedpipe.Loader(str(mix), seq_len=8, batch_size=B, epochs=3, seed=9)
    more.load_state_dict(state)
    it = more.stream()
    for _ in range(3):
        next(it)
    mid = more.state_dict()
    rest = [_flat(next(it)) for _ in range(4)]
    more.close()
    assert mid["blend_since"] == [0, q0]
    pool = seedpipe.Loader(str(mix), seq_len=8, batch_size=B, epochs=3, seed=9, workers=2)
    pool.load_state_dict(mid)
    it = pool.stream()
    assert [_flat(next(it)) for _ in range(4)] == rest
    pool.close()

    bin_ = os.environ.get("SEEDPIPE_BIN")
    if bin_:   # the manifest's header names the switch
        sfile = tmp_path / "state.json"
        sfile.write_text(json.dumps(state))
        out = subprocess.run([bin_, "digest", str(mix), "--seq-len", "8", "--batch-size", str(B),
                              "--seed", "9", "--resume", str(sfile), "--out", "-"],
                             capture_output=True, text=True, check=True).stdout
        head = json.loads(out.splitlines()[0])
        assert head["blend_since"] == [0, q0] and head["blend_weights"] == [1, 1, 2]

    other = tmp_path / "other.mix"
    write_corpus(str(tmp_path / "d"), random_docs(rng, 24, 8))
    other.write_text("1\tc0\n1\tc1\n2\td\n")
    ld = seedpipe.Loader(str(other), seq_len=8, batch_size=B, epochs=3, seed=9)
    with pytest.raises(seedpipe.Error, match="blend identity"):
        ld.load_state_dict(state)
    ld.close()


def test_pool_without_epochs_on_a_long_epoch(tmp_path):
    """epochs=None with workers: a stream without end, also when an epoch has
    more than 256 batches (it asked the pool for 2^32 epochs, past the
    pool's bound of 2^40 batches, and failed)."""
    docs = [[1 + (i % 50)] * 9 for i in range(700)]
    prefix = write_corpus(str(tmp_path / "c"), docs)
    ld = seedpipe.Loader(prefix, seq_len=8, batch_size=2, workers=1, seed=1)
    assert len(ld) > 256
    it = ld.stream()
    first = [np.array(next(it)["tokens"]) for _ in range(3)]
    ld.close()
    ref = seedpipe.Loader(prefix, seq_len=8, batch_size=2, seed=1)
    it = ref.stream()
    assert all((np.array(next(it)["tokens"]) == f).all() for f in first)
    ref.close()
