"""The failure grammar: which lines state a failure, whatever their message, independent of the catalog.

Each class is one decorated function (``@failure_class``) that gets a cleaned, stripped line and
returns a match dict (possibly empty) or None. Its docstring lists ``Matches:`` and ``Not:``
example lines (real ones cite their source); tests/failure_triage/test_grammar.py runs them all.

A class has a role:
  root      a failure statement; the first one in time is the root cause
  fallback  a summary or signal (launcher exit codes, SIGKILL, watchdog echoes): cascade when any
            root exists, otherwise the first fallback of the highest weight is the root cause
  cascade   never the root cause (a consequence line)
  warning   a misleading warning
and optionally ``after``: classes it is a consequence of (a build's CalledProcessError after a
compiler error) - it is cascade when an earlier root of one of those classes exists.

When no catalog entry matches, the class's cause and fix are reported (the catalog refines a
class with a specific entry). ``{name}`` fields in cause/fix are filled from the match dict.
"""
from __future__ import annotations

import re

REF = "sub-skills/failure-triage/references/"

class _Lazy:
    """A regex compiled on first use: most runs need few of the grammar's patterns."""
    __slots__ = ("pattern", "_rx")

    def __init__(self, pattern: str):
        self.pattern, self._rx = pattern, None

    def _get(self) -> re.Pattern:
        if self._rx is None:
            self._rx = re.compile(self.pattern)
        return self._rx

    def search(self, s: str):
        return self._get().search(s)

    def match(self, s: str):
        return self._get().match(s)


CLASSES: list["FailureClass"] = []
BY_ID: dict[str, "FailureClass"] = {}


class FailureClass:
    __slots__ = ("id", "role", "cause", "fix", "reference", "weight", "after", "func", "doc", "needs")

    def __init__(self, id, role, cause, fix, reference, weight, after, func, needs=()):
        self.id, self.role, self.cause, self.fix, self.needs = id, role, cause, fix, tuple(needs)
        self.reference, self.weight, self.after, self.func = reference, weight, frozenset(after), func
        self.doc = func.__doc__ or ""

    def examples(self, kind: str) -> list[str]:
        """The example lines under ``Matches:`` (kind='Matches') or ``Not:`` in the docstring."""
        out, on = [], False
        for line in self.doc.splitlines():
            t = line.strip()
            if t in ("Matches:", "Not:"):
                on = t[:-1] == kind
                continue
            if on and t.startswith("| "):
                out.append(t[2:].split("  # ")[0].rstrip())
        return out

    def claim(self, s: str):
        """The match dict when this class claims the line, else None (a cheap substring guard first)."""
        if self.needs and not any(n in s for n in self.needs):
            return None
        return self.func(s)

    def text(self, field: str, groups: dict) -> str:
        s = getattr(self, field)
        if groups and "{" in s:
            try:
                return s.format(**{k: (v or "?") for k, v in groups.items()})
            except (KeyError, IndexError, ValueError):
                return s
        return s


def failure_class(id, role, cause, fix, reference, weight=1, after=(), needs=()):
    """Register a class; needs: substrings one of which every line it claims contains."""
    def deco(func):
        fc = FailureClass(id, role, cause, fix, REF + reference, weight, after, func, needs)
        CLASSES.append(fc)
        BY_ID[id] = fc
        return func
    return deco


def classify(s: str):
    """(FailureClass, groups) for the first class that claims the line, or (None, None)."""
    for fc in CLASSES:
        g = fc.claim(s)
        if g is not None:
            return fc, g
    return None, None


# Case-sensitive substrings one of which every line any class claims contains (and the traceback
# structure the engine follows), plus _GLOG_E. Most start with a character that is rare in
# training noise (upper case, punctuation), which keeps the combined prefilter at C speed. The
# engine's prefilter skips every other line unless a traceback or a multi-line message is open;
# test_grammar.py proves every class example passes it.
ANCHORS = (
    "Error", "ERROR", "Exception", "Traceback", 'File "', "During handling", "The above exception",
    "FAIL", "Fail", "Fatal", "FATAL", "Kill", "WARN", "Warning", "SIG", "Signal", "Exit", "Abort", "Assert",
    "Timeout", "Timed out", "Last error", "Root Cause", "Segmentation", "CANCELLED", "CUDA", "NCCL", "OOM",
    "STATUS_", "Out of memory",
    ": fatal", ": error", ": undefined reference", ": cannot find", ": terminate called", ": build stopped",
    "\nerror", "\n  what()", "\nterminate called", "\nnvcc fatal", "\n#error", "\n #error",
    "(exitcode", "(errno", "(gai error", "(core dumped)", "[E ", "[F ", ":terminate called", "-kill", "_kill",
)
_GLOG_E = r"E[01]\d{3} \d|F[01]\d{3} \d"

# --------------------------------------------------------------------------- helpers

_SRC = r"[\w./+-]+\.(?:c|cc|cpp|cxx|cu|cuh|h|hh|hpp|hxx|inl|inc|S)"
_SIGNAMES = {"9": "SIGKILL", "11": "SIGSEGV", "6": "SIGABRT", "15": "SIGTERM", "2": "SIGINT", "7": "SIGBUS",
             "137": "SIGKILL", "139": "SIGSEGV", "134": "SIGABRT", "143": "SIGTERM", "130": "SIGINT",
             "135": "SIGBUS"}


def _exit_class(code: str | None, sig: str | None) -> str:
    """Map an exit code (negative: signal, 128+N from a shell) or a signal name to a class id."""
    name = (sig or "").upper()
    if not name and code is not None:
        c = code.lstrip("-") if code.startswith("-") else (code if code in ("137", "139", "134", "143", "130", "135")
                                                           else "")
        name = _SIGNAMES.get(c, "")
    if name in ("SIGKILL", "KILLED", "OUT OF MEMORY"):
        return "signal-kill"
    if name == "SIGSEGV":
        return "segfault"
    if name in ("SIGABRT", "SIGBUS"):
        return "signal-abort"
    return "launcher-summary"


def _m(rx: re.Pattern, s: str):
    m = rx.search(s)
    return None if m is None else {k: v for k, v in m.groupdict().items() if v is not None}


# --------------------------------------------------------------------------- build: cascade lines first

_BUILD_CASCADE = _Lazy(
    r"ninja: build stopped|Error building extension '(?P<op>[\w.-]+)'|"
    r"CalledProcessError: Command '\[?'?(?:ninja|make|cmake|/usr/bin/(?:gcc|g\+\+|c\+\+)|[\w/.-]*nvcc)\b|"
    r"^error: command '[^']*(?:gcc|g\+\+|c\+\+|nvcc|cl\.exe|clang\+*)' failed with exit (?:code|status)|"
    r"collect2: error: ld returned \d+ exit status|^FAILED: \S|make(?:\[\d+\])?: \*\*\* .*Error \d+|"
    r"Failed building wheel for|error: subprocess-exited-with-error|Failed to build installable wheels")


@failure_class(
    "build-cascade", "fallback",
    "The build of a C++/CUDA extension stopped; this line only reports that a compiler or linker "
    "step failed earlier.",
    "Scroll up to the first compiler `error:` / linker `cannot find` line of this build and fix that; "
    "run the build with verbose output (MAX_JOBS=1, pip install -v, DS_BUILD_*=1 pip install deepspeed) "
    "if the log does not show it.",
    "build-failures.md", weight=1,
    after=("compiler-error", "compiler-version", "linker-error", "missing-header"), needs=("build stopped", "Error building", "CalledProcessError", "error:", "error: ld", "FAILED:", "*** [", "wheel", "subprocess-exited"))
def build_cascade(s):
    """A build's summary after the compiler or linker line that failed.

    Matches:
    | ninja: build stopped: subcommand failed.
    | subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.
    | RuntimeError: Error building extension 'fused_adam'
    | error: command '/usr/bin/gcc' failed with exit code 1
    | collect2: error: ld returned 1 exit status
    | FAILED: cpu_adam.o
    | ERROR: Failed building wheel for deepspeed
    Not:
    | /tmp/x.cpp:3:10: fatal error: cuda_runtime.h: No such file or directory
    """
    return _m(_BUILD_CASCADE, s)


_COMPILER_VERSION = _Lazy(
    r"unsupported (?P<compiler>GNU|clang|Microsoft Visual Studio) version|"
    r"(?P<compiler2>gcc|g\+\+|GCC|clang) versions? (?:later|earlier|newer|older) than \S+ (?:are|is) not supported|"
    r"C\+\+(?P<std>1[147]|20) or later compatible compiler is required|You need C\+\+(?P<std2>1[147]|20) to compile|"
    r"requires (?:GCC|gcc|g\+\+) (?P<need>[\d.]+) or (?:later|newer|higher)|"
    r"is not compatible with the compiler Pytorch was built with|"
    r"installed version of g\+\+ \([\d.]+\) is greater than the maximum required version")


@failure_class(
    "compiler-version", "root",
    "The host compiler is too old or too new for the CUDA toolkit (nvcc accepts only a range of GCC/clang "
    "versions per release) or for the C++ standard torch's headers need (C++17).",
    "Use a GCC the toolkit supports (CUDA 11.8: GCC <= 11; CUDA 12.0-12.3: <= 12; CUDA 12.4+: <= 13): "
    "install it and set CC/CXX (or NVCC_CCBIN / nvcc -ccbin) to it, or use a newer CUDA toolkit; for "
    "C++17 errors use GCC >= 9. Then rebuild (clear ~/.cache/torch_extensions).",
    "build-failures.md", after=(), needs=("version", "C++", "GCC", "g++"))
def compiler_version(s):
    """The compiler's version is outside what nvcc or torch's headers accept.

    Matches:
    | /usr/local/cuda/include/crt/host_config.h:132:2: error: #error -- unsupported GNU version! gcc versions later than 12 are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check; however, using an unsupported host compiler may cause compilation failure or incorrect run time execution. Use at your own risk.
    | #error C++17 or later compatible compiler is required to use PyTorch.
    | error: #error "You're trying to build PyTorch with a too old version of GCC. We need GCC 9 or later."
    Not:
    | cpu_adam.cpp:12:10: fatal error: cuda_runtime.h: No such file or directory
    """
    g = _m(_COMPILER_VERSION, s)
    if g is None and "too old version of GCC" in s:
        g = {}
    return g


_MISSING_HEADER = _Lazy(r"fatal error: (?P<header>[\w./+-]+\.(?:h|hpp|hh|cuh|hxx|inl)|[\w/]+): No such file or directory")


@failure_class(
    "missing-header", "root",
    "The compiler did not find the header {header}: the package or toolkit that ships it is not "
    "installed or its include folder is not on the path.",
    "Install what provides {header} (cuda_runtime.h, cublas_v2.h, cusparse.h: the CUDA toolkit "
    "(CUDA_HOME/include, e.g. conda install cuda-nvcc cuda-cudart-dev / a -devel container); Python.h: "
    "python3-dev; libaio.h: libaio-dev) or add its folder to CPATH; or use a prebuilt wheel instead of "
    "building (DS_BUILD_OPS=0).",
    "build-failures.md", needs=("fatal error",))
def missing_header(s):
    """A compiler fatal error for a missing include file.

    Matches:
    | /home/u/.cache/torch_extensions/py310_cu118/fused_adam/multi_tensor_adam.cu:11:10: fatal error: cuda_runtime.h: No such file or directory
    | csrc/aio/py_lib/deepspeed_py_aio.h:13:10: fatal error: libaio.h: No such file or directory
    Not:
    | ninja: build stopped: subcommand failed.
    """
    return _m(_MISSING_HEADER, s)


_COMPILER = _Lazy(
    rf"^(?P<file>{_SRC})(?::\d+(?::\d+)?|\(\d+\)):? (?:fatal )?error\b|"
    r"^(?:[\w./-]*/)?(?:gcc|g\+\+|c\+\+|cc|cc1|cc1plus|clang|clang\+\+|nvcc|cicc|ptxas|cudafe\+\+)(?:-[\d.]+)?(?:\.exe)?: "
    r"(?:fatal )?error\b|"
    r"^#error\b|\berror: #error\b|^nvcc fatal\s*:|^(?:[\w./-]+: )?fatal error: |"
    rf"^(?P<file2>{_SRC})\(\d+\): (?:catastrophic )?error")


@failure_class(
    "compiler-error", "root",
    "The C++/CUDA compiler rejected the source of an extension being built (a JIT-built DeepSpeed op, a "
    "torch cpp_extension, flash-attn, apex); everything after it in the build is its consequence.",
    "Read the compiler message (and its note: lines): a header or symbol missing means a missing "
    "toolkit/dev package or mismatched versions of torch, CUDA and the extension; match CUDA_HOME's nvcc to "
    "torch.version.cuda, use a supported GCC, or install a prebuilt wheel of the extension instead of building.",
    "build-failures.md", needs=("error", "#error", "nvcc fatal"))
def compiler_error(s):
    """A C/C++/CUDA compiler error line (gcc, clang, nvcc, cicc), not a build summary.

    Matches:
    | csrc/adam/cpu_adam_impl.cpp:8:10: error: 'bfloat16' is not a member of 'c10'
    | /tmp/x.cu(42): error: identifier "__hmax" is undefined
    | nvcc fatal   : Unsupported gpu architecture 'compute_90'
    | #error "Only one of NVTX3 or NVTX can be used"
    | cc1plus: fatal error: cuda_runtime.h: No such file or directory  # also missing-header
    | gcc: error: unrecognized command-line option '-std=c++17'
    Not:
    | main.py: error: unrecognized arguments: --local-rank=0
    | error: command '/usr/bin/gcc' failed with exit code 1
    """
    return _m(_COMPILER, s)


_LINKER = _Lazy(
    r"cannot find -l(?P<lib>[\w.+-]+)|undefined reference to [`'](?P<symbol>[^`']{1,200})'|"
    r"^(?:[\w./-]*/)?(?:ld|ld\.bfd|ld\.gold|ld\.lld|lld)(?:\.exe)?: (?:error|cannot|fatal)|"
    r"error while loading shared libraries: (?P<lib2>\S+?): cannot open shared object file")


@failure_class(
    "linker-error", "root",
    "The linker did not find {lib} while linking an extension (a JIT-built DeepSpeed op, a cpp_extension): "
    "the library is not installed or its folder is not on the linker's search path.",
    "Provide the library to the linker: for CUDA libraries (cudart, curand, cublas, cusparse) add the CUDA "
    "toolkit's lib64 (export LIBRARY_PATH=$CUDA_HOME/lib64:$LIBRARY_PATH; conda: $CONDA_PREFIX/lib, and a "
    "lib64 -> lib link for stub-only installs); for aio install libaio-dev; then clear "
    "~/.cache/torch_extensions and rebuild. Or avoid the JIT build: a prebuilt wheel, DS_BUILD_OPS=1 pip "
    "install deepspeed where the toolkit is complete, or DS_BUILD_<OP>=0 for ops you do not use.",
    "build-failures.md", needs=("cannot find -l", "undefined reference", "ld", "error while loading shared"))
def linker_error(s):
    """A linker failure: missing -l library, undefined reference, ld error.

    Matches:
    | /usr/bin/ld: cannot find -lcurand: No such file or directory
    | /usr/bin/ld: cannot find -lcudart
    | cpu_adam.o: undefined reference to `curandCreateGenerator'
    | ld: error: unable to find library -laio
    Not:
    | collect2: error: ld returned 1 exit status
    """
    m = re.search(r"cannot find -l(?P<lib>[\w.+-]+)", s)
    g = {"lib": m.group("lib")} if m else _m(_LINKER, s)
    if g is not None:
        lib = g.get("lib") or g.get("lib2")
        g["lib"] = f"lib{lib}" if lib and not lib.startswith("lib") else (lib or "a library or symbol")
    return g


# --------------------------------------------------------------------------- collectives

_WATCHDOG = _Lazy(r"Watchdog caught collective operation timeout|"
                       r"(?P<op>\w+)? ?(?:operation|collective) timed out after|Timed out waiting \d+ms for")


@failure_class(
    "watchdog-timeout", "root",
    "A collective did not finish within the process-group timeout: some rank never joined it. With "
    "nothing failing before it, one rank fell behind (stuck, slower, or on another code path).",
    "Find the rank that fell behind: compare the ranks' last completed sequence numbers (the NCCL flight "
    "recorder, TORCH_FR_BUFFER_SIZE=2000 (older releases: TORCH_NCCL_TRACE_BUFFER_SIZE) and "
    "TORCH_NCCL_DUMP_ON_TIMEOUT=1, see sub-skills/failure-triage/references/flight-recorder.md), py-spy dump the hung ranks, TORCH_DISTRIBUTED_DEBUG=DETAIL; look for "
    "rank-dependent branches, evaluation or checkpointing on rank 0 only; raise the timeout only for "
    "legitimately slow steps.",
    "hangs-and-timeouts.md", weight=2, needs=("imeout", "timed out", "Timed out"))
def watchdog_timeout(s):
    """A collective timeout from the NCCL watchdog (any torch version) or gloo.

    Matches:
    | [E ProcessGroupNCCL.cpp:587] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1803170 milliseconds before timing out.  # torch 1.10-1.13 wording, no SeqNum
    | [rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.
    | RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete
    Not:
    | [E ProcessGroupNCCL.cpp:737] Some NCCL operations have failed or timed out.
    """
    if "Some NCCL operations have failed" in s or "communicator was aborted" in s or "thread terminated" in s:
        return None  # echoes quoting the timeout (c10d-echo)
    return _m(_WATCHDOG, s)


_NCCL_CODE = _Lazy(r"\bnccl(?P<code>InvalidUsage|SystemError|UnhandledCudaError|RemoteError|InternalError|"
                        r"InvalidArgument)\b|NCCL error in: |NCCL WARN |NCCL Error \d|"
                        r"\bNCCL error(?:,|:| \()|unhandled (?:system|cuda) error|remote process exited or there "
                        r"was a network error|invalid usage \(run with NCCL_DEBUG")
_NCCL_HINT = {
    "InvalidUsage": "invalid usage: ranks called collectives with different arguments or order, two ranks "
                    "share one GPU, or a communicator was used after abort",
    "SystemError": "a system call failed: network interface, sockets, /dev/shm size, InfiniBand verbs",
    "UnhandledCudaError": "a CUDA call inside NCCL failed (a GPU fault, an earlier CUDA error, P2P/IOMMU)",
    "RemoteError": "a peer process exited or the network between the ranks failed",
    "InternalError": "NCCL internal error (often a version mismatch or corrupted state after an earlier failure)",
}


@failure_class(
    "nccl-error", "root",
    "NCCL reported an error ({kind}); the line after `Last error:` (printed with NCCL_DEBUG=WARN or INFO) "
    "names the failing call.",
    "{hint}Rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET for network) and read the first `NCCL WARN` "
    "line of the first failing rank: wrong interface -> NCCL_SOCKET_IFNAME; /dev/shm too small in "
    "containers -> --shm-size or --ipc=host; InfiniBand -> NCCL_IB_HCA / NCCL_IB_DISABLE=1 to test; P2P on "
    "consumer GPUs -> NCCL_P2P_DISABLE=1; invalid usage -> make all ranks issue the same collectives, one "
    "GPU per rank (torch.cuda.set_device(local_rank)).",
    "hangs-and-timeouts.md", needs=("NCCL", "nccl", "unhandled", "remote process", "invalid usage"))
def nccl_error(s):
    """An NCCL error code, `NCCL WARN` line or an NCCL error reported through torch.

    Matches:
    | torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.14.3
    | node1:1234:1290 [0] NCCL WARN Call to ibv_create_qp failed
    | ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
    | ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
    Not:
    | NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
    """
    g = _m(_NCCL_CODE, s)
    if g is None:
        return None
    code = g.get("code")
    if code is None:
        low = s.lower()
        code = ("SystemError" if "system error" in low else "UnhandledCudaError" if "cuda error" in low else
                "RemoteError" if "remote process" in low else "InvalidUsage" if "invalid usage" in low else None)
    g["kind"] = _NCCL_HINT.get(code or "", "see the message")
    low = s.lower()
    g["hint"] = next((h for k, h in _NCCL_WARN_HINTS if k in low), "")
    return g


# what the common NCCL WARN / error texts mean (nccl src/: enqueue.cc, bootstrap.cc, transport/net_ib.cc, shm)
_NCCL_WARN_HINTS = (
    ("out of memory", "NCCL could not allocate its buffers on the GPU: the GPU was already nearly full (your batch "
                      "size or another process on the GPU, see nvidia-smi); free memory first or lower NCCL_BUFFSIZE. "),
    ("already checked in", "two processes claimed the same rank: the launcher's task layout does not match the "
                           "script's (srun --ntasks-per-node vs the trainer's devices / num_nodes); every process "
                           "needs a distinct RANK. "),
    ("duplicate gpu", "two ranks use the same GPU: call torch.cuda.set_device(local_rank) or give each worker its "
                      "own CUDA_VISIBLE_DEVICES. "),
    ("ibv_", "an InfiniBand verbs call failed: check the HCA (ibstat), NCCL_IB_HCA, and try NCCL_IB_DISABLE=1 to "
             "confirm. "),
    ("/dev/shm", "the shared-memory transport could not map /dev/shm: give the container more (--shm-size, "
                 "--ipc=host). "),
    ("socket", "a socket call failed: check NCCL_SOCKET_IFNAME names an interface every node can reach. "),
    ("connect", "a connection between ranks failed: check NCCL_SOCKET_IFNAME and the firewall between nodes. "),
)


_C10D_BIND = _Lazy(r"server socket has failed to (?:listen|bind)|EADDRINUSE|Address already in use|"
                        r"errno: ?98\b|Cannot assign requested address|errno: ?99\b")
_C10D_RESOLVE = _Lazy(r"Name or service not known|Temporary failure in name resolution|gai error|"
                           r"getaddrinfo|nodename nor servname|failed to resolve|No address associated with hostname")
_C10D_CONNECT = _Lazy(r"client socket has (?:failed to connect|timed out)|Connection refused|errno: ?111\b|"
                           r"No route to host|errno: ?113\b|Network is unreachable|Connection reset by peer|"
                           r"DistNetworkError|DistStoreError|TCPStore|Socket Timeout|timed out after \d+ ?m?s.*store")


@failure_class(
    "c10d-store", "root",
    "The c10d rendezvous store (TCPStore on MASTER_ADDR:MASTER_PORT) could not {what}.",
    "{advice}",
    "multi-node.md", needs=("socket", "rror", "errno", "EADDRINUSE", "Address", "TCPStore", "Store", "resol", "refused", "unreachable", "route to host", "reset by peer", "gai error", "getaddrinfo", "not known"))
def c10d_store(s):
    """The c10d TCPStore cannot bind (port in use), connect (endpoint unreachable) or resolve the host.

    Matches:
    | torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use
    | [W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).
    | [W socket.cpp:601] [c10d] The client socket has failed to connect to [node1]:29500 (errno: 111 - Connection refused).
    | [W socket.cpp:558] [c10d] The IPv6 network addresses of (node-7, 29500) cannot be retrieved (gai error: -2 - Name or service not known).
    Not:
    | [W socket.cpp:663] [c10d] The client socket cannot be initialized to connect to [localhost]:29500 (errno: 97 - Address family not supported by protocol).
    """
    if "errno: 97" in s or "Address family not supported" in s:
        return None
    if not ("rror" in s or "errno" in s or "[W" in s or "[E" in s or "ailed" in s or "imed out" in s
            or "EADDRINUSE" in s):
        return None
    if _C10D_BIND.search(s):
        return {"what": "bind its port: another process (a live process of an earlier run, a second job on the "
                        "node) listens on it; under a launcher that port is the launcher's, not a script flag's",
                "advice": "Pick a free port (torchrun --master_port / --rdzv_endpoint host:PORT, accelerate "
                          "--main_process_port, deepspeed --master_port), or stop the leftover process "
                          "(ss -ltnp 'sport = :PORT' names it); on a shared node give each job its own port. "
                          "TIME_WAIT does not block the store's bind; see --explain torch-store-port-in-use."}
    if _C10D_RESOLVE.search(s):
        return {"what": "resolve a host name",
                "advice": "Use a MASTER_ADDR / --rdzv_endpoint every node can resolve (an IP address, or the "
                          "name as in /etc/hosts on every node; in SLURM the first host of "
                          "scontrol show hostnames $SLURM_JOB_NODELIST); check `getent hosts NAME` on each node."}
    if _C10D_CONNECT.search(s):
        return {"what": "be reached: nothing listened at the endpoint, a firewall dropped it, or rank 0 had "
                        "not started yet",
                "advice": "Check that MASTER_ADDR is rank 0's address reachable from every node (not 127.0.0.1 "
                          "on multi-node), that MASTER_PORT is open between nodes (nc -zv ADDR PORT), that all "
                          "nodes use the same port and rendezvous id, and that rank 0 started; raise the "
                          "rendezvous timeout when nodes start far apart."}
    return None


_C10D_GLOG = _Lazy(r"^\[?[EF][01]\d{3} \d\d:\d\d|^\[[EF] (?:[\w./-]+\.(?:cpp|cc|hpp|h)):\d+\]")
# torch's Python loggers (torch.distributed.elastic, torch >= 2.2) print the same glog header with a .py
# source: those are launcher lines (launcher-exit), not the C++ layer
_PY_GLOG = _Lazy(r"^\[?[EF][01]\d{3} [\d:.]+ +\d+ [\w./-]+\.py:\d+\]")
_C10D_ECHO = _Lazy(r"Some NCCL operations have failed or timed out|To avoid data inconsistency|"
                        r"communicator was aborted|detected by watchdog at work|watchdog thread terminated with "
                        r"exception|Process group watchdog thread terminated|Stack trace of the failed collective|"
                        r"ProcessGroupNCCL's watchdog got stuck|Heartbeat monitor timed out|"
                        r"ProcessGroupNCCL preparing to dump debug info|Received a dump signal")


@failure_class(
    "c10d-echo", "fallback",
    "A follow-up line of the process group's watchdog after a timeout or error on this rank.",
    "Act on the first real error (any rank) or the first collective timeout before it.",
    "hangs-and-timeouts.md", weight=1, needs=("NCCL", "watchdog", "Watchdog", "Heartbeat", "dump", "collective"))
def c10d_echo(s):
    """Watchdog and abort messages that follow a timeout or error.

    Matches:
    | [E ProcessGroupNCCL.cpp:737] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
    | [rank0]:[E321 02:07:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.
    Not:
    | [E ProcessGroupNCCL.cpp:587] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1803170 milliseconds before timing out.
    """
    return _m(_C10D_ECHO, s)


@failure_class(
    "c10d-error", "root",
    "torch's distributed C++ layer (c10d, ProcessGroupNCCL/Gloo, the TCPStore) logged an error.",
    "Read the message; for process-group errors compare with the other ranks' first errors, rerun with "
    "TORCH_DISTRIBUTED_DEBUG=DETAIL and NCCL_DEBUG=INFO.",
    "hangs-and-timeouts.md", needs=("[E", "[F", "E0", "E1", "F0", "F1"))
def c10d_error(s):
    """Any other glog error line of torch's C++ distributed layer, `[E…]` or `[F…]`.

    Matches:
    | [E ProcessGroupGloo.cpp:138] Rank 0 successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 1. Please check rank 1 logs for faulty rank.
    | [E1201 12:00:01.123 TCPStore.cpp:120] [c10d] Some store error
    Not:
    | [I1201 12:00:01.123 ProcessGroupNCCL.cpp:900] [PG 0 Rank 0] ProcessGroupNCCL initialization options
    | E1206 02:43:58.400000 20431 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 20461) of binary: /usr/bin/python
    """
    return {} if _C10D_GLOG.search(s) and not _PY_GLOG.search(s) else None


# --------------------------------------------------------------------------- CUDA

_CUDA_ASSERT = _Lazy(r"device-side assert triggered|\.cu:\d+: [^:]*: block: \[[\d,]+\], thread: \[[\d,]+\] "
                          r"Assertion `.*` failed|cudaErrorAssert")
_CUDA = _Lazy(r"CUDA error: (?P<msg>[^.\n]{1,160})|\bcuda(?:Error\w+)\b|\bCUDA_ERROR_\w+|\bCU(?:BLAS|DNN|SPARSE|"
                   r"SOLVER|FFT)_STATUS_\w+|cuda runtime error \(\d+\)|CUDA driver error|CUDNN_BACKEND_\w+ failed|"
                   r"Xid\b.*\b(?:79|48|63|64|74|94|95)\b")


@failure_class(
    "cuda-device-assert", "root",
    "A CUDA kernel's assertion failed: usually an index out of range (labels >= num_classes, token ids >= "
    "vocabulary size, a negative index); later CUDA calls on this rank report the same error.",
    "Rerun with CUDA_LAUNCH_BLOCKING=1 (or on CPU) to get the failing op, then check label and index ranges "
    "against the embedding/classifier sizes (e.g. tokenizer vocabulary vs model.resize_token_embeddings).",
    "runtime-errors.md", needs=("device-side assert", "Assertion", "cudaErrorAssert"))
def cuda_device_assert(s):
    """A device-side assertion.

    Matches:
    | /pytorch/aten/src/ATen/native/cuda/Loss.cu:240: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.
    | RuntimeError: CUDA error: device-side assert triggered
    Not:
    | CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
    """
    return _m(_CUDA_ASSERT, s)


@failure_class(
    "cuda-error", "root",
    "A CUDA runtime or library call failed{msg_part}; CUDA errors are reported asynchronously, so the "
    "Python frame may not be the op that failed.",
    "Rerun with CUDA_LAUNCH_BLOCKING=1 to locate the op; check the driver/toolkit/torch CUDA versions "
    "(nvidia-smi, torch.version.cuda), GPU health (nvidia-smi -q, dmesg Xid) and that each rank uses its "
    "own GPU (torch.cuda.set_device(local_rank)).",
    "runtime-errors.md", needs=("CUDA", "cuda", "CU", "Xid"))
def cuda_error(s):
    """A CUDA runtime, cuBLAS/cuDNN status or driver error.

    Matches:
    | RuntimeError: CUDA error: an illegal memory access was encountered
    | RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`
    | cudaErrorLaunchFailure: unspecified launch failure
    Not:
    | Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
    """
    g = _m(_CUDA, s)
    if g is not None:
        g["msg_part"] = f" ({g['msg'].strip()})" if g.get("msg") else ""
    return g


# --------------------------------------------------------------------------- native crashes and signals

_SEGV = _Lazy(r"Segmentation fault|\bSIGSEGV\b|Fatal Python error: (?:Segmentation fault|Bus error|Aborted)|"
                   r"signal 11\b|\bBus error\b|\bSIGBUS\b")


@failure_class(
    "segfault", "root",
    "A process crashed in native code (segmentation fault / bus error): a compiled extension built against "
    "another torch/CUDA, a driver problem, or /dev/shm too small (bus error).",
    "Get the native stack (PYTHONFAULTHANDLER=1, gdb -ex r --args python ...); rebuild extensions against "
    "the installed torch (clear ~/.cache/torch_extensions); for bus errors in containers give /dev/shm more "
    "room (--shm-size / --ipc=host).",
    "runtime-errors.md", weight=3, needs=("Segmentation", "SIGSEGV", "Fatal Python", "signal 11", "Bus error", "SIGBUS"))
def segfault(s):
    """A segmentation fault or bus error, from the shell, faulthandler or glog.

    Matches:
    | Segmentation fault (core dumped)
    | Fatal Python error: Segmentation fault
    | *** SIGSEGV (@0x0) received by PID 1234 (TID 0x7f) from PID 0; stack trace: ***
    Not:
    | exitcode  : 1 (pid: 1234)
    """
    if "exitcode" in s or "exit code" in s or "exits with return code" in s:
        return None
    return _m(_SEGV, s)


_CPP_EXC = _Lazy(r"terminate called after throwing an instance of '(?P<type>[^']+)'|^\s*what\(\):\s+(?P<what>.+)")


@failure_class(
    "cpp-exception", "root",
    "A C++ exception ({type}) escaped and aborted the process; its message is on the `what():` line.",
    "Read the what(): message; it is usually a c10/NCCL/CUDA error that has its own fix (search it with "
    "triage_log.py --search).",
    "runtime-errors.md", needs=("terminate called", "what()"))
def cpp_exception(s):
    """An uncaught C++ exception (std::terminate) and its what() line.

    Matches:
    | terminate called after throwing an instance of 'c10::DistBackendError'
    | what():  [PG 0 Rank 1] Process group watchdog thread terminated with exception: NCCL error
    Not:
    | terminate called recursively
    """
    g = _m(_CPP_EXC, s)
    if g is not None:
        g.setdefault("type", "c10::Error")
    return g


_KILLED = _Lazy(r"^(?:(?:/bin/)?(?:ba|z|)sh: (?:line \d+: )?(?:\d+ )?)?Killed\b|\bKilled\s+(?:python|torchrun|"
                     r"deepspeed|accelerate)\b|^\S+: line \d+: +\d+ Killed\b")


@failure_class(
    "signal-kill", "fallback",
    "A process was killed with SIGKILL without printing a traceback: almost always the host's "
    "out-of-memory killer (RAM, not GPU memory), sometimes a scheduler's memory or time limit.",
    "Check the host memory: `dmesg -T | grep -i -E 'killed process|oom'` on the node, SLURM sacct "
    "MaxRSS / `seff JOBID`; load the model once per node (low_cpu_mem_usage, device_map, "
    "zero.Init / fsdp_cpu_ram_efficient_loading), lower DataLoader num_workers and prefetching, avoid "
    "CPU offload of optimizer states, or request more memory (--mem).",
    "out-of-memory.md", weight=3, needs=("Killed",))
def signal_kill(s):
    """A bare `Killed` from the shell, or an exit code / signal meaning SIGKILL (see launcher_exit).

    Matches:
    | Killed
    | /bin/bash: line 1: 12345 Killed                  python train.py
    Not:
    | Killing subprocess 1234
    """
    return _m(_KILLED, s)


_EXIT = _Lazy(
    r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local_rank>\d+)|"
    r"^exitcode\s*: (?P<code2>-?\d+)\b|"
    r"exits with return code = (?P<code3>-?\d+)|"
    r"died with <Signals\.(?P<sig>SIG\w+): \d+>|"
    r"returned non-zero exit status (?P<code4>-?\d+)|"
    r"process \d+ terminated with (?:signal (?P<sig2>SIG\w+)|exit code (?P<code5>-?\d+))|"
    r"Signal (?P<code6>\d+) \((?P<sig3>SIG\w+)\) received by PID|"
    r"srun: error: \S+: tasks? [\d,-]+: (?:(?P<sig4>Killed|Out Of Memory)|Exited with exit code (?P<code7>\d+)|"
    r"(?P<segv>Segmentation fault)|(?P<abrt>Aborted)|Terminated)|"
    r"Received (?:Signals\.)?(?P<sig5>SIG\w+) death signal|Received (?P<code9>\d+) death signal|got signal: (?P<code8>\d+)|"
    r"Sending process \d+ closing signal (?P<sig6>SIG\w+)|Killing subprocess \d+|"
    r"ChildFailedError|Root Cause \(first observed failure\)")


@failure_class(
    "launcher-exit", "fallback",
    "A launcher (torchrun, deepspeed, accelerate launch, srun, torch.multiprocessing) reports that a "
    "worker exited ({what}); it is the summary, not the failure.",
    "Find the failing rank's own first error above (or in its own log: torchrun --tee 3 / --log-dir, "
    "srun -l); when there is none, the exit code says how it died.",
    "reading-logs.md", weight=1, needs=("exit", "died with", "terminated with", "Signal", "srun", "signal", "Killing", "ChildFailed", "Root Cause"))
def launcher_exit(s):
    """Exit codes and signals from launchers; -9/SIGKILL, -11/SIGSEGV and -6/SIGABRT are re-classed.

    Matches:
    | torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 2203) of binary: /usr/bin/python3
    | [2026-12-01 12:00:01,123] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=0'] exits with return code = -11
    | subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' died with <Signals.SIGKILL: 9>.
    | srun: error: node12: task 3: Killed
    | torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL
    | torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
    | W1205 18:47:52.461000 16877 torch/distributed/elastic/agent/server/api.py:753] Received 15 death signal, shutting down workers
    | WARNING:torch.distributed.elastic.agent.server.api:Received Signals.SIGTERM death signal, shutting down workers
    Not:
    | step 10 loss 0.25
    """
    g = _m(_EXIT, s)
    if g is None:
        return None
    code = next((g[k] for k in ("code", "code2", "code3", "code4", "code5", "code6", "code7", "code8", "code9")
                 if k in g), None)
    sig = next((g[k] for k in ("sig", "sig2", "sig3", "sig4", "sig5", "sig6") if k in g), None)
    if "segv" in g:
        sig = "SIGSEGV"
    elif "abrt" in g:
        sig = "SIGABRT"
    if code is not None and code.startswith("-") is False and code not in ("137", "139", "134", "143", "135") and \
            "code6" not in g and "code8" not in g and "code9" not in g:
        # a positive exit code is the worker's own exit status (1: an exception it printed)
        sig = sig or ""
    elif code is not None and "code6" in g or "code8" in g or "code9" in g:
        code = "-" + (g.get("code6") or g.get("code8") or g.get("code9"))
    g["what"] = (f"exit code {code}" if code is not None else "") + (f" {sig}" if sig else "") or "failed"
    g["exit_class"] = _exit_class(code, sig)
    return g


@failure_class(
    "signal-abort", "fallback",
    "A worker aborted (SIGABRT/SIGBUS): a native assertion or an uncaught C++ exception, often the NCCL "
    "watchdog taking the process down after a timeout, or a bus error from a full /dev/shm.",
    "Read the lines this rank printed just before (terminate called / what(): / NCCL or CUDA error); with "
    "none, rerun with NCCL_DEBUG=WARN and TORCH_SHOW_CPP_STACKTRACES=1; in containers raise --shm-size.",
    "runtime-errors.md", weight=2, needs=("Aborted",))
def signal_abort(s):
    """Only reached through launcher_exit's exit code -6/134 or -7/135; a bare `Aborted (core dumped)`.

    Matches:
    | Aborted (core dumped)
    Not:
    | Aborting training
    """
    return {} if re.match(r"^(?:\S+: line \d+: +\d+ )?Aborted(?: \(core dumped\))?\s*(?:python.*)?$", s) else None


_SLURM = _Lazy(r"^(?:srun|sbatch|salloc|slurmstepd(?:-\S+)?): error: (?P<msg>.+)")


@failure_class(
    "slurm-error", "root",
    "SLURM refused or stopped the job step: {msg}",
    "Read the SLURM message: resources (--gres, --mem, --ntasks-per-node) the partition cannot give, an "
    "invalid account/partition, or a limit the step hit; a step CANCELLED without a reason was cancelled by "
    "scancel, a node failure, or srun after a task aborted (an NCCL collective timeout aborts the process "
    "by default: TORCH_NCCL_ASYNC_ERROR_HANDLING unset is 3, which tears down); sacct -j JOBID shows the state "
    "and exit codes.",
    "multi-node.md", needs=("error:",))
def slurm_error(s):
    """An srun/slurmstepd error that is not a task-exit summary (those are launcher-exit).

    Matches:
    | srun: error: Unable to create step for job 1234: Memory required by task is not available
    | slurmstepd: error: Detected 1 oom-kill event(s) in StepId=1234.0. Some of your processes may have been killed by the cgroup out-of-memory handler.  # catalog: os-slurm-oom-kill
    Not:
    | srun: error: node12: task 3: Killed
    """
    if re.search(r": tasks? [\d,-]+: ", s):
        return None
    return _m(_SLURM, s)


# --------------------------------------------------------------------------- Python exceptions

_PY_EXC = _Lazy(r"^(?P<name>(?:[A-Za-z_]\w*\.)*(?P<short>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault|"
                     r"Errno\]?)))(?::\s|:?$)")
_IMPORT = ("ModuleNotFoundError", "ImportError")


@failure_class(
    "python-import", "root",
    "A Python module or name could not be imported: the package is missing in this environment, or "
    "installed versions do not fit together (a name moved or was removed), or a compiled extension does "
    "not match the installed torch (undefined symbol).",
    "Install the package in the environment the launcher uses (the same python as `which python` on every "
    "node); for 'cannot import name' pin the versions the project was written for; for 'undefined symbol' "
    "reinstall/rebuild the extension against the installed torch.",
    "startup-and-config.md", needs=("Error",))
def python_import(s):
    """An ImportError / ModuleNotFoundError line.

    Matches:
    | ModuleNotFoundError: No module named 'flash_attn'
    | ImportError: cannot import name 'is_torch_tpu_available' from 'transformers'
    Not:
    | ValueError: x
    """
    m = _PY_EXC.match(s)
    return {} if m and m.group("short") in _IMPORT else None


@failure_class(
    "python-exception", "root",
    "No catalog entry matches this failure; it is the first error in the log, the lines after it are "
    "probably its consequences.",
    "Read the traceback ending at this line; look it up in the failure-triage references "
    "(sub-skills/failure-triage/SKILL.md routes by symptom, triage_log.py --search 'TEXT' finds related "
    "entries).",
    "reading-logs.md")
def python_exception(s):
    """A Python exception line: `Name: message` or `module.Name` (the end of a traceback).

    Matches:
    | ValueError: Tried to find /ckpt/x but folder does not exist
    | torch.OutOfMemoryError: CUDA out of memory.
    Not:
    | loss: 0.5
    """
    m = _PY_EXC.match(s)
    return {"exception": m.group("name")} if m else None


def is_exception_line(s: str) -> bool:
    return _PY_EXC.match(s) is not None
