"""Build-cache mirrors for tests: both layouts written from index JSON, and a local HTTP server (127.0.0.1)
that serves a folder, logs every request and can be told to fail on chosen paths."""

import contextlib
import gzip
import hashlib
import http.server
import json
import threading
import time
from pathlib import Path

from paths import DATA

SAMPLES = DATA / "indexes"
SAMPLE_FOLDERS = {"5": "v2-layout-db-v5", "6": "legacy-db-v6", "7": "v2-layout-db-v7", "8": "v2-layout-db-v8"}


def sample_index(version):
    """The bytes of the sample index of this Database version (Spack's, and ours of version 5)."""
    return (SAMPLES / SAMPLE_FOLDERS[version] / "build_cache" / "index.json").read_bytes()


def write_v2(mirror, index_bytes):
    """build_cache/index.json and its sha256 in index.json.hash."""
    folder = Path(mirror) / "build_cache"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.json").write_bytes(index_bytes)
    (folder / "index.json.hash").write_text(hashlib.sha256(index_bytes).hexdigest())
    return Path(mirror)


def write_v3(mirror, index_bytes, compression="none", database_version="8"):
    """v3/layout.json, the index manifest and the content-addressed blob it names; returns the blob's path
    relative to the mirror."""
    mirror = Path(mirror)
    stored = gzip.compress(index_bytes, mtime=0) if compression == "gzip" else index_bytes
    checksum = hashlib.sha256(stored).hexdigest()
    blob = Path("blobs", "sha256", checksum[:2], checksum)
    (mirror / blob).parent.mkdir(parents=True, exist_ok=True)
    (mirror / blob).write_bytes(stored)
    (mirror / "v3" / "manifests" / "index").mkdir(parents=True, exist_ok=True)
    (mirror / "v3" / "layout.json").write_text('{"signing": "gpg"}')
    manifest = {
        "version": 3,
        "data": [
            {
                "contentLength": len(stored),
                "mediaType": f"application/vnd.spack.db.v{database_version}+json",
                "compression": compression,
                "checksumAlgorithm": "sha256",
                "checksum": checksum,
            }
        ],
    }
    (mirror / "v3" / "manifests" / "index" / "index.manifest.json").write_text(json.dumps(manifest, indent=0))
    return blob.as_posix()


def subset(index_bytes, binaries):
    """An index listing only these binaries (in_buildcache) and, as dependency records, what they need."""
    database = json.loads(index_bytes)["database"]
    installs = database["installs"]
    kept, pending = {}, list(binaries)
    while pending:
        spec_hash = pending.pop()
        if spec_hash in kept:
            continue
        kept[spec_hash] = dict(installs[spec_hash], in_buildcache=spec_hash in binaries)
        pending.extend(edge["hash"] for edge in installs[spec_hash]["spec"].get("dependencies", []))
    return json.dumps({"database": {"version": database["version"], "installs": kept}}).encode()


def edited(index_bytes, edit):
    """An index changed by edit(database dict)."""
    document = json.loads(index_bytes)
    edit(document["database"])
    return json.dumps(document).encode()


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _fault(self):
        self.server.requests.append((self.command, self.path))
        fault = self.server.faults.get(self.path.split("?")[0])
        if fault is None:
            return False
        fault(self)
        return True

    def do_GET(self):  # noqa: N802 (http.server's names)
        if not self._fault():
            super().do_GET()

    def do_HEAD(self):  # noqa: N802
        if not self._fault():
            super().do_HEAD()


@contextlib.contextmanager
def serving(root):
    """A server for the folder root on 127.0.0.1: (base URL, server); server.requests lists (method, path),
    server.faults maps a path to a function that answers its requests instead."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **k: _Handler(*a, directory=str(root), **k))
    server.requests, server.faults = [], {}
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def status(code):
    """A fault: answer with this HTTP status and no body."""

    def answer(handler):
        handler.send_response(code)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


def no_head(code):
    """A fault: answer HEAD with this HTTP status (a server that does not implement it), GET as usual."""

    def answer(handler):
        if handler.command != "HEAD":
            http.server.SimpleHTTPRequestHandler.do_GET(handler)
            return
        handler.send_response(code)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


def body(data, declared=None):
    """A fault: answer 200 with these bytes, announcing declared bytes (a truncated download when larger)."""

    def answer(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(data) if declared is None else declared))
        handler.end_headers()
        if handler.command == "GET":
            handler.wfile.write(data)
            handler.wfile.flush()
        handler.close_connection = True

    return answer


# Faults of a hostile server (issue 22): answers no honest server gives.


def raw(data):
    """A fault: these bytes are the whole answer, status line and headers included (or whatever they are)."""

    def answer(handler):
        handler.wfile.write(data)
        handler.wfile.flush()
        handler.close_connection = True

    return answer


def redirect(location, code=302):
    """A fault: a redirect to location (bytes: sent as they are)."""
    return raw(b"HTTP/1.1 %d Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % (code, location))


def drip(head, byte=b" ", every=0.2, seconds=60):
    """A fault: head at once, then one byte every `every` seconds, until the client goes (or `seconds` pass)."""

    def answer(handler):
        handler.close_connection = True
        started = time.monotonic()
        try:
            handler.wfile.write(head)
            while time.monotonic() - started < seconds:
                handler.wfile.flush()
                time.sleep(every)
                handler.wfile.write(byte)
        except OSError:  # the client went
            pass

    return answer


def endless(head, piece=b" " * 65536, seconds=60):
    """A fault: head, then a body that never ends (until the client goes, or `seconds` pass)."""
    return drip(head, byte=piece, every=0, seconds=seconds)
