"""A stand-in for the G23R op module with the at-use order of glue.rs (record, then read, per tensor), for the dry run of repro.py."""
import time, torch
def set_hook(h): pass
def _rec(t):
    args = (t, "stream")
    time.sleep(0)   # record_stream: the GIL let go
    del args
def _run(x, y, out, alpha, hook, new_empty_like=None):
    if new_empty_like is not None: _rec(new_empty_like)
    ts = [x, y, out]; seen = [t.data_ptr() for t in ts]
    for t in ts: _rec(t)
    now = [t.data_ptr() for t in ts]
    if now != seen: raise RuntimeError("changed (verify)")
    if hook: hook()
    for t, s in zip(ts, seen):
        _rec(t)
        if t.data_ptr() != s: raise RuntimeError("launch refused (G23R-1)")
    out.v = alpha * x.v + y.v
def scale_add_into(x, y, out, alpha, hook): _run(x, y, out, alpha, hook)
