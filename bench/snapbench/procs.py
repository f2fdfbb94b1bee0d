"""Child processes: start servers in their own session, read their memory from /proc, kill them all.

Every process the harness starts is registered here; kill_all() (called from a finally block,
atexit and the signal handlers that install_signal_handlers() sets) terminates each registered
process group that is still alive, by its id, so no server outlives the harness, even on error.
"""
import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

_children = []  # Popen objects started with start_new_session=True


def spawn(cmd, log_path, env=None):
    """Start cmd in a new session with stdout and stderr appended to log_path; register it."""
    log = open(log_path, "ab")
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True)
    finally:
        log.close()
    _children.append(p)
    return p


def stop(p, grace=5.0):
    """SIGTERM the process group of p (its pid: start_new_session made it the leader), then SIGKILL."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    if p in _children:
        _children.remove(p)


def kill_all():
    for p in list(_children):
        try:
            stop(p, grace=2.0)
        except Exception as e:  # keep killing the others
            print(f"warning: could not stop pid {p.pid}: {e}", file=sys.stderr)


def install_signal_handlers():
    atexit.register(kill_all)

    def on_signal(signum, _frame):
        kill_all()
        raise SystemExit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)


def free_port():
    """A free TCP port on 127.0.0.1 (bound and released; loopback only)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port, timeout=0.05):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def proc_status(pid):
    """RssAnon, RssFile, RssShmem and VmHWM of pid from /proc/PID/status, in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("RssAnon", "RssFile", "RssShmem", "VmHWM", "VmRSS"):
                out[k] = int(v.split()[0]) * 1024
    return out


def proc_stat(pid):
    """(CPU seconds, minor faults, major faults) of pid from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    # fields after "(comm)": state is rest[0], so field N of proc(5) is rest[N - 3]
    minflt, majflt, utime, stime = int(rest[7]), int(rest[9]), int(rest[11]), int(rest[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK"), minflt, majflt


def run_measured(cmd, env=None, cwd=None):
    """Run cmd to completion; return (seconds, peak RSS bytes of the child alone, stdout bytes).

    stdout and stderr go to temporary files (no pipe can fill up), the child is reaped with
    os.wait4 so its rusage (ru_maxrss: peak RSS of that child alone) is available."""
    secs, rss, out, _ = run_measured_cpu(cmd, env=env, cwd=cwd)
    return secs, rss, out


def run_measured_cpu(cmd, env=None, cwd=None):
    """run_measured, and the child's CPU seconds (user + system, from the same rusage): on a
    shared machine they move far less with the load than the wall time does."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=env, cwd=cwd, start_new_session=True)
        _children.append(p)
        try:
            _, status, ru = os.wait4(p.pid, 0)
        except BaseException:
            stop(p)
            raise
        secs = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        _children.remove(p)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}: {err.decode(errors='replace')[-3000:]}")
    return secs, ru.ru_maxrss * 1024, out, ru.ru_utime + ru.ru_stime


def evict(paths):
    """Drop these files' pages from the page cache (posix_fadvise DONTNEED; only these files)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm(paths):
    """Read these files once so they are in the page cache."""
    buf = bytearray(1 << 20)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
