"""SLURM batch scripts: ``#SBATCH`` directives, the batch body, ``srun`` steps and what each task runs.

Which shell expands what (srun(1) and sbatch(1), https://slurm.schedmd.com/srun.html,
https://slurm.schedmd.com/sbatch.html):

* the batch script runs once, on the first node of the allocation; its environment holds the job's
  variables with SLURM_NODEID=0, SLURM_PROCID=0, SLURM_LOCALID=0 (the batch step is task 0);
* ``srun`` starts the step's tasks with the batch shell's *exported* environment (``--export=ALL``,
  the default) plus per-task variables: SLURM_NODEID (node index in the step), SLURM_PROCID (global
  task index), SLURM_LOCALID (task index on the node), SLURMD_NODENAME, SLURM_NTASKS, ...;
* srun's arguments are expanded by the batch shell *before* srun runs: ``srun bash -c "... $X"``
  has ``$X`` replaced on the first node; ``srun bash -c '... $X'`` or ``\\$X`` leaves it to each task's
  shell. srun execs its command directly (no shell) unless the command is a shell.

sbatch reads ``#SBATCH`` lines only before the first command of the script; later ones are comments.
The tool simulates the allocation (nodes named node0, node1, ...) and never runs the script.
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Tuple

from . import shell as sh
from .model import JobSpec, Note, Step, TaskLaunch
from .shell import PStr, Shell, Word

PER_TASK = ("SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURMD_NODENAME", "SLURM_TOPOLOGY_ADDR", "SLURM_GTIDS",
            "HOSTNAME", "SLURM_STEP_NODELIST", "SLURM_TASK_PID")
MAX_SIM_NODES = 2
MAX_SIM_TASKS = 8
MAX_DEPTH = 8
MAX_STEPS = 32  # launches followed per script (each is simulated per node and task)

# srun/sbatch options that take a value when written without '=' (the others are flags or take an
# optional value only with '=')
_NOVALUE_LONG = {"--exclusive", "--label", "--unbuffered", "--overlap", "--overcommit", "--quiet", "--verbose",
                 "--kill-on-bad-exit", "--pty", "--no-kill", "--multi-prog", "--no-allocate", "--disable-status",
                 "--test-only", "--propagate", "--spread-job", "--use-min-nodes", "--contiguous", "--help", "--usage",
                 "--version", "--requeue", "--no-requeue", "--parsable", "--wait", "--hold", "--oversubscribe",
                 "--container-remap-root", "--no-container-remap-root", "--container-writable",
                 "--container-readonly", "--no-container-mount-home", "--container-mount-home",
                 "--container-entrypoint", "--no-container-entrypoint", "--whole", "--exact", "--reboot",
                 "--ignore-pbs", "--get-user-env", "--nvmps", "--mpi-bind", "--x11", "--preserve-env",
                 "--send-libs", "--no-shell", "--quit-on-interrupt", "--immediate", "--exclusive=user"}
_VALUE_SHORT = set("ABcdDeGiJLmMnNopqrStTwxW")
_NOVALUE_SHORT = set("hHIkKlOQsuvVXZEE")


def parse_options(words: List[Tuple[str, int]], stop_at_positional: bool = True):
    """srun/sbatch options -> ({canonical long name: (value, offset)}, index of the first non-option)."""
    opts: Dict[str, Tuple[str, int]] = {}
    i = 0
    short_names = {"N": "--nodes", "n": "--ntasks", "c": "--cpus-per-task", "G": "--gpus"}
    while i < len(words):
        t, off = words[i]
        if t == "--":
            return opts, i + 1
        if not t.startswith("-") or t == "-":
            if stop_at_positional:
                return opts, i
            i += 1
            continue
        if t.startswith("--"):
            name, eq, val = t.partition("=")
            if eq:
                opts[name] = (val, off)
                i += 1
            elif name in _NOVALUE_LONG or i + 1 >= len(words):
                opts[name] = ("", off)
                i += 1
            else:
                opts[name] = (words[i + 1][0], words[i + 1][1])
                i += 2
            continue
        ch = t[1:2]
        long = short_names.get(ch, "-" + ch)
        if ch in _VALUE_SHORT:
            if len(t) > 2:
                opts[long] = (t[2:].lstrip("="), off)
                i += 1
            elif i + 1 < len(words):
                opts[long] = (words[i + 1][0], words[i + 1][1])
                i += 2
            else:
                i += 1
        else:
            opts[long] = ("", off)
            i += 1
    return opts, len(words)


def _int(v: Optional[str]) -> Optional[int]:
    if v is None:
        return None
    m = re.match(r"^\s*(\d+)", v)
    return int(m.group(1)) if m else None


def gpu_count(spec: str) -> Optional[int]:
    """--gres=gpu[:type]:N[,other] / --gpus-per-node=[type:]N -> N (gpu with no count -> 1)."""
    for item in spec.split(","):
        item = item.strip()
        if item.startswith("gres/"):
            item = item[5:]
        if not item.startswith("gpu"):
            continue
        parts = item.split(":")
        if parts[0] != "gpu" and not re.fullmatch(r"\d+", parts[0]):
            continue
        last = parts[-1]
        last = re.sub(r"\(.*\)$", "", last)
        if len(parts) == 1:
            return 1
        if re.fullmatch(r"\d+", last):
            return int(last)
        return 1 if len(parts) == 2 else None
    return None


def _plain_gpus(spec: str) -> Optional[int]:
    """--gpus-per-node / --gpus / --gpus-per-task value: [type:]N."""
    last = spec.split(",")[0].split(":")[-1]
    return int(last) if re.fullmatch(r"\d+", last) else None


class Allocation:
    def __init__(self) -> None:
        self.opts: Dict[str, Tuple[str, int]] = {}

    def get(self, *names: str) -> Tuple[Optional[str], int]:
        for n in names:
            if n in self.opts:
                return self.opts[n]
        return None, -1

    @property
    def nodes(self) -> Tuple[Optional[int], int]:
        v, off = self.get("--nodes")
        return _int(v), off


def directives(text: str, notes: List[Note]) -> Allocation:
    """#SBATCH lines before the first command; later ones are reported (sbatch ignores them)."""
    alloc = Allocation()
    offset = 0
    body_started = False
    for n, line in enumerate(text.split("\n")):
        stripped = line.strip()
        if n == 0 and stripped.startswith("#!"):
            offset += len(line) + 1
            continue
        if stripped.startswith("#SBATCH"):
            col = line.index("#SBATCH")
            if body_started:
                notes.append(Note("jobspec-sbatch-directive-ignored", f"{stripped.split('#', 2)[1].strip()[:60]!r} "
                                  "comes after the first command: sbatch reads #SBATCH lines only before it",
                                  "move every #SBATCH line above the first command", offset + col))
            else:
                rest = line[col + len("#SBATCH"):]
                words: List[Tuple[str, int]] = []
                for m in re.finditer(r"\S+", rest):
                    if m.group(0).startswith("#"):
                        break
                    words.append((m.group(0).strip("\"'"), offset + col + len("#SBATCH") + m.start()))
                o, _ = parse_options(words, stop_at_positional=False)
                alloc.opts.update(o)
        elif stripped and not stripped.startswith("#"):
            body_started = True
        offset += len(line) + 1
    return alloc


def nodelist(n: int) -> str:
    return "node0" if n <= 1 else f"node[0-{n - 1}]"


def host(i: int) -> str:
    return f"node{i}"


def ip(i: int) -> str:
    return f"10.0.0.{i + 1}"


def _subst_fn(node: int, n_nodes: int, events: Optional[List[Tuple[str, int]]] = None):
    """Command substitutions batch scripts use to find hosts, evaluated on simulated node ``node``."""
    def f(body: str, shl: Shell) -> Optional[str]:
        b = " ".join(body.split())
        if re.fullmatch(r"(/bin/)?hostname( -s| --short| -f| --fqdn)?", b):
            if events is not None:
                events.append(("$(hostname)", -1))
            return host(node)
        if re.fullmatch(r"(/bin/)?hostname (-i|-I|--ip-address|--all-ip-addresses)( \| awk '\{print \$1\}')?", b):
            if events is not None:
                events.append(("$(hostname)", -1))
            return ip(node)
        m = re.fullmatch(r"scontrol show hostnames? (\S+)( \| head -n ?1| \| head -1| \| head -n1| \| sed -n 1p)?", b)
        if m:
            arg = sh.expand_text(shl, m.group(1).strip('"'), [-1] * len(m.group(1).strip('"')), dq=True).text
            if sh.has_unknown(arg) or not arg.startswith("node"):
                return None
            return host(0) if m.group(2) else "\n".join(host(i) for i in range(n_nodes))
        m = re.fullmatch(r"\(\((.+)\)\) && echo (\S+) \|\| echo (\S+)", b)  # ((X)) && echo A || echo B
        if m:
            v = sh._arith(shl, m.group(1), -1)
            return None if sh.has_unknown(v) else (m.group(2) if int(v) else m.group(3)).strip("\"'")
        m = re.fullmatch(r"echo (\S+)", b)
        if m and "`" not in b and "$(" not in b:
            return sh.expand_text(shl, m.group(1).strip('"'), [-1] * len(m.group(1).strip('"')), dq=True).text
        return None
    return f


def slurm_env(nodes: int, node: int, local: int, procid: int, ntasks: Optional[int], tpn: Optional[int],
              gpus_node: Optional[int], gpus_task: Optional[int], cpus_task: Optional[str], submit_dir: str,
              batch: bool) -> Dict[str, str]:
    """The variables SLURM sets for one task (srun(1)/sbatch(1) OUTPUT ENVIRONMENT VARIABLES)."""
    e = {"SLURM_JOB_ID": "4242", "SLURM_JOBID": "4242", "SLURM_JOB_NAME": "job", "SLURM_JOB_NUM_NODES": str(nodes),
         "SLURM_NNODES": str(nodes), "SLURM_JOB_NODELIST": nodelist(nodes), "SLURM_NODELIST": nodelist(nodes),
         "SLURM_NODEID": str(node), "SLURM_PROCID": str(procid), "SLURM_LOCALID": str(local),
         "SLURMD_NODENAME": host(node), "SLURM_TOPOLOGY_ADDR": host(node), "HOSTNAME": host(node),
         "SLURM_SUBMIT_DIR": submit_dir, "SLURM_SUBMIT_HOST": "login0", "SLURM_CLUSTER_NAME": "cluster",
         "SLURM_JOB_CPUS_PER_NODE": "1" if nodes == 1 else f"1(x{nodes})", "SLURM_GTIDS": str(procid)}
    if ntasks is not None:
        e["SLURM_NTASKS"] = e["SLURM_NPROCS"] = str(ntasks)
    if tpn is not None:
        e["SLURM_NTASKS_PER_NODE"] = str(tpn)
        e["SLURM_TASKS_PER_NODE"] = str(tpn) if nodes == 1 else f"{tpn}(x{nodes})"
    if gpus_node is not None:
        e["SLURM_GPUS_ON_NODE"] = str(gpus_node)
        seen = gpus_task if gpus_task else gpus_node
        first = local * gpus_task if gpus_task and not batch else 0
        e["CUDA_VISIBLE_DEVICES"] = ",".join(str(first + k) for k in range(seen))
    if cpus_task:
        e["SLURM_CPUS_PER_TASK"] = cpus_task
    if not batch:
        e["SLURM_STEP_ID"] = "0"
        e["SLURM_STEP_NODELIST"] = nodelist(nodes)
        e["SLURM_STEP_NUM_NODES"] = str(nodes)
        if ntasks is not None:
            e["SLURM_STEP_NUM_TASKS"] = str(ntasks)
        e["SLURM_LAUNCH_NODE_IPADDR"] = ip(0)
    return e


# ---------------------------------------------------------------------------------------------
class _Run:
    """Walks the script: the batch shell, then each srun step's simulated tasks."""

    def __init__(self, spec: JobSpec, alloc: Allocation, sim_nodes: int, real_nodes: Optional[int],
                 submit_dir: str) -> None:
        self.spec = spec
        self.alloc = alloc
        self.sim_nodes = sim_nodes
        self.real_nodes = real_nodes
        self.submit_dir = submit_dir
        self.early: List[Tuple[str, int]] = []
        self.not_exported: Dict[str, int] = {}
        self.unsupported_seen = set()
        self.cond = 0  # depth of if/while/for/case in the batch script: assignments there are uncertain

    def _unknown_counts(self, env: Dict[str, str]) -> Dict[str, str]:
        """Without --nodes in the script the node count comes from the sbatch command line: unknown."""
        if self.real_nodes is not None:
            return env
        env = dict(env)
        for k in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_STEP_NUM_NODES", "SLURM_NTASKS", "SLURM_NPROCS",
                  "SLURM_STEP_NUM_TASKS", "SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE"):
            if k in env:
                env[k] = sh.unknown(k)
        return env

    # allocation-wide numbers
    def numbers(self, o: Dict[str, Tuple[str, int]]):
        """(nodes, tasks per node, gpus per node, gpus per task, offsets...) for a step with srun options o."""
        a = self.alloc
        nodes = _int(o["--nodes"][0]) if "--nodes" in o else self.real_nodes
        nodes_where = o["--nodes"][1] if "--nodes" in o else a.nodes[1]
        tpn, tw = None, -1
        for src in (o, a.opts):
            if "--ntasks-per-node" in src and _int(src["--ntasks-per-node"][0]):
                tpn, tw = _int(src["--ntasks-per-node"][0]), src["--ntasks-per-node"][1]
                break
            if "--ntasks" in src and _int(src["--ntasks"][0]) and nodes:
                tpn, tw = max(1, -(-_int(src["--ntasks"][0]) // nodes)), src["--ntasks"][1]
                break
        if tpn is None:
            tpn = 1
        gpn, gpt, gw = None, None, -1
        for src in (o, a.opts):
            if gpn is None and "--gres" in src:
                g = gpu_count(src["--gres"][0])
                if g is not None:
                    gpn, gw = g, src["--gres"][1]
            if gpn is None and "--gpus-per-node" in src:
                g = _plain_gpus(src["--gpus-per-node"][0])
                if g is not None:
                    gpn, gw = g, src["--gpus-per-node"][1]
            if gpt is None and "--gpus-per-task" in src:
                gpt = _plain_gpus(src["--gpus-per-task"][0])
                if gw < 0:
                    gw = src["--gpus-per-task"][1]
            if gpn is None and "--gpus" in src and nodes:
                g = _plain_gpus(src["--gpus"][0])
                if g is not None and g % nodes == 0:
                    gpn, gw = g // nodes, src["--gpus"][1]
        if gpn is None and gpt is not None:
            gpn = gpt * tpn
        return nodes, tpn, gpn, gpt, nodes_where, tw, gw

    def batch_shell(self) -> Shell:
        nodes = self.real_nodes or 1
        _, tpn, gpn, gpt, *_ = self.numbers({})
        ntasks = _int(self.alloc.get("--ntasks")[0])
        if ntasks is None and "--ntasks-per-node" in self.alloc.opts:
            ntasks = tpn * nodes
        env = slurm_env(nodes, 0, 0, 0, ntasks, tpn if "--ntasks-per-node" in self.alloc.opts else None, gpn, gpt,
                        self.alloc.get("--cpus-per-task")[0], self.submit_dir, batch=True)
        s = Shell(name="batch")
        for k, v in self._unknown_counts(env).items():
            s.set(k, PStr(v, [-1] * len(v)), export=True)

        def on_var(name: str, ref: int) -> None:
            if name in PER_TASK:
                self.early.append((name, ref))
        s.on_var = on_var
        events: List[Tuple[str, int]] = []
        base = _subst_fn(0, nodes, events)

        def subst(body: str, shl: Shell) -> Optional[str]:
            n0 = len(events)
            v = base(body, shl)
            if len(events) > n0:
                self._pending_hostname = True
            return v
        s.subst = subst
        self._pending_hostname = False
        return s

    def run(self) -> None:
        text = self.spec.text
        try:
            cmds = sh.lex(text)
        except sh.ShellError as e:
            raise ValueError(str(e)) from None
        batch = self.batch_shell()
        for c in cmds:
            self.command(c.words, batch, None, 0)

    # ---------------------------------------------------------------- commands
    def _unsupported(self, what: str, offset: int) -> None:
        if what in self.unsupported_seen:
            return
        self.unsupported_seen.add(what)
        self.spec.notes.append(Note("jobspec-not-checked", f"{what}: not followed by the checker", "", offset))

    def command(self, words: List[Word], shl: Shell, task, depth: int) -> None:
        """One simple command (unexpanded words) in shell shl; task: None (batch shell) or the task."""
        if depth > MAX_DEPTH:
            return
        KEYWORDS = ("if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!", "time", "in",
                    "esac", "function")
        while words and words[0].literal() in KEYWORDS:
            kw = words[0].literal()
            if kw in ("if", "while", "until"):
                self.cond += 1
            elif kw in ("fi", "done", "esac") and self.cond > 0:
                self.cond -= 1
            words = words[1:]
        if words and words[0].literal() in ("for", "case", "select"):
            self.cond += 1
        if not words:
            return
        head = words[0].literal()
        if head in ("for", "case", "select") or (head or "").endswith(")"):
            return
        prefix: Dict[str, PStr] = {}
        i = 0
        while i < len(words):
            a = sh.assignment(words[i])
            if a is None:
                break
            prefix[a[0]] = sh.expand_assignment_value(shl, a[1])
            i += 1
        if i == len(words):
            for k, v in prefix.items():
                old = shl.vars.get(k)
                if self.cond > 0 and task is None and (old is None or old.text != v.text):
                    v = PStr.at(sh.unknown(k), v.first_pos())  # set only on some paths
                shl.set(k, v)
            return
        words = words[i:]
        head = words[0].literal()
        if head in ("export", "declare", "typeset", "local", "readonly"):
            export = head == "export" or any((w.literal() or "").startswith("-") and "x" in (w.literal() or "")
                                             for w in words[1:])
            for w in words[1:]:
                a = sh.assignment(w)
                if a is not None:
                    shl.set(a[0], sh.expand_assignment_value(shl, a[1]), export=export)
                elif export and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", w.literal() or ""):
                    shl.exported.add(w.literal())
            return
        if head == "set" and len(words) > 1:
            flag = words[1].literal() or ""
            if flag.startswith("-") and "a" in flag and not flag.startswith("--"):
                shl.allexport = True
            elif flag.startswith("+") and "a" in flag:
                shl.allexport = False
            return
        if head == "unset":
            for w in words[1:]:
                shl.vars.pop(w.literal() or "", None)
            return
        if head in ("source", ".", "eval"):
            self._unsupported(f"`{head}`", words[0].start)
            return
        fields: List[PStr] = []
        for w in words:
            fields.extend(sh.expand_word(shl, w))
        if not fields:
            return
        self.argv(fields, shl, task, depth, dict(prefix))

    def argv(self, fields: List[PStr], shl: Shell, task, depth: int, env_prefix: Dict[str, PStr]) -> None:
        """An expanded command line (no more expansion: srun and exec pass words as they are)."""
        if not fields or depth > MAX_DEPTH:
            return
        head = os.path.basename(fields[0].text)
        if head == "srun" and task is None:
            self.srun(fields, shl, depth, env_prefix)
            return
        if head in ("bash", "sh", "zsh", "dash") and len(fields) >= 3 and any(f.text in ("-c", "-lc", "-ec", "-xc")
                                                                             for f in fields[1:3]):
            k = next(j for j in range(1, len(fields)) if fields[j].text in ("-c", "-lc", "-ec", "-xc"))
            if k + 1 >= len(fields):
                return
            script = fields[k + 1]
            try:
                cmds = sh.lex(script.text, base=script.pos)
            except sh.ShellError as e:
                self.spec.notes.append(Note("jobspec-not-checked", f"`{head} -c` script: {e}", "", script.first_pos()))
                return
            # a new shell: it inherits the exported variables (and NAME=value words before the command)
            inner = Shell(vars={k2: v for k2, v in shl.vars.items() if k2 in shl.exported},
                          exported=set(shl.exported), subst=shl.subst, on_var=shl.on_var, name=shl.name)
            for k2, v in env_prefix.items():
                inner.set(k2, v, export=True)
            for c in cmds:
                self.command(c.words, inner, task, depth + 1)
            return
        if head in ("env",):
            j = 1
            while j < len(fields) and (re.match(r"[A-Za-z_][A-Za-z0-9_]*=", fields[j].text) or
                                       fields[j].text.startswith("-")):
                if "=" in fields[j].text and not fields[j].text.startswith("-"):
                    k2, _, _ = fields[j].text.partition("=")
                    env_prefix = dict(env_prefix)
                    env_prefix[k2] = fields[j].sub(len(k2) + 1)
                j += 1
            self.argv(fields[j:], shl, task, depth + 1, env_prefix)
            return
        if head in ("nohup", "time", "exec", "command", "stdbuf", "numactl", "taskset", "unbuffer", "nice", "ionice"):
            j = 1
            while j < len(fields) and (fields[j].text.startswith("-") or (head == "taskset" and j == 1)):
                j += 1
            self.argv(fields[j:], shl, task, depth + 1, env_prefix)
            return
        if head in ("singularity", "apptainer") and len(fields) > 2 and fields[1].text in ("exec", "run"):
            j = 2
            while j < len(fields) and fields[j].text.startswith("-"):
                j += 2 if "=" not in fields[j].text and fields[j].text in ("-B", "--bind", "--env", "-H", "--home",
                                                                            "--pwd", "-W", "--workdir",
                                                                            "--overlay", "-o") else 1
            self.argv(fields[j + 1:], shl, task, depth + 1, env_prefix)
            return
        if head in ("conda", "mamba", "micromamba") and len(fields) > 1 and fields[1].text == "run":
            j = 2
            while j < len(fields) and fields[j].text.startswith("-"):
                j += 2 if fields[j].text in ("-n", "--name", "-p", "--prefix") else 1
            self.argv(fields[j:], shl, task, depth + 1, env_prefix)
            return
        launcher = launcher_of(fields)
        if launcher is not None and len(self.spec.steps) >= MAX_STEPS and task is None:
            self._unsupported(f"more than {MAX_STEPS} launch steps (the rest)", fields[0].first_pos())
            return
        if launcher is None:
            if head in ("mpirun", "mpiexec", "pdsh", "ssh"):
                self._unsupported(f"`{head}`", fields[0].first_pos())
            return
        self.record(launcher, fields, shl, task, env_prefix)

    def record(self, launcher: str, fields: List[PStr], shl: Shell, task, env_prefix: Dict[str, PStr]) -> None:
        env = {k: v.text for k, v in shl.vars.items() if k in shl.exported}
        env.update({k: v.text for k, v in env_prefix.items()})
        if task is None:  # a launcher in the batch body: runs once, on the first node
            nodes, tpn, gpn, gpt, nw, tw, gw = self.numbers({})
            st = Step("batch", fields[0].first_pos(), nodes, 1, gpn, None, gw, nw, -1)
            st.nodes_hint = "#SBATCH --nodes" if nw >= 0 else ""
            st.launches.append(TaskLaunch(0, 0, 0, launcher, fields, env, host(0), self._early_in(fields)))
            self.spec.steps.append(st)
            return
        step, node, local, procid = task
        step.launches.append(TaskLaunch(node, local, procid, launcher, fields, env, host(node),
                                        self._early_in(fields)))

    def _early_in(self, fields: List[PStr]) -> List[Tuple[str, int]]:
        offs = {p for f in fields for p in f.pos if p >= 0}
        return [(n, o) for n, o in self.early if o in offs]

    def srun(self, fields: List[PStr], batch: Shell, depth: int, env_prefix: Dict[str, PStr]) -> None:
        if len(self.spec.steps) >= MAX_STEPS:
            self._unsupported(f"more than {MAX_STEPS} srun steps (the rest)", fields[0].first_pos())
            return
        words = [(f.text, f.first_pos()) for f in fields[1:]]
        o, k = parse_options(words)
        rest = fields[1 + k:]
        nodes, tpn, gpn, gpt, nw, tw, gw = self.numbers(o)
        st = Step("srun", fields[0].first_pos(), nodes, tpn, gpn, gpt, gw, nw, tw)
        st.nodes_hint = "srun --nodes" if "--nodes" in o else ("#SBATCH --nodes" if nw >= 0 else "")
        sim_n = min(nodes if nodes else self.sim_nodes, MAX_SIM_NODES)
        real = nodes or self.sim_nodes
        ntasks = (tpn * real) if tpn else None
        exported = {k2: v for k2, v in batch.vars.items() if k2 in batch.exported}
        for k2, v in env_prefix.items():
            exported[k2] = v
        self.spec.steps.append(st)
        # what the task shells would need but the batch shell did not export
        self.batch_unexported = {k2 for k2 in batch.vars if k2 not in batch.exported}
        for node in range(sim_n):
            for local in range(min(tpn, MAX_SIM_TASKS)):
                procid = node * tpn + local
                env = slurm_env(real, node, local, procid, ntasks, tpn, gpn, gpt, o.get("--cpus-per-task", (None,))[0]
                                or self.alloc.get("--cpus-per-task")[0], self.submit_dir, batch=False)
                t = Shell(name=f"node{node}.{local}")
                for k2, v in exported.items():
                    t.set(k2, v, export=True)
                if nodes is None:
                    env = self._unknown_counts(env)
                for k2, v in env.items():
                    t.set(k2, PStr(v, [-1] * len(v)), export=True)
                t.subst = _subst_fn(node, real)

                def on_var(name: str, ref: int, _t=t) -> None:
                    if name in self.batch_unexported and name not in _t.vars and ref >= 0:
                        self.not_exported.setdefault(name, ref)
                t.on_var = on_var
                self.argv(rest, t, (st, node, local, procid), depth + 1, {})


PY_MODULES = {"torch.distributed.run": "torchrun", "torch.distributed.launch": "torchrun",
              "accelerate.commands.launch": "accelerate", "deepspeed.launcher.runner": "deepspeed"}


def launcher_of(fields: List[PStr]) -> Optional[str]:
    if not fields:
        return None
    head = os.path.basename(fields[0].text)
    if head == "torchrun":
        return "torchrun"
    if head == "accelerate":
        return "accelerate" if len(fields) > 1 and fields[1].text == "launch" else None
    if head == "accelerate-launch":
        return "accelerate"
    if head == "deepspeed":
        return "deepspeed"
    if re.fullmatch(r"python[0-9.]*", head):
        j = 1
        while j < len(fields) and fields[j].text.startswith("-") and not fields[j].text.startswith("-m"):
            j += 1
        if j < len(fields) and fields[j].text.startswith("-m"):
            mod = fields[j].text[2:] or (fields[j + 1].text if j + 1 < len(fields) else "")
            return PY_MODULES.get(mod, "python")
        if j < len(fields) and fields[j].text.endswith(".py"):
            return "python"
    return None


def load(spec: JobSpec, submit_dir: str) -> None:
    """Fill spec.steps / spec.notes from a batch script."""
    notes: List[Note] = []
    alloc = directives(spec.text, notes)
    spec.alloc = {k: v[0] for k, v in alloc.opts.items()}
    real_nodes, _ = alloc.nodes
    spec.notes = list(notes)
    r = _Run(spec, alloc, real_nodes or 1, real_nodes, submit_dir)
    r.run()
    # a multi-node launcher with an unknown node count: simulate two nodes to see per-node values
    if real_nodes is None and any(st.nodes is None and _multi(st) for st in spec.steps):
        spec.steps, spec.notes = [], list(notes)
        r = _Run(spec, alloc, 2, None, submit_dir)
        r.run()
    for name, ref in r.not_exported.items():
        spec.notes.append(Note("jobspec-variable-not-exported", f"${name} is set in the batch script but not exported: "
                               "each task's shell (srun starts it with the exported environment only) sees it unset",
                               f"export {name}", ref))


def _multi(st: Step) -> bool:
    for la in st.launches[:1]:
        for i, w in enumerate(la.words):
            t = w.text
            for flag in ("--nnodes", "--num_machines", "--num-machines", "--num_nodes"):
                if t == flag and i + 1 < len(la.words):
                    v = la.words[i + 1].text.split(":")[-1]
                    return v.isdigit() and int(v) > 1
                if t.startswith(flag + "="):
                    v = t.split("=", 1)[1].split(":")[-1]
                    return v.isdigit() and int(v) > 1
    return False
