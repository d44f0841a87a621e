"""_tokbatch.py - a token corpus's batches as dicts of arrays.

A Loader over a token corpus (Megatron's PREFIX.idx + PREFIX.bin) gets a
token spec in place of a pipeline (docs/tokens.md):

    tokens seq_len=L packing=concat|docs eod=ID|none pad=ID

and each sample is one window of integers (int32 or int64). This module
builds the spec from the Loader's keywords and cuts a batch's (n, width)
array into its named fields, all views (no copy):

    concat: tokens (n, L+1); input_ids = tokens[:, :-1], labels =
            tokens[:, 1:] (next-token targets)
    docs:   tokens, labels (-100 where no next token of the same
            document), segment_ids (1.., 0 padding), position_ids (within
            the segment), each (n, L); cu_seqlens (n, L+1) (a window's
            segment boundaries, the last repeated: cu_seqlens[i, :k+1] with
            k = num_segments[i] is what flash-attention's varlen kernels
            take); num_segments (n,)
"""
import re

PACKINGS = ("concat", "docs")


def spec(seq_len, packing="concat", eod=None, pad=0) -> str:
    """The token spec of the Loader's keywords, checked."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or not 1 <= seq_len <= 1 << 20:
        raise ValueError(f"seq_len must be an int in 1..{1 << 20}, got {seq_len!r}")
    if packing not in PACKINGS:
        raise ValueError(f"packing must be 'concat' or 'docs', got {packing!r}")
    for name, v in (("eod", eod), ("pad", pad)):
        if v is None and name == "eod":
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 2**31 - 1:
            raise ValueError(f"{name} must be a token id in 0..2**31-1"
                             f"{' or None' if name == 'eod' else ''}, got {v!r}")
    return (f"tokens seq_len={seq_len} packing={packing} "
            f"eod={'none' if eod is None else eod} pad={pad}")


def parse(canonical: str):
    """(seq_len, packing) of a canonical token spec, or None for a pipeline."""
    m = re.match(r"tokens seq_len=(\d+) packing=(\w+) ", canonical or "")
    return (int(m.group(1)), m.group(2)) if m else None


def fields(a, seq_len: int, packing: str) -> dict:
    """The named views of a batch array a of shape (n, 1, 1, width)."""
    a = a.reshape(a.shape[0], a.shape[-1])
    L = seq_len
    if packing == "concat":
        return {"tokens": a, "input_ids": a[:, :L], "labels": a[:, 1:]}
    return {"tokens": a[:, 0:L], "labels": a[:, L:2 * L], "segment_ids": a[:, 2 * L:3 * L],
            "position_ids": a[:, 3 * L:4 * L], "cu_seqlens": a[:, 4 * L:5 * L + 1],
            "num_segments": a[:, 5 * L + 1]}
