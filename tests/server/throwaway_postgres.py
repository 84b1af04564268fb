"""A throwaway PostgreSQL cluster in a temporary folder, for the shared-queue tests.

Debian's server binaries (postgresql-15 or newer, /usr/lib/postgresql/N/bin) run as a
non-root user: as root, the cluster belongs to the 'postgres' user (or 'nobody'). It listens
on loopback TCP only, with password authentication, so the tests use URLs with a password
as users do.
"""
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time


def server_bin_dir():
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                  key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)
    for d in reversed(dirs):
        if os.path.isfile(os.path.join(d, "initdb")) and os.path.isfile(os.path.join(d, "pg_ctl")):
            return d
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThrowawayPostgres:
    USER = "sdqueue"

    def __init__(self, password):
        self.bin = server_bin_dir()
        if not self.bin:
            raise FileNotFoundError("no PostgreSQL server binaries (Debian package postgresql)")
        self.password = password
        self.root = tempfile.mkdtemp(prefix="sd_queue_pg_")
        self.data = os.path.join(self.root, "data")
        self.port = free_port()
        self.run_as = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    pwd.getpwnam(name)
                    self.run_as = name
                    break
                except KeyError:
                    pass
            entry = pwd.getpwnam(self.run_as)
            os.chmod(self.root, 0o755)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        pwfile = os.path.join(self.root, "pw")
        with open(pwfile, "w") as f:
            f.write(password + "\n")
        if self.run_as:
            entry = pwd.getpwnam(self.run_as)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", self.data, "-U", self.USER, "--pwfile", pwfile,
                  "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync")
        os.remove(pwfile)
        self.start()

    @property
    def url(self):
        return f"postgresql://{self.USER}:{self.password}@127.0.0.1:{self.port}/postgres"

    def _run(self, tool, *args, check=True):
        cmd = [os.path.join(self.bin, tool), *args]
        if self.run_as:
            cmd = ["runuser", "-u", self.run_as, "--", *cmd]
        return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, cwd=self.root)

    def start(self):
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.root}"
                " -c fsync=off -c max_connections=200 -c shared_buffers=32MB")
        self._run("pg_ctl", "-D", self.data, "-o", opts, "-l", os.path.join(self.root, "log"),
                  "-w", "-t", "60", "start")

    def stop(self, mode="fast"):
        self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop", check=False)

    def psql(self, sql):
        """Runs SQL through the server's own psql (trust over the socket); returns stdout."""
        psql = os.path.join(self.bin, "psql")
        cmd = [psql, "-h", self.root, "-p", str(self.port), "-U", self.USER, "-d", "postgres",
               "-At", "-c", sql]
        if self.run_as:
            cmd = ["runuser", "-u", self.run_as, "--", *cmd]
        return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout

    def destroy(self):
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
