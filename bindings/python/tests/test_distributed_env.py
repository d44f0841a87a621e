"""seedpipe.distributed_env() and Loader(rank="auto", world="auto"): every
launcher's variables, their precedence, malformed and half-set values (a
ValueError naming the variable and its value), "auto" mixed with an integer,
and the batches: "auto" under RANK=1 WORLD_SIZE=2 gives exactly the bytes
of rank=1, world=2, and the rank slices concatenated are the world=1 batch."""
import pytest

import seedpipe

ALL_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
            "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS")


@pytest.fixture
def env(monkeypatch):
    """A clean launcher environment (the session's own variables removed);
    env(NAME=value, ...) sets some."""
    for v in ALL_VARS:
        monkeypatch.delenv(v, raising=False)

    def set_(**kv):
        for k, v in kv.items():
            monkeypatch.setenv(k, v)
    return set_


@pytest.mark.parametrize("rvar,wvar", [
    ("RANK", "WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
])
def test_each_source(env, rvar, wvar):
    env(**{rvar: "3", wvar: "5"})
    de = seedpipe.distributed_env()
    assert de == (3, 5, f"{rvar}/{wvar}")
    rank, world, source = de                       # unpacks as a 3-tuple
    assert (rank, world, source) == (de.rank, de.world, de.source) == (3, 5, f"{rvar}/{wvar}")
    assert type(rank) is int and type(world) is int


def test_default_without_launcher(env):
    assert seedpipe.distributed_env() == (0, 1, "default")
    assert seedpipe.distributed_env().local_rank is None


def test_explicit_mapping_instead_of_os_environ(env):
    env(RANK="1", WORLD_SIZE="2")
    assert seedpipe.distributed_env({"PMI_RANK": "4", "PMI_SIZE": "6"}) == (4, 6, "PMI_RANK/PMI_SIZE")
    assert seedpipe.distributed_env({}) == (0, 1, "default")


def test_precedence(env):
    env(SLURM_PROCID="0", SLURM_NTASKS="2")
    assert seedpipe.distributed_env().source == "SLURM_PROCID/SLURM_NTASKS"
    env(PMI_RANK="1", PMI_SIZE="3")
    assert seedpipe.distributed_env() == (1, 3, "PMI_RANK/PMI_SIZE")
    env(OMPI_COMM_WORLD_RANK="2", OMPI_COMM_WORLD_SIZE="4")
    assert seedpipe.distributed_env() == (2, 4, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE")
    env(RANK="5", WORLD_SIZE="8")
    assert seedpipe.distributed_env() == (5, 8, "RANK/WORLD_SIZE")


def test_torchrun_under_srun(env):
    """torchrun started by srun (one task per node, 4 processes each): the
    torchrun pair wins over the node-level srun pair."""
    env(SLURM_PROCID="1", SLURM_NTASKS="2", RANK="6", WORLD_SIZE="8", LOCAL_RANK="2")
    assert seedpipe.distributed_env() == (6, 8, "RANK/WORLD_SIZE")


def test_local_rank_is_information_not_the_rank(env):
    env(RANK="5", WORLD_SIZE="8", LOCAL_RANK="1")
    de = seedpipe.distributed_env()
    assert (de.rank, de.local_rank) == (5, 1)
    assert "local_rank=1" in repr(de)
    env(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    assert seedpipe.distributed_env().local_rank == 0


def test_local_rank_alone_is_not_a_launcher(env):
    env(LOCAL_RANK="3")
    assert seedpipe.distributed_env() == (0, 1, "default")


def test_local_rank_ignored_for_other_sources(env):
    env(OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2", LOCAL_RANK="x")
    de = seedpipe.distributed_env()
    assert de == (1, 2, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE") and de.local_rank is None


def test_whitespace_around_digits_is_accepted(env):
    env(RANK=" 1", WORLD_SIZE="2\n")
    assert seedpipe.distributed_env() == (1, 2, "RANK/WORLD_SIZE")


@pytest.mark.parametrize("rvar,wvar", [("RANK", "WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE")])
@pytest.mark.parametrize("bad", ["", "x", "-1", "1.0", "1e2", "0x1", "+1", "1_0", "١"])
def test_malformed_value_names_variable(env, rvar, wvar, bad):
    env(**{rvar: bad, wvar: "4"})
    with pytest.raises(ValueError) as e:
        seedpipe.distributed_env()
    assert f"{rvar}={bad!r}" in str(e.value)
    env(**{rvar: "0", wvar: bad})
    with pytest.raises(ValueError) as e:
        seedpipe.distributed_env()
    assert f"{wvar}={bad!r}" in str(e.value)


def test_malformed_local_rank(env):
    env(RANK="0", WORLD_SIZE="2", LOCAL_RANK="zero")
    with pytest.raises(ValueError, match=r"LOCAL_RANK='zero'"):
        seedpipe.distributed_env()


@pytest.mark.parametrize("rank,world", [("2", "2"), ("7", "3")])
def test_rank_not_below_world(env, rank, world):
    env(OMPI_COMM_WORLD_RANK=rank, OMPI_COMM_WORLD_SIZE=world)
    with pytest.raises(ValueError) as e:
        seedpipe.distributed_env()
    msg = str(e.value)
    assert f"OMPI_COMM_WORLD_RANK={rank!r}" in msg and f"OMPI_COMM_WORLD_SIZE={world!r}" in msg


def test_world_zero(env):
    env(SLURM_PROCID="0", SLURM_NTASKS="0")
    with pytest.raises(ValueError, match=r"SLURM_NTASKS='0'"):
        seedpipe.distributed_env()


@pytest.mark.parametrize("present,missing", [
    ("RANK", "WORLD_SIZE"), ("WORLD_SIZE", "RANK"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_SIZE", "PMI_RANK"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
])
def test_half_pair_is_an_error(env, present, missing):
    env(**{present: "1"})
    with pytest.raises(ValueError) as e:
        seedpipe.distributed_env()
    assert f"{present}='1'" in str(e.value) and missing in str(e.value)


def test_half_pair_does_not_fall_through(env):
    """WORLD_SIZE without RANK is an error even when a complete lower pair exists."""
    env(WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="2")
    with pytest.raises(ValueError, match="WORLD_SIZE='2' is set but RANK is not"):
        seedpipe.distributed_env()


def test_lower_pairs_not_examined(env):
    env(RANK="1", WORLD_SIZE="2", SLURM_PROCID="garbage")
    assert seedpipe.distributed_env() == (1, 2, "RANK/WORLD_SIZE")


# ---- Loader ------------------------------------------------------------------

KW = dict(pipeline="shapes-train", seed=3, batch_size=12, copy=True, epochs=2)


def batches(ld):
    with ld:
        return [(x.tobytes(), y.tobytes(), x.shape[0]) for x, y in ld.stream()]


def test_loader_auto_is_rank1_world2(env, shapes):
    env(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    ld = seedpipe.Loader(shapes, rank="auto", world="auto", **KW)
    assert (ld.rank, ld.world) == (1, 2)
    auto = batches(ld)
    explicit = batches(seedpipe.Loader(shapes, rank=1, world=2, **KW))
    other = batches(seedpipe.Loader(shapes, rank=0, world=2, **KW))
    assert len(auto) == 10 and all(n == 6 for _, _, n in auto)
    assert auto == explicit
    assert auto != other        # rank matters: the comparison above can fail


def test_loader_auto_openmpi(env, shapes):
    env(OMPI_COMM_WORLD_RANK="2", OMPI_COMM_WORLD_SIZE="3")
    auto = batches(seedpipe.Loader(shapes, rank="auto", world="auto", **KW))
    assert auto == batches(seedpipe.Loader(shapes, rank=2, world=3, **KW))


def test_loader_auto_default_is_world1(env, shapes):
    ld = seedpipe.Loader(shapes, rank="auto", world="auto", **KW)
    assert (ld.rank, ld.world) == (0, 1)
    assert batches(ld) == batches(seedpipe.Loader(shapes, **KW))


@pytest.mark.parametrize("drop_last,batch_size,world", [(True, 12, 2), (False, 8, 2),
                                                         (False, 16, 8), (True, 12, 3)])
def test_rank_slices_concatenate_to_world1_batch(env, shapes, drop_last, batch_size, world):
    """The union of the rank slices (in rank order) is the world=1 batch, byte
    for byte, including a short last batch (drop_last=False: 60 samples)."""
    kw = dict(KW, batch_size=batch_size, drop_last=drop_last)
    one = batches(seedpipe.Loader(shapes, **kw))
    per_rank = []
    for r in range(world):
        env(RANK=str(r), WORLD_SIZE=str(world))
        per_rank.append(batches(seedpipe.Loader(shapes, rank="auto", world="auto", **kw)))
    assert all(len(p) == len(one) for p in per_rank)
    for i, (x, y, n) in enumerate(one):
        assert b"".join(p[i][0] for p in per_rank) == x, (i, "images")
        assert b"".join(p[i][1] for p in per_rank) == y, (i, "labels")
        assert sum(p[i][2] for p in per_rank) == n
    # and the slices differ from each other (a loader ignoring rank would fail here)
    assert len({p[0][0] for p in per_rank}) == world


def test_loader_one_auto_must_agree(env, shapes):
    env(RANK="1", WORLD_SIZE="2")
    ld = seedpipe.Loader(shapes, rank="auto", world=2, **KW)
    assert (ld.rank, ld.world) == (1, 2)
    ld.close()
    ld = seedpipe.Loader(shapes, rank=1, world="auto", **KW)
    assert (ld.rank, ld.world) == (1, 2)
    ld.close()
    with pytest.raises(ValueError, match=r"world=4.*world 2 \(RANK/WORLD_SIZE\)"):
        seedpipe.Loader(shapes, rank="auto", world=4, **KW)
    with pytest.raises(ValueError, match=r"rank=0.*rank 1 \(RANK/WORLD_SIZE\)"):
        seedpipe.Loader(shapes, rank=0, world="auto", **KW)


def test_loader_one_auto_without_launcher(env, shapes):
    with pytest.raises(ValueError, match=r"world=2.*world 1 \(default\)"):
        seedpipe.Loader(shapes, rank="auto", world=2, **KW)
    seedpipe.Loader(shapes, rank="auto", world=1, **KW).close()


def test_loader_auto_malformed_env(env, shapes):
    env(RANK="one", WORLD_SIZE="2")
    with pytest.raises(ValueError, match=r"RANK='one'"):
        seedpipe.Loader(shapes, rank="auto", world="auto", **KW)
    # explicit integers never read the environment
    seedpipe.Loader(shapes, rank=1, world=2, **KW).close()


def test_loader_auto_checks_batch_divisible(env, shapes):
    env(RANK="0", WORLD_SIZE="5")
    with pytest.raises(ValueError, match=r"batch_size \(12\) must be a multiple of world \(5\)"):
        seedpipe.Loader(shapes, rank="auto", world="auto", **KW)


@pytest.mark.parametrize("rank,world", [("Auto", "auto"), ("auto", "all"), ("1", 2), (0, "2")])
def test_loader_other_strings_refused(env, shapes, rank, world):
    with pytest.raises(ValueError, match=r"must be an integer or 'auto'"):
        seedpipe.Loader(shapes, rank=rank, world=world, **KW)


def test_loader_ints_unchanged(env, shapes):
    env(RANK="1", WORLD_SIZE="2")        # ignored: integers are used as given
    ld = seedpipe.Loader(shapes, rank=0, world=3, **KW)
    assert (ld.rank, ld.world) == (0, 3)
    ld.close()
    with pytest.raises(ValueError, match=r"rank must be in \[0, 1\], got 2"):
        seedpipe.Loader(shapes, rank=2, world=2, **KW)
    with pytest.raises(ValueError, match=r"world must be an integer"):
        seedpipe.Loader(shapes, rank=0, world=2.0, **KW)
