"""G21R-2, second instance (runs without torch): `is_exact_ndarray` compares an object's type
with `numpy.ndarray` read from the numpy module's attributes at every call. Reassigned, any
class counts as "exactly a numpy.ndarray, exported by NumPy's C code", so the G20R-3 limit of
one foreign producer (whose __dlpack__ is Python code) per call no longer holds: here two
producers' Python code runs inside one call, the second after the first's address was taken
(G20R-3's window: with torch, the second resizes the tensor the first exported).

usage: python3 repro_numpy_type.py
"""
import numpy as np

from ferrocuda_torch import dlpack as ft


class Producer:
    def __init__(self, name, array):
        self.name, self.array = name, array

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        print(f"  Python code of producer {self.name} runs inside the call")
        return self.array.__dlpack__(**kwargs)


x, y = Producer("x", np.ones(4, np.float32)), Producer("y", np.zeros(4, np.float32))
try:
    ft.saxpy(2.0, x, y)
    print("unpatched: accepted")
except TypeError as e:
    print("unpatched: refused:", str(e)[:90], "...")
real = np.ndarray
np.ndarray = Producer
try:
    ft.saxpy(2.0, x, y)
    print("numpy.ndarray reassigned: accepted, y =", y.array)
finally:
    np.ndarray = real
