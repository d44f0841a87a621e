"""The training core (libseedpipe_train, CPU reference) against PyTorch in
float64, step by step. The core's initial weights are copied into the same
model in torch (conv3x3 16 + ReLU + maxpool, conv3x3 32 + ReLU + maxpool,
flatten, linear; model.h), and 50 SGD steps (lr 0.02, momentum 0.9, weight
decay 5e-4: torch.optim.SGD's rule, nn_math.h) run on the same seedpipe
batches.

The reference is torch in float64, evaluated at the core's own weights and
momentum before every step (so no trajectory is compared with another:
two float32 trajectories drift apart by chaos, not by error; torch's
float32 left 1e-4 at step 28 on an AMD EPYC with AVX-512). Per step:
  - the core's loss (float32) is within a bound derived for float32
    arithmetic from the float64 forward pass (running error analysis:
    each dot product of n terms, in any order, is within gamma_n =
    n*u/(1 - n*u) of the exact value relative to the sum of |terms|,
    u = 2^-24; ReLU and max-pool are 1-Lipschitz; the loss moves by at most
    2 * max|logit error|, the gradient of -log softmax having L1 norm <= 2),
    computed from the absolute values of that step's weights and
    activations: nothing in it is measured on a machine;
  - the core's update w' - w is torch's float64 update to 1e-3 (L2 norm,
    relative), plus the float32 rounding of w' and v (u per element). A
    float32 gradient of pairwise sums over at most 2^14 terms through five
    layers is within ~30u = 2e-6 of the exact one relative to its norm
    when float32 and float64 take the same ReLU and max-pool branches; a
    near tie (a max-pool window's top two, or a ReLU input, closer than
    float32's error) can send one position's gradient another way, a
    discrete change of one path's share (1e-4 at one step in 50 here).
    1e-3 holds both and catches any wrong rule (lr, momentum, weight
    decay, a layer's gradient), which moves the update by O(1). Unlike
    the loss bound, 1e-3 is an empirical margin, not derived: 10x the
    worst difference measured (1.0e-4, at a near tie).
The float32 drift of torch and of the core from the float64 trajectory
(each run alone for 50 steps) is measured and printed, not asserted
(docs/training.md gives the figures). Skipped (visibly) without torch, or
where libseedpipe_train is not beside libseedpipe (the wheel carries only
the loader)."""
import ctypes
import os
from ctypes import POINTER, Structure, byref, c_float, c_int, c_size_t, c_uint32, c_uint64

import numpy as np
import pytest

import seedpipe
from seedpipe import _lib
import testing_lib

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")


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


U = 2.0 ** -24                  # float32 unit roundoff


def gamma(n):
    return n * U / (1 - n * U)


def loss_bound(model64, x, y):
    """An upper bound on |float32 loss - exact loss| at model64's weights
    (which hold the core's float32 weights exactly): forward running error
    analysis in float64 (see the module comment)."""
    F = torch.nn.functional
    c1, c2, fc = model64[0], model64[3], model64[7]
    h, a, e = x, x.abs(), torch.zeros_like(x)        # value, |terms| scale, error bound
    for conv in (c1, c2):
        n = conv.weight[0].numel() + 1
        wa, ba = conv.weight.abs(), conv.bias.abs()
        z = F.conv2d(h, conv.weight, conv.bias, padding=1)
        e = gamma(n) * (F.conv2d(a, wa, ba, padding=1)) + (1 + gamma(n)) * F.conv2d(e, wa, None, padding=1)
        h = F.relu(z)
        a = h + e                                      # >= |the float32 activation|
        h, a, e = F.max_pool2d(h, 2), F.max_pool2d(a, 2), F.max_pool2d(e, 2)
    h, a, e = h.flatten(1), a.flatten(1), e.flatten(1)
    n = fc.weight.shape[1] + 1
    wa, ba = fc.weight.abs(), fc.bias.abs()
    z = F.linear(h, fc.weight, fc.bias)
    ez = gamma(n) * F.linear(a, wa, ba) + (1 + gamma(n)) * F.linear(e, wa)
    k = z.shape[1]
    lse = torch.logsumexp(z, 1)
    per = lse - z.gather(1, y.view(-1, 1)).squeeze(1)
    # logits' error, then the softmax's own roundings (max subtraction and
    # the float sum of k exps: gamma(k + 2) on the sum's log; the final
    # roundings of lse and of the difference: 4u of their magnitudes)
    b = 2 * ez.max(1).values + gamma(k + 2) + 4 * U * (lse.abs() + z.abs().max(1).values)
    nb = len(y)
    return float(b.mean() + gamma(nb) * per.abs().mean()), float(per.mean())


def test_fifty_steps_agree_with_torch_float64(shapes):
    lib = testing_lib.load()   # the trainer's public API and spt_trainer_step
    lib.sp_train_config_default.argtypes = [POINTER(Config)]
    lib.sp_trainer_create.argtypes = [POINTER(Config), POINTER(ctypes.c_void_p),
                                      POINTER(_lib.sp_error)]
    lib.sp_trainer_layout.restype = POINTER(Layout)
    lib.sp_trainer_layout.argtypes = [ctypes.c_void_p]
    lib.sp_trainer_get_params.argtypes = [ctypes.c_void_p, POINTER(c_float), POINTER(c_float),
                                          POINTER(_lib.sp_error)]
    lib.spt_trainer_step.argtypes = [ctypes.c_void_p, POINTER(c_float), POINTER(ctypes.c_int32),
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
    fp = POINTER(c_float)

    def core_state():
        w, v = np.zeros(lay.nparams, np.float32), np.zeros(lay.nparams, np.float32)
        assert lib.sp_trainer_get_params(tr, w.ctypes.data_as(fp), v.ctypes.data_as(fp),
                                         byref(err)) == 0, err.msg
        return w, v

    torch.set_num_threads(1)
    nn = torch.nn

    def make(dtype):
        m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(lay.feat, classes)).to(dtype)
        return m, [m[0].weight, m[0].bias, m[3].weight, m[3].bias, m[7].weight, m[7].bias]

    def load(tensors, flat):
        with torch.no_grad():
            for t, p in enumerate(tensors):
                chunk = flat[lay.off[t]:lay.off[t + 1]]
                assert chunk.size == p.numel(), (t, chunk.size, p.shape)
                p.copy_(torch.from_numpy(np.array(chunk)).view_as(p))

    def flat_grad(tensors):
        return torch.cat([p.grad.reshape(-1) for p in tensors])

    w0, _ = core_state()
    ref, ref_t = make(torch.float64)            # re-set to the core's weights every step
    drift = {}
    for name, dtype in (("torch float64", torch.float64), ("torch float32", torch.float32)):
        m, t = make(dtype)                       # run alone: the trajectories
        load(t, w0)
        drift[name] = (m, torch.optim.SGD(m.parameters(), lr=cfg.lr, momentum=cfg.momentum,
                                          weight_decay=cfg.weight_decay), [])
    lr, mu, wd = (float(np.float32(v)) for v in (cfg.lr, cfg.momentum, cfg.weight_decay))

    spec = "random_resized_crop size=32 scale=0.5,1 | hflip | normalize mean=0.5 std=0.25"
    core_losses, worst_loss, worst_upd, steps = [], 0.0, 0.0, 0
    with seedpipe.Loader(shapes, pipeline=spec, seed=8, batch_size=12, dtype="float32",
                         drop_last=True, copy=True) as ld:
        for x, y in ld.stream():
            if steps == 50:
                break
            x = np.ascontiguousarray(x, np.float32)
            y = np.ascontiguousarray(y, np.int32)
            xt, yt = torch.from_numpy(x), torch.from_numpy(y).long()
            w, v = core_state()
            load(ref_t, w)
            for p in ref_t:
                p.grad = None
            with torch.no_grad():
                bound, exact = loss_bound(ref, xt.double(), yt)
            nn.functional.cross_entropy(ref(xt.double()), yt).backward()
            loss = c_float()
            assert lib.spt_trainer_step(tr, x.ctypes.data_as(fp),
                                       y.ctypes.data_as(POINTER(ctypes.c_int32)), len(y),
                                       byref(loss), None, byref(err)) == 0, err.msg
            # the loss, at the core's weights, within the float32 bound
            diff = abs(loss.value - exact)
            assert diff <= bound, (steps, loss.value, exact, bound)
            worst_loss = max(worst_loss, diff / bound)
            core_losses.append(loss.value)
            # the update, against torch.optim.SGD's rule in float64 from the core's (w, v)
            w64, v64 = torch.from_numpy(w).double(), torch.from_numpy(v).double()
            vn = mu * v64 + (flat_grad(ref_t) + wd * w64) if steps else \
                flat_grad(ref_t) + wd * w64              # torch: the first buffer is g
            want = -lr * vn
            wn, _ = core_state()
            got = torch.from_numpy(wn).double() - w64
            tol = 1e-3 * want.norm() + U * (w64.norm() + torch.from_numpy(wn).double().norm()) \
                + lr * U * vn.norm()
            assert (got - want).norm() <= tol, (steps, float((got - want).norm()), float(tol))
            worst_upd = max(worst_upd, float((got - want).norm() / want.norm()))
            for name, (m, opt, losses) in drift.items():
                dt = next(m.parameters()).dtype
                opt.zero_grad()
                tl = nn.functional.cross_entropy(m(xt.to(dt)), yt)
                tl.backward()
                opt.step()
                losses.append(tl.item())
            steps += 1
    lib.sp_trainer_destroy(tr)
    assert steps == 50
    traj = drift["torch float64"][2]
    rel = lambda ls: max(abs(a - b) / abs(b) for a, b in zip(ls, traj))   # noqa: E731
    first = lambda ls: next((i for i, (a, b) in enumerate(zip(ls, traj))    # noqa: E731
                             if abs(a - b) / abs(b) > 1e-4), None)
    print(f"50 steps: loss error at most {worst_loss:.2f} of its float32 bound, update "
          f"{worst_upd:.1e} relative; drift from the float64 trajectory (worst relative "
          f"loss): core {rel(core_losses):.1e} (first step over 1e-4: "
          f"{first(core_losses)}), torch float32 {rel(drift['torch float32'][2]):.1e} "
          f"(first step over 1e-4: {first(drift['torch float32'][2])})")
