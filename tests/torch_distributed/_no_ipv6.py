"""install(): make socket(AF_INET6, ...) fail with EAFNOSUPPORT (errno 97) in this process and every thread
and child it starts afterwards, as on a kernel with IPv6 disabled — a seccomp filter set through ctypes,
so no C compiler is needed. Linux x86_64 and aarch64; returns False where the kernel refuses the filter.
"""
from __future__ import annotations

import ctypes
import platform

ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}   # AUDIT_ARCH_*, __NR_socket
AF_INET6, EAFNOSUPPORT = 10, 97
LD_W_ABS, JEQ_K, RET_K = 0x20, 0x15, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def install() -> bool:
    arch = ARCH.get(platform.machine())
    if arch is None:
        return False
    prog = [(LD_W_ABS, 0, 0, 4),                 # seccomp_data.arch
            (JEQ_K, 0, 4, arch[0]),              # another ABI: allow
            (LD_W_ABS, 0, 0, 0),                 # seccomp_data.nr
            (JEQ_K, 0, 2, arch[1]),              # not socket(): allow
            (LD_W_ABS, 0, 0, 16),                # seccomp_data.args[0], low word (little-endian)
            (JEQ_K, 1, 0, AF_INET6),
            (RET_K, 0, 0, ALLOW),
            (RET_K, 0, 0, ERRNO | EAFNOSUPPORT)]
    arr = (SockFilter * len(prog))(*[SockFilter(*i) for i in prog])
    fprog = SockFprog(len(prog), ctypes.cast(arr, ctypes.POINTER(SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0
