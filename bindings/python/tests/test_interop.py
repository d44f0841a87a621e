"""Optional interop: seedpipe.torch (only when torch is importable) and DLPack."""
import numpy as np
import pytest

import seedpipe


def test_dlpack_zero_copy(shapes):
    with seedpipe.Loader(shapes, batch_size=4) as ld:
        x, y = next(iter(ld))
        if not hasattr(x, "__dlpack__"):
            pytest.skip("numpy without __dlpack__")
        z = np.from_dlpack(x)
        assert np.shares_memory(z, x)


def test_torch_to_tensors(shapes):
    torch = pytest.importorskip("torch")
    from seedpipe.torch import to_tensors
    with seedpipe.Loader(shapes, batch_size=4, dtype="float32") as ld:
        x, y = next(iter(ld))
        tx, ty = to_tensors(x, y)
        assert tx.data_ptr() == x.__array_interface__["data"][0]      # zero copy
        assert tx.shape == torch.Size(x.shape) and tx.dtype == torch.float32
        assert ty.dtype == torch.int32
        cx, cy = to_tensors(x, y, copy=True, labels_dtype=torch.long)
        assert cx.data_ptr() != tx.data_ptr() and cy.dtype == torch.long
        assert torch.equal(cx, tx)


def test_torch_module_without_torch():
    import seedpipe.torch as st
    if st.available:
        pytest.skip("torch is installed")
    with pytest.raises(ImportError, match="PyTorch"):
        st.to_tensors(np.zeros(1), np.zeros(1))
