"""The Debian package on a fresh machine: scripts/package-deb.sh builds kelp_<version>_<arch>.deb
around $KELP_BIN; it is installed with `dpkg -i` into a fresh minimal Debian bookworm
(`debootstrap --variant=minbase`, made once by scripts/debian-rootfs.sh and cached as a
tarball), with no other package and no systemd running. The test checks what the package put
there, `systemd-analyze verify`s the installed unit, starts Kelp inside the chroot as the unit
would (user kelp, the unit's ExecStart, limits, working directory and notify socket; only the
ports moved to free ones on 127.0.0.1 by command-line flags), produces and consumes with kcat,
finds the records under the chroot's /var/lib/kelp, stops Kelp with SIGTERM (exit 0) and
purges the package.

Runs once, on the local pass (ENGINE_NEUTRAL): the package is the same whatever the suite's
storage. Needs root (chroot, mount). Every mount and process is undone in a finally, and the
chroot is deleted only when nothing is mounted under it any more.
"""

import array
import os
import pathlib
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import tomllib
import urllib.error
import urllib.request

import pytest

from conftest import ENGINE_NEUTRAL, KELP, ROOT, free_port, require

pytestmark = ENGINE_NEUTRAL

UNIT = "lib/systemd/system/kelp.service"
CONFFILE = "etc/kelp/kelp.toml"
DATA = "var/lib/kelp"


def run(cmd, timeout=300, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def chroot(root, *cmd, timeout=300):
    return run(["chroot", str(root), *cmd], timeout=timeout,
               env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
                    "DEBIAN_FRONTEND": "noninteractive"})


def mounts_under(root):
    """Mount points at or below `root`, deepest first."""
    prefix = str(root).rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


def unit_service_settings(text):
    """The [Service] section of a unit file as {key: [values]}."""
    section, out = None, {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]" and "=" in line:
            k, v = line.split("=", 1)
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def passwd_entry(root, name):
    for line in (root / "etc/passwd").read_text().splitlines():
        f = line.split(":")
        if f[0] == name:
            return f
    return None


def group_entry(root, name):
    for line in (root / "etc/group").read_text().splitlines():
        f = line.split(":")
        if f[0] == name:
            return f
    return None


def rlimit(value):
    return resource.RLIM_INFINITY if value == "infinity" else int(value)


def set_limit(which, value):
    """Sets a resource limit as systemd's Limit*= does; where this test may not raise the hard
    limit (a container without CAP_SYS_RESOURCE), as far as the hard limit goes."""
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        hard = resource.getrlimit(which)[1]
        if value != resource.RLIM_INFINITY and hard != resource.RLIM_INFINITY:
            hard = min(hard, value)
        resource.setrlimit(which, (hard, hard))


def health(port, proc, timeout=10):
    """The body of a 200 from /health on 127.0.0.1:port, polled until one comes."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as h:
                return h.read().decode().strip()
        except (urllib.error.URLError, OSError) as e:
            last = e
        time.sleep(0.1)
    pytest.fail(f"/health gave no 200 within {timeout} s (kelp exit {proc.poll()}): {last}")


class NotifySocket:
    """The $NOTIFY_SOCKET systemd gives a Type=notify service: a datagram socket that also
    learns each sender's pid (SO_PASSCRED), so NotifyAccess=main can be checked."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        os.chmod(path, 0o777)  # the service's user sends to it, as to systemd's
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.messages = []  # (sender pid, {KEY: value})

    def sent(self, key, value):
        return any(fields.get(key) == value for _, fields in self.messages)

    def wait_for(self, key, value, proc, timeout):
        """Until a message sets key=value; fails if Kelp exits first or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.sent(key, value):
            if proc.poll() is not None and not self._recv(0):
                pytest.fail(f"kelp exited with {proc.returncode} before {key}={value}")
            self._recv(0.2)
        assert self.sent(key, value), \
            f"no {key}={value} on NOTIFY_SOCKET within {timeout} s: {self.messages}"

    def drain(self):
        """Takes every message already sent (after the sender exited)."""
        while self._recv(0):
            pass

    def _recv(self, timeout):
        self.sock.settimeout(timeout)
        creds = array.array("i", [0, 0, 0])  # struct ucred: pid, uid, gid
        try:
            data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(creds.itemsize * 3))
        except (BlockingIOError, socket.timeout):
            return False
        pid = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                creds = array.array("i")
                creds.frombytes(payload[:12])
                pid = creds[0]
        fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
        self.messages.append((pid, fields))
        return True

    def close(self):
        self.sock.close()


@pytest.fixture
def fresh_debian():
    """A fresh copy of the cached minimal bookworm, removed afterwards (never while anything
    is still mounted under it: a bind-mounted /dev must not be deleted through it)."""
    require(os.geteuid() == 0, "root (chroot, mount, dpkg in a chroot)")
    r = run([str(ROOT / "scripts/debian-rootfs.sh")], timeout=900)
    assert r.returncode == 0, f"scripts/debian-rootfs.sh failed:\n{r.stderr}"
    tarball = r.stdout.strip().splitlines()[-1]
    base = pathlib.Path(tempfile.mkdtemp(prefix="kelp-deb-root-", dir="/var/tmp"))
    root = base / "root"
    root.mkdir()
    try:
        r = run(["tar", "--numeric-owner", "-xzf", tarball, "-C", str(root)])
        assert r.returncode == 0, f"unpacking {tarball}: {r.stderr}"
        yield root
    finally:
        for m in mounts_under(root):
            subprocess.run(["umount", "-l", m], check=False)
        left = mounts_under(root)
        assert not left, f"still mounted, {base} kept: {left}"
        subprocess.run(["rm", "-rf", "--one-file-system", str(base)], check=False)


def test_deb_installs_and_serves_on_fresh_debian(fresh_debian, tmp_path):
    root = fresh_debian
    for tool in ("dpkg-deb", "dpkg-shlibdeps", "systemd-analyze", "kcat"):
        require(shutil.which(tool) is not None, tool)

    # --- build the package around the binary under test
    r = run([str(ROOT / "scripts/package-deb.sh"), str(tmp_path / "deb")],
            env={**os.environ, "KELP_BIN": str(KELP)})
    assert r.returncode == 0, f"package-deb.sh failed:\n{r.stderr}"
    deb = pathlib.Path(r.stdout.strip().splitlines()[-1])
    version = tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"]
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    assert deb.name == f"kelp_{version}_{arch}.deb"

    # --- install: Depends met by the fresh system, maintainer scripts work without systemd
    shutil.copy(deb, root / "tmp" / deb.name)
    r = chroot(root, "dpkg", "-i", f"/tmp/{deb.name}")
    assert r.returncode == 0, f"dpkg -i failed on a fresh bookworm:\n{r.stdout}\n{r.stderr}"
    r = chroot(root, "dpkg-query", "-W", "-f", "${Status}\n${Conffiles}\n", "kelp")
    assert r.stdout.startswith("install ok installed"), r.stdout
    assert f" /{CONFFILE} " in r.stdout, f"{CONFFILE} is not a conffile: {r.stdout}"
    assert os.access(root / "usr/bin/kelp", os.X_OK)
    assert chroot(root, "/usr/bin/kelp", "--version").stdout.startswith(f"kelp {version}")
    assert (root / CONFFILE).read_text() == (ROOT / "packaging/kelp.toml").read_text()
    assert (root / "usr/share/doc/kelp/copyright").is_file()
    user, group = passwd_entry(root, "kelp"), group_entry(root, "kelp")
    assert user and group, "postinst made no kelp user and group"
    uid, gid = int(user[2]), int(group[2])
    assert int(user[3]) == gid and int(user[2]) < 1000, f"not a system user: {user}"
    st = (root / DATA).stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (uid, gid, 0o750), \
        f"/{DATA}: uid {st.st_uid} gid {st.st_gid} mode {oct(st.st_mode & 0o7777)}"
    assert (root / "etc/systemd/system/multi-user.target.wants/kelp.service").is_symlink(), \
        "kelp.service not enabled"
    # postinst again (dpkg-reconfigure, a re-run after a failure) changes nothing.
    r = chroot(root, "/var/lib/dpkg/info/kelp.postinst", "configure", "")
    assert r.returncode == 0, f"second postinst run:\n{r.stdout}\n{r.stderr}"
    assert passwd_entry(root, "kelp") == user

    # --- the installed unit, verified by systemd 252 against the chroot's files; the chroot
    # has no systemd, so the standard targets it names come from the host's.
    units = root / "tmp/host-units"
    shutil.copytree("/lib/systemd/system", units, symlinks=True)
    r = run(["systemd-analyze", "verify", "--man=no", f"--root={root}", "kelp.service"],
            env={**os.environ, "SYSTEMD_UNIT_PATH": "/tmp/host-units:"})
    shutil.rmtree(units)
    problems = [line for line in (r.stdout + r.stderr).splitlines() if "kelp" in line]
    assert r.returncode == 0 and not problems, \
        f"systemd-analyze verify (exit {r.returncode}):\n{r.stdout}\n{r.stderr}"

    # --- start it as the unit would
    unit = unit_service_settings((root / UNIT).read_text())
    assert unit["Type"] == ["notify"] and unit["NotifyAccess"] == ["main"]
    assert unit["User"] == ["kelp"] and unit["Group"] == ["kelp"]
    argv = shlex.split(unit["ExecStart"][-1])
    assert argv[:3] == ["/usr/bin/kelp", "--config", f"/{CONFFILE}"], argv
    workdir = unit.get("WorkingDirectory", ["/"])[-1]
    nofile = rlimit(unit["LimitNOFILE"][-1])
    memlock = rlimit(unit["LimitMEMLOCK"][-1])
    umask = int(unit.get("UMask", ["0022"])[-1], 8)
    stop_timeout = int(unit["TimeoutStopSec"][-1].removesuffix("s"))

    # The conffile as shipped is valid for this binary (a bad key would exit 2).
    r = chroot(root, *argv, "--print-config")
    assert r.returncode == 0, f"--print-config with the shipped config:\n{r.stderr}"
    tomllib.loads(r.stdout)  # TOML, as promised
    assert f'"/{DATA}"' in r.stdout and '"0.0.0.0:9092"' in r.stdout, r.stdout

    port, metrics = free_port(), free_port()
    argv += ["--listen", f"127.0.0.1:{port}", "--metrics-addr", f"127.0.0.1:{metrics}"]
    (root / "run").mkdir(exist_ok=True)
    notify = NotifySocket(root / "run/kelp-test-notify")
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/var/lib/kelp", "USER": "kelp", "LOGNAME": "kelp",
           "SHELL": user[6], "LANG": "C.UTF-8", "NOTIFY_SOCKET": "/run/kelp-test-notify"}

    def as_the_unit():
        os.chroot(root)
        os.chdir(workdir)
        set_limit(resource.RLIMIT_NOFILE, nofile)
        set_limit(resource.RLIMIT_MEMLOCK, memlock)
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        os.umask(umask)

    mounted, proc = [], None
    log = open(tmp_path / "kelp.log", "wb")
    try:
        for fs in ("proc", "sys", "dev"):
            (root / fs).mkdir(exist_ok=True)
            subprocess.run(["mount", "--bind", f"/{fs}", str(root / fs)], check=True)
            mounted.append(root / fs)
        proc = subprocess.Popen(argv, env=env, preexec_fn=as_the_unit, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT)
        notify.wait_for("READY", "1", proc, timeout=60)
        assert all(pid == proc.pid for pid, _ in notify.messages), \
            f"notifications from other than the main pid {proc.pid}: {notify.messages}"
        assert health(metrics, proc) == "ready"

        # A real client produces and consumes; the records land in the chroot's data dir.
        topic = f"pkg-{os.getpid()}-{time.monotonic_ns()}"
        values = [f"deb-record-{topic}-{i}" for i in range(100)]
        bs = ["-b", f"127.0.0.1:{port}"]
        r = run(["kcat", "-P", *bs, "-t", topic, "-X", "acks=all"],
                input="\n".join(values) + "\n", timeout=60)
        assert r.returncode == 0, f"kcat produce:\n{r.stderr}"
        r = run(["kcat", "-C", *bs, "-t", topic, "-o", "beginning", "-c", str(len(values)),
                 "-e", "-q"], timeout=60)
        assert r.returncode == 0, f"kcat consume:\n{r.stderr}"
        assert r.stdout.splitlines() == values
        logs = list((root / DATA / "topics").glob(f"{topic}-*/*.log"))
        assert logs, f"no segment of {topic} under /{DATA}/topics"
        assert any(values[-1].encode() in f.read_bytes() for f in logs)
        assert all(f.stat().st_uid == uid for f in logs), "segments not owned by kelp"

        os.kill(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=stop_timeout)
        main_pid, proc = proc.pid, None
        assert rc == 0, f"kelp exited {rc} on SIGTERM"
        notify.drain()
        assert notify.sent("STOPPING", "1"), f"no STOPPING=1: {notify.messages}"
        assert all(pid == main_pid for pid, _ in notify.messages), notify.messages
    except BaseException:
        log.flush()
        print(f"--- kelp log ---\n{(tmp_path / 'kelp.log').read_text(errors='replace')}")
        raise
    finally:
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()
        notify.close()
        for m in reversed(mounted):
            subprocess.run(["umount", str(m)], check=False)

    # --- reinstall (an upgrade's steps: postinst configure <old version>): the admin's edit
    # of the conffile is kept.
    edited = (root / CONFFILE).read_text() + "# edited by the admin\n"
    (root / CONFFILE).write_text(edited)
    r = chroot(root, "dpkg", "-i", f"/tmp/{deb.name}")
    assert r.returncode == 0, f"dpkg -i again:\n{r.stdout}\n{r.stderr}"
    assert (root / CONFFILE).read_text() == edited, "reinstall replaced the edited conffile"

    # --- purge: the package's files go, the data and the user stay (packaging/README.md)
    r = chroot(root, "dpkg", "--purge", "kelp")
    assert r.returncode == 0, f"dpkg --purge:\n{r.stdout}\n{r.stderr}"
    for gone in ("usr/bin/kelp", UNIT, "etc/kelp", "etc/systemd/system/kelp.service",
                 "etc/systemd/system/multi-user.target.wants/kelp.service"):
        assert not (root / gone).exists() and not (root / gone).is_symlink(), f"/{gone} left"
    assert any((root / DATA / "topics").glob(f"{topic}-*/*.log")), "purge deleted the data"
    assert passwd_entry(root, "kelp") == user
