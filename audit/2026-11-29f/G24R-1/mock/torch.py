"""A stand-in for torch (G24R-1/repro.py dry run without a GPU or torch): tensors are addresses, record_stream is a time.sleep(0) that lets the GIL go. Not torch; only for checking the repro's window logic."""
import time, itertools
_addr = itertools.count(0x1000, 0x100000)
_free = []
class _Storage:
    def __init__(self, t): self.t = t
    def resize_(self, n):
        assert n == 0
        _free.append(self.t._ptr); self.t._ptr = 0
    def nbytes(self): return 0 if self.t._ptr == 0 else self.t.n * 4
class Tensor:
    def __init__(self, n, v=0.0):
        self.n = n; self._ptr = _free.pop() if _free else next(_addr); self.v = v
    def data_ptr(self): return self._ptr
    def untyped_storage(self): return _Storage(self)
    def __getitem__(self, s): return self
    def tolist(self): return [self.v] * 4
def full(shape, v, device=None): return Tensor(shape[0], v)
def zeros(n, device=None): return Tensor(n)
def empty(n, device=None): return Tensor(n)
class cuda:
    @staticmethod
    def synchronize(): pass
    @staticmethod
    def empty_cache(): _free.clear()
class _NS:
    def __getattr__(self, k): return self
    def scale_add_hook(self, x, y, a):
        import g23r_op; out = Tensor(x.n); g23r_op._run(x, y, out, a, None, new_empty_like=x); return out
ops = _NS()
