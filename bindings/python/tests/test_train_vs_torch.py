"""The training core (libseedpipe_train, CPU reference) against PyTorch, step
by step: the core's initial weights are copied into the same model in torch
(conv3x3 16 + ReLU + maxpool, conv3x3 32 + ReLU + maxpool, flatten, linear;
model.h), both run 50 SGD steps (lr 0.02, momentum 0.9, weight decay 5e-4:
torch.optim.SGD's rule, nn_math.h) on the same seedpipe batches, and the
losses must agree to 1e-4 relative at every step. The core is bit-exact by
itself; torch need not be, so the bound is relative. Skipped (visibly)
without torch, or where libseedpipe_train is not beside libseedpipe (the
wheel carries only the loader)."""
import ctypes
import os
from ctypes import POINTER, Structure, byref, c_float, c_int, c_size_t, c_uint32, c_uint64

import numpy as np
import pytest

import seedpipe
from seedpipe import _lib

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")

TRAIN = next((os.path.join(os.path.dirname(_lib.LIB_PATH), n)
              for n in ("libseedpipe_train.so", f"libseedpipe_train.so.{_lib.ABI_VERSION}")
              if os.path.exists(os.path.join(os.path.dirname(_lib.LIB_PATH), n))), None)


class Shape(Structure):
    _fields_ = [("c", c_int), ("h", c_int), ("w", c_int), ("classes", c_int)]


class Config(Structure):   # sp_train_config (train.h)
    _fields_ = [("seed", c_uint64), ("shape", Shape), ("lr", c_float), ("momentum", c_float),
                ("weight_decay", c_float), ("device", c_int), ("threads", c_int),
                ("cuda_device", c_int), ("strict", c_int), ("fast", c_int),
                ("conv_fwd_algo", c_int), ("conv_bwd_data_algo", c_int),
                ("conv_bwd_filter_algo", c_int)]


class Layout(Structure):   # sp_model_layout (model.h)
    _fields_ = [("in_", Shape), ("h1", c_int), ("w1", c_int), ("h2", c_int), ("w2", c_int),
                ("feat", c_size_t), ("off", c_size_t * 7), ("nparams", c_size_t),
                ("workspace", c_size_t)]


@pytest.mark.skipif(TRAIN is None, reason="libseedpipe_train not beside libseedpipe")
def test_fifty_steps_agree_with_torch(shapes):
    lib = ctypes.CDLL(TRAIN)
    lib.sp_train_config_default.argtypes = [POINTER(Config)]
    lib.sp_trainer_create.argtypes = [POINTER(Config), POINTER(ctypes.c_void_p),
                                      POINTER(_lib.sp_error)]
    lib.sp_trainer_layout.restype = POINTER(Layout)
    lib.sp_trainer_layout.argtypes = [ctypes.c_void_p]
    lib.sp_trainer_get_params.argtypes = [ctypes.c_void_p, POINTER(c_float), POINTER(c_float),
                                          POINTER(_lib.sp_error)]
    lib.sp_trainer_step.argtypes = [ctypes.c_void_p, POINTER(c_float), POINTER(ctypes.c_int32),
                                    c_uint32, POINTER(c_float), POINTER(c_uint32),
                                    POINTER(_lib.sp_error)]
    lib.sp_trainer_destroy.argtypes = [ctypes.c_void_p]
    classes = len([d for d in os.listdir(shapes) if not d.startswith(".")])
    cfg = Config()
    lib.sp_train_config_default(byref(cfg))
    cfg.seed, cfg.shape, cfg.threads = 3, Shape(3, 32, 32, classes), 1
    tr, err = ctypes.c_void_p(), _lib.sp_error()
    assert lib.sp_trainer_create(byref(cfg), byref(tr), byref(err)) == 0, err.msg
    lay = lib.sp_trainer_layout(tr).contents
    params = np.zeros(lay.nparams, np.float32)
    assert lib.sp_trainer_get_params(tr, params.ctypes.data_as(POINTER(c_float)), None,
                                     byref(err)) == 0, err.msg

    torch.set_num_threads(1)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(lay.feat, classes))
    tensors = [model[0].weight, model[0].bias, model[3].weight, model[3].bias, model[7].weight,
               model[7].bias]
    with torch.no_grad():
        for t, p in enumerate(tensors):
            chunk = params[lay.off[t]:lay.off[t + 1]]
            assert chunk.size == p.numel(), (t, chunk.size, p.shape)
            p.copy_(torch.from_numpy(chunk.copy()).view_as(p))
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum,
                          weight_decay=cfg.weight_decay)

    spec = "random_resized_crop size=32 scale=0.5,1 | hflip | normalize mean=0.5 std=0.25"
    worst, steps = 0.0, 0
    with seedpipe.Loader(shapes, pipeline=spec, seed=8, batch_size=12, dtype="float32",
                         drop_last=True, copy=True) as ld:
        for x, y in ld.stream():
            if steps == 50:
                break
            x = np.ascontiguousarray(x, np.float32)
            y = np.ascontiguousarray(y, np.int32)
            loss = c_float()
            assert lib.sp_trainer_step(tr, x.ctypes.data_as(POINTER(c_float)),
                                       y.ctypes.data_as(POINTER(ctypes.c_int32)), len(y),
                                       byref(loss), None, byref(err)) == 0, err.msg
            opt.zero_grad()
            tl = nn.functional.cross_entropy(model(torch.from_numpy(x)),
                                             torch.from_numpy(y).long())
            tl.backward()
            opt.step()
            rel = abs(loss.value - tl.item()) / abs(tl.item())
            worst = max(worst, rel)
            assert rel <= 1e-4, (steps, loss.value, tl.item())
            steps += 1
    lib.sp_trainer_destroy(tr)
    assert steps == 50
    print(f"50 steps: worst relative loss difference {worst:.2e}")
