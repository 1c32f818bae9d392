"""G24R-1 (audit 2026-11-29f): the at-use check of one tensor lets the GIL go, after an earlier
argument of the same launch was read for the last time.

`TensorSlice::kernel_arg` (G23R-1's fix) runs `Call::check_at_use` for each tensor as the
launcher builds its arguments, in parameter order: record_stream(t) (a torch op: its binding
releases the GIL), then the C getters. So while the launcher checks `y`, another thread's
*Python* code runs (not a race inside torch: it holds the GIL, this thread is parked in
record_stream), after `x` was read for the last time. That code frees `x`'s memory
(`x.untyped_storage().resize_(0)`, the call's reference to `x` does not hold its memory), and the
kernel is launched with the address `x` had.

The other thread knows when to strike without any timing luck: during `record_stream(t)` the
argument tuple holds one more reference to `t` (sys.getrefcount). It waits for the window of
`x` (x's at-use check begun) and then for the window of `y` (x's read is over), then frees `x`.

Modes (given in order on the command line, run one after another in one process; `fault` ends the
CUDA context: run it last, or alone):
  hook     g23r_op.scale_add_into(x, y, out, alpha, hook): the op's closure runs `hook` (arming the
           other thread), then launches; the thread frees `x` in `y`'s window and takes its
           memory for `victim` (torch's cache hands the same block back).
  nohook   torch.ops.g23r1.scale_add_hook(x, y, alpha) with no hook at all (an op declared with
           `Op`, what the library's ops are): the thread counts windows (verify's x, y, then the
           at-use x, y) and strikes in the second `y` window. `nohook3`: in the third (in case a
           getter of the first reads lets the GIL go too, which would add an x, y pair).
  control  as `hook`, but the thread strikes in `x`'s own window (before x's at-use read): the
           launch must be refused (G23R-1's fix working), HELD.
  fault    as `hook`, but `x`'s memory goes back to the driver (torch.cuda.empty_cache()): the
           kernel reads unmapped memory (CUDA_ERROR_ILLEGAL_ADDRESS).
Prints UNSOUND when the launch went ahead with memory freed after its last check, HELD when the
launch was refused (G23R-1's RuntimeError) or no window was found.

Run (GPU machine): PYTHONPATH=<unpacked g23r_torch_op wheel>
python3 repro.py control hook nohook; python3 repro.py fault
"""

import sys
import threading

import torch

MODES = sys.argv[1:] or ["hook"]
MODE = None  # the mode being run
N = 1 << 22  # 16 MiB of f32: each tensor a whole segment of its own (torch rounds an allocation below
# 10 MiB up to a shared 20 MiB segment, which empty_cache would not release)

# Not `import ferrocuda_torch`: two extensions built on ferrocuda-torch in one process share the op
# registrar (G23L-1, known); g23r_op carries its own copy of the glue.
import g23r_op

sys.setswitchinterval(1e-6)  # the parked thread asks for the GIL at once: it gets every release


class Attack:
    def __init__(self, x, y, arm_at_hook):
        self.x, self.y = x, y
        self.base = None
        self.armed = False
        self.arm_at_hook = arm_at_hook
        self.windows = []  # the tensors whose record_stream window the thread saw, in order
        self.done = False
        self.struck = None
        self.victim = None
        self.x_address = x.data_ptr()

    def skew(self):
        return sys.getrefcount(self.x) - sys.getrefcount(self.y)

    def arm(self):
        # Called with no record_stream in flight: x and y are held alike (the call's `keep`, the
        # op's arguments, this object), so their difference is the base; inside record_stream(t)
        # the argument tuple adds to t's count (above the base: x's window, below: y's).
        self.base = self.skew()
        self.armed = True

    def run(self):
        while not self.done and self.struck is None:
            if not self.armed:
                continue
            d = self.skew() - self.base
            seen = "x" if d > 0 else "y" if d < 0 else None
            if seen is None or (self.windows and self.windows[-1] == seen):
                continue
            self.windows.append(seen)
            if MODE == "control":
                hit = self.windows == ["x"]
            elif MODE.startswith("nohook"):
                hit = self.windows == ["x", "y"] * (3 if MODE == "nohook3" else 2)
            else:
                # Armed after verify: any y window is y's at-use check, so x's is over (the
                # H200 run of 11:18 showed the thread missing some windows: the GIL's hand-off
                # on a short release is a race, so x's own window need not have been seen).
                hit = seen == "y"
            if hit:
                self.strike()

    def strike(self):
        # `x` has had its last read (its at-use window came and went); the launcher is in `y`'s
        # (in `control` mode: in x's own window, before its read).
        self.x.untyped_storage().resize_(0)  # frees x's memory; x, its storage object and the call's reference stay
        if MODE == "fault":
            torch.cuda.empty_cache()  # x's segment back to the driver
            self.struck = "freed to the driver"
        else:
            self.victim = torch.empty(N, device="cuda")  # torch's cache hands x's block to a new tensor
            self.struck = "freed, reused by victim at %#x" % self.victim.data_ptr()


TRIAL = [0]


def trial_is_not_last():
    TRIAL[0] += 1
    return TRIAL[0] < TRIALS


def main(mode):
    global MODE
    if MODE != mode:
        TRIAL[0] = 0
    MODE = mode
    x = torch.full((N,), 1.0, device="cuda")
    y = torch.full((N,), 2.0, device="cuda")
    out = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    nohook = MODE.startswith("nohook")
    attack = Attack(x, y, arm_at_hook=not nohook)
    if nohook:
        g23r_op.set_hook(None)
        attack.arm()  # before the op: its verify windows (x, y) come first, then the at-use ones
    thread = threading.Thread(target=attack.run, daemon=True)
    thread.start()
    outcome = "launched"
    try:
        if nohook:
            out = torch.ops.g23r1.scale_add_hook(x, y, 3.0)
        else:
            g23r_op.scale_add_into(x, y, out, 3.0, attack.arm)
    except RuntimeError as error:
        outcome = "refused: %s" % str(error)[:200]
    attack.done = True
    thread.join(5)
    if attack.struck is None and trial_is_not_last():
        return False
    print("mode", MODE, "| windows seen", attack.windows, "| attack:", attack.struck, "| op:", outcome)
    try:
        torch.cuda.synchronize()
        sync = "ok"
    except RuntimeError as error:
        sync = "FAULT: %s" % str(error).splitlines()[0]
    print("synchronize:", sync)
    if attack.struck is None or outcome != "launched":
        print("HELD (no window in %d trials, or the launch was refused)" % TRIAL[0])
        return True
    if MODE == "fault":
        print("UNSOUND" if sync != "ok" else "UNCLEAR (no fault: the segment was not unmapped)", "- the kernel was launched with x's address %#x after torch freed it to the driver" % attack.x_address)
        return True
    same = attack.victim.data_ptr() == attack.x_address
    head = out[:4].tolist() if sync == "ok" else None
    print("x's storage now %d bytes; victim at %#x == x's old address %#x: %s; out[:4] %s (3*1+2 = 5.0 if x's stale bytes were read)" % (
        x.untyped_storage().nbytes(), attack.victim.data_ptr(), attack.x_address, same, head))
    print("UNSOUND - the kernel read memory torch freed after the launch's last check of x" + (", now victim's" if same else ""), "(trial %d)" % TRIAL[0])
    return True


TRIALS = 200  # the hand-off of the GIL in a short release is a race: try until the thread strikes


for mode in MODES:
    for trial in range(TRIALS):
        if main(mode) or mode == "control" and trial >= 20:
            break
