"""What ``sureon plan --measure`` runs a training step under: a count of the bytes of live tensors, a FLOP counter that
knows the CPU's attention kernels, and a mode that skips the arithmetic of the matrix products.

- :class:`LiveBytes` counts every tensor storage an operation creates while it is active, until the storage is freed
  (a weak reference to it), so it knows the bytes alive at any moment and their peak, overall and within regions it
  is asked to watch. Tensors made before it started (the weights) are not counted: the caller adds them. It counts
  tensors, not the allocator: a CUDA caching allocator's rounding and fragmentation, and glibc's on a CPU, come on top.
- :class:`FlopCount` counts FLOPs by PyTorch's own formulas (``torch.utils.flop_counter``: from the shapes of every
  matrix product, convolution and attention kernel, forward and backward), plus the kernels a CPU runs that they do
  not list: the CPU's fused attention (``_scaled_dot_product_flash_attention_for_cpu`` and its backward, otherwise
  counted as nothing) and ``addmm_`` (TRL's fused LM head accumulates its gradients with it on a CPU). Attention is
  counted in full, the causal half included, as the plan counts it.
- :class:`SkippedArithmetic` replaces the result of each matrix product, convolution and attention kernel by zeros of
  the shape, strides and dtype the operation's own meta kernel gives (so a shape that does not fit is still refused),
  without computing it. Everything else runs as it would: data-dependent indexing, M-RoPE positions, the masks, the
  scatter of visual features, autograd, checkpointing, the allocations. FLOPs and bytes depend on shapes alone, so
  they are what a computed step gives (``tests/test_plan_measure.py`` checks both on a small model); the values are
  not (every product is zero), so losses and generated text mean nothing under it. It exists because a CPU without
  bf16 instructions multiplies bf16 matrices at about 1 GFLOPS: one step of the real widths would take hours.
"""

import weakref
from contextlib import contextmanager, nullcontext

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map


aten = torch.ops.aten


class LiveBytes(TorchDispatchMode):
    """Bytes of the tensor storages created while active and not yet freed (see the module docstring)."""

    def __init__(self):
        super().__init__()
        self.live = 0
        self.peak = 0
        self._sizes: dict[int, int] = {}
        self._regions: dict[str, list[int]] = {}  # name -> [live at its start, peak within it]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                self._count(tensor.untyped_storage())
        return out

    def include(self, tensors) -> None:
        """Count tensors made before it started (the weights, their gradients, optimizer states) from now on."""
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                self._count(tensor.untyped_storage())

    def _count(self, storage) -> None:
        key, size = storage._cdata, storage.nbytes()
        known = self._sizes.get(key)
        if known == size:
            return
        if known is None:
            weakref.finalize(storage, self._free, key)
        self._sizes[key] = size
        self.live += size - (known or 0)
        self.peak = max(self.peak, self.live)
        for region in self._regions.values():
            region[1] = max(region[1], self.live)

    def _free(self, key: int) -> None:
        self.live -= self._sizes.pop(key, 0)

    def start_region(self, name: str) -> int:
        """Watch the peak from now on; returns the bytes alive now."""
        self._regions[name] = [self.live, self.live]
        return self.live

    def end_region(self, name: str) -> tuple[int, int]:
        """(bytes alive at the region's start, its peak)."""
        start, peak = self._regions.pop(name)
        return start, peak


def _attention_flops(query, key, value, *args, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(query, key, value)


def _attention_backward_flops(grad_out, query, key, value, *args, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_backward_flop_count

    return sdpa_backward_flop_count(grad_out, query, key, value)


def _addmm_inplace_flops(self_shape, a_shape, b_shape, *args, **kwargs) -> int:
    from torch.utils.flop_counter import mm_flop

    return mm_flop(a_shape, b_shape)


CPU_FLOP_FORMULAS = {
    aten._scaled_dot_product_flash_attention_for_cpu: _attention_flops,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _attention_backward_flops,
    aten.addmm_: _addmm_inplace_flops,
}


class FlopCount(TorchDispatchMode):
    """FLOPs of every operation run while active, by PyTorch's own formulas (``torch.utils.flop_counter``) and
    :data:`CPU_FLOP_FORMULAS`. Not ``FlopCounterMode`` itself: its module tracker keeps the tensors a checkpointed
    layer recomputes alive until it exits, which would count them in every peak measured under it."""

    def __init__(self):
        from torch.utils.flop_counter import flop_registry, shape_wrapper

        super().__init__()
        self.formulas = {**flop_registry, **{op: shape_wrapper(f) for op, f in CPU_FLOP_FORMULAS.items()}}
        self.total = 0
        self.by_operation: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func._overloadpacket
        if packet not in self.formulas:
            with self:  # a composite operation: count what it is made of
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        out = func(*args, **kwargs)
        if packet in self.formulas:
            flops = int(self.formulas[packet](*args, **kwargs, out_val=out))
            self.total += flops
            self.by_operation[str(packet)] = self.by_operation.get(str(packet), 0) + flops
        return out


# The operations whose arithmetic is skipped: every FLOP the counter counts is in one of them.
SKIPPED = {
    aten.mm,
    aten.addmm,
    aten.addmm_,
    aten.bmm,
    aten.baddbmm,
    aten.convolution,
    aten.convolution_backward,
    aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
}


def _to_meta(value):
    return value.to("meta") if isinstance(value, torch.Tensor) else value


def _zeros_like_meta(value):
    if not isinstance(value, torch.Tensor):
        return value
    return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="cpu").zero_()


class SkippedArithmetic(TorchDispatchMode):
    """Matrix products, convolutions and attention kernels answer zeros of their output's shape without computing
    it (see the module docstring). Enter it before the counters, so that they see each operation and its result."""

    def __init__(self):
        super().__init__()
        self.skipped = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func._overloadpacket not in SKIPPED:
            return func(*args, **kwargs)
        self.skipped += 1
        shapes = func(*tree_map(_to_meta, args), **tree_map(_to_meta, kwargs))  # refuses shapes that do not fit
        if "out" in kwargs:  # written into the given tensor
            kwargs["out"].zero_()
            return kwargs["out"]
        if func._overloadpacket is aten.addmm_:  # in place: the accumulator keeps what it held
            return args[0]
        return tree_map(_zeros_like_meta, shapes)


@contextmanager
def instruments(skip_arithmetic: bool):
    """``(live_bytes, flops)`` active together, the arithmetic skipped underneath when asked."""
    with SkippedArithmetic() if skip_arithmetic else nullcontext(), FlopCount() as counter, LiveBytes() as tracker:
        yield tracker, counter


def main(argv: list[str] | None = None) -> int:
    """``python -m recipes.training.plan.instruments recipes/sft.py --config RECIPE ...`` (or ``-m sureon eval ...``):
    run a launch script or a module as its own command line would, with the matrix products' arithmetic skipped
    (:class:`SkippedArithmetic`): the recipes' shapes, dtypes and memory at the real widths on a CPU in minutes
    (``tests/test_plan_measure.py`` runs the 8B recipes so, on the cut-depth 8B). What it trains or answers is
    meaningless: every product is zero."""
    import runpy
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(main.__doc__)
        return 0 if argv else 2
    module = argv[1] if argv[0] == "-m" and len(argv) > 1 else None
    target = module or argv[0]
    sys.argv = [target, *argv[2 if module else 1 :]]
    with SkippedArithmetic():
        try:
            if module:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
        except SystemExit as stop:
            return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
