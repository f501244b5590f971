"""A small Hub-compatible HTTP server for tests (stdlib only), started on 127.0.0.1 with a free port.

It implements just the endpoints the real ``huggingface_hub`` client uses to create repos and commit
(and to read files back), and writes what arrives to a folder:

* ``POST /api/repos/create``                                  create_repo (409 when it exists)
* ``POST /api/validate-yaml``                                 README.md metadata check (always fine)
* ``GET  /api/{type}s/{ns}/{name}[/revision/{rev}]``          repo_info / dataset_info / space_info
* ``GET  /api/{type}s/{ns}/{name}/tree/{rev}[/{path}]``       list_repo_files / list_repo_tree
* ``POST /api/{type}s/{ns}/{name}/preupload/{rev}``           upload modes: always ``regular`` (no LFS/Xet)
* ``POST /api/{type}s/{ns}/{name}/commit/{rev}``              NDJSON commit (``file``, ``deletedFile``,
                                                              ``deletedFolder``), ``?create_pr=1``
* ``POST /api/{type}s/{ns}/{name}/branch/{branch}``           create_branch
* ``GET|HEAD /{prefix}{ns}/{name}/resolve/{rev}/{path}``      file download (``datasets/``, ``spaces/``, models)

Each branch of each repo is mirrored to ``root/<type>s/<ns>/<name>/<branch>/`` after every commit; a
commit is applied to a copy of the tree and swapped in whole, so a reader never sees half a commit.
Write endpoints require ``Authorization: Bearer <token>`` with the server's token (401 otherwise).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

TOKEN = "hf_test_token_0123456789"
_API = re.compile(r"^/api/(models|datasets|spaces)/([^/]+)/([^/]+)(?:/(revision|tree|preupload|commit|branch)/([^/]+)(/.*)?)?$")
_DISCUSSIONS = re.compile(r"^/api/(models|datasets|spaces)/([^/]+)/([^/]+)/discussions$")
_RESOLVE = re.compile(r"^/(datasets/|spaces/)?([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob " + str(len(data)).encode() + b"\0" + data).hexdigest()


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool = False
    sdk: str | None = None
    branches: dict[str, dict[str, bytes]] = field(default_factory=lambda: {"main": {}})
    heads: dict[str, str] = field(default_factory=dict)
    commits: list[dict] = field(default_factory=list)
    prs: list[str] = field(default_factory=list)
    pr_titles: list[str] = field(default_factory=list)


class HubState:
    def __init__(self, root: Path, token: str = TOKEN):
        self.root = Path(root)
        self.token = token
        self.repos: dict[tuple[str, str], Repo] = {}
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ helpers for tests
    def repo(self, repo_type: str, repo_id: str) -> Repo:
        return self.repos[(repo_type, repo_id)]

    def folder(self, repo_type: str, repo_id: str, branch: str = "main") -> Path:
        return self.root / f"{repo_type}s" / repo_id / branch.replace("/", "--")

    # ------------------------------------------------------------------ internals
    def _commit_sha(self, repo: Repo, files: dict[str, bytes], parent: str | None, summary: str) -> str:
        h = hashlib.sha1()
        h.update((parent or "").encode())
        h.update(summary.encode())
        for p in sorted(files):
            h.update(p.encode() + b"\0" + git_blob_sha1(files[p]).encode())
        h.update(str(len(repo.commits)).encode())
        return h.hexdigest()

    def _mirror(self, repo: Repo, branch: str) -> None:
        target = self.folder(repo.repo_type, repo.repo_id, branch)
        tmp = target.parent / f".{target.name}.incoming"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        for p, data in repo.branches[branch].items():
            f = tmp / p
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(data)
        old = target.parent / f".{target.name}.old"
        if target.exists():
            target.rename(old)
        tmp.rename(target)
        if old.exists():
            shutil.rmtree(old)

    def create_repo(self, repo_type: str, repo_id: str, private: bool, sdk: str | None) -> bool:
        with self.lock:
            key = (repo_type, repo_id)
            if key in self.repos:
                return False
            repo = Repo(repo_type, repo_id, private=private, sdk=sdk)
            files = {".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"}
            repo.branches["main"] = files
            sha = self._commit_sha(repo, files, None, "initial commit")
            repo.heads["main"] = sha
            repo.commits.append({"oid": sha, "summary": "initial commit", "branch": "main"})
            self.repos[key] = repo
            self._mirror(repo, "main")
            return True

    def apply_commit(self, repo: Repo, branch: str, lines: list[dict], create_pr: bool) -> tuple[str, str | None]:
        with self.lock:
            header = lines[0]["value"] if lines and lines[0].get("key") == "header" else {"summary": ""}
            parent = header.get("parentCommit")
            if parent and not repo.heads[branch].startswith(parent):
                raise ValueError("parent commit is not the head of the branch")
            files = dict(repo.branches[branch])
            for item in lines[1:]:
                k, v = item["key"], item["value"]
                if k == "file":
                    if v.get("encoding") != "base64":
                        raise ValueError("only base64 file content is supported")
                    files[v["path"]] = base64.b64decode(v["content"])
                elif k == "deletedFile":
                    if v["path"] not in files:
                        raise FileNotFoundError(v["path"])
                    del files[v["path"]]
                elif k == "deletedFolder":
                    pre = v["path"].rstrip("/") + "/"
                    for p in [p for p in files if p.startswith(pre)]:
                        del files[p]
                elif k == "lfsFile":
                    raise ValueError("LFS is not supported by the test server (preupload answers 'regular')")
                else:
                    raise ValueError(f"unsupported commit operation {k!r}")
            sha = self._commit_sha(repo, files, repo.heads[branch], header.get("summary", ""))
            pr_url = None
            target = branch
            if create_pr:
                num = len(repo.prs) + 1
                target = f"refs/pr/{num}"
                repo.prs.append(target)
                repo.pr_titles.append(header.get("summary", ""))
                pr_url = f"discussions/{num}"
            repo.branches[target] = files
            repo.heads[target] = sha
            repo.commits.append({"oid": sha, "summary": header.get("summary", ""), "branch": target,
                                 "n_ops": len(lines) - 1})
            self._mirror(repo, target)
            return sha, pr_url


def _make_handler(state: HubState):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # keep pytest output quiet
            pass

        # -------------------------------------------------------------- responses
        def _send(self, code: int, body: bytes = b"", ctype: str = "application/json", headers: dict | None = None,
                  head: bool = False):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _json(self, code: int, obj, headers: dict | None = None):
            self._send(code, json.dumps(obj).encode(), headers=headers)

        def _error(self, code: int, msg: str, error_code: str | None = None, head: bool = False):
            headers = {"X-Error-Message": msg}
            if error_code:
                headers["X-Error-Code"] = error_code
            self._send(code, json.dumps({"error": msg}).encode(), headers=headers, head=head)

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                return self.rfile.read(n)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = b""
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()
            return b""

        def _authorised(self) -> bool:
            return self.headers.get("Authorization", "") == f"Bearer {state.token}"

        def _branch(self, repo: Repo, rev: str) -> str:
            """A revision as a branch name: a branch, or a commit sha some branch has as its head (clients such as
            ``datasets`` resolve a branch to its commit and then ask for ``resolve/<sha>/...``)."""
            if rev in repo.branches:
                return rev
            heads = [b for b, sha in repo.heads.items() if sha == rev or (len(rev) >= 7 and sha.startswith(rev))]
            return "main" if "main" in heads else (heads[0] if heads else rev)

        def _repo(self, typ: str, ns: str, name: str) -> Repo | None:
            return state.repos.get((typ[:-1], f"{ns}/{name}"))

        # -------------------------------------------------------------- verbs
        def do_HEAD(self):
            self._get(head=True)

        def do_GET(self):
            self._get(head=False)

        def _get(self, head: bool):
            url = urlsplit(self.path)
            state.requests.append((self.command, url.path))
            m = _RESOLVE.match(url.path)
            if m and not url.path.startswith("/api/"):
                prefix, ns, name, rev, path = m.groups()
                typ = {"datasets/": "datasets", "spaces/": "spaces", None: "models"}[prefix]
                repo = self._repo(typ, ns, name)
                if repo is None:
                    return self._error(404, "Repository not found", "RepoNotFound", head)
                rev = self._branch(repo, unquote(rev))
                if rev not in repo.branches:
                    return self._error(404, "Revision not found", "RevisionNotFound", head)
                data = repo.branches[rev].get(unquote(path))
                if data is None:
                    return self._error(404, "Entry not found", "EntryNotFound", head)
                etag = f'"{git_blob_sha1(data)}"'
                return self._send(200, data, "application/octet-stream",
                                  {"ETag": etag, "X-Repo-Commit": repo.heads[rev]}, head)
            d = _DISCUSSIONS.match(url.path)
            if d:  # the pull requests, all open (the stand-in neither merges nor closes them), as the Hub lists them
                typ, ns, name = d.groups()
                repo = self._repo(typ, ns, name)
                if repo is None or (repo.private and not self._authorised()):
                    return self._error(404, "Repository not found", "RepoNotFound", head)
                q = parse_qs(url.query)
                want = q.get("status", [None])[0]
                rows = [{"num": i + 1, "title": t, "status": "open", "isPullRequest": True,
                         "createdAt": "2026-01-01T00:00:00.000Z", "author": {"name": "benchaudit"},
                         "repo": {"name": repo.repo_id, "type": typ[:-1]}}
                        for i, t in enumerate(repo.pr_titles)
                        if q.get("type", ["pull_request"])[0] in ("all", "pull_request") and want in (None, "all", "open")]
                return self._json(200, {"discussions": rows, "count": len(rows), "start": 0, "numClosedDiscussions": 0})
            m = _API.match(url.path)
            if not m:
                return self._error(404, f"unknown endpoint {url.path}")
            typ, ns, name, kind, rev, sub = m.groups()
            repo = self._repo(typ, ns, name)
            if repo is None or (repo.private and not self._authorised()):
                return self._error(404, "Repository not found", "RepoNotFound", head)
            rev = self._branch(repo, unquote(rev)) if rev else "main"
            if kind in (None, "revision"):
                if rev not in repo.branches:
                    return self._error(404, "Revision not found", "RevisionNotFound", head)
                return self._json(200, {"id": repo.repo_id, "sha": repo.heads[rev], "private": repo.private,
                                        "siblings": [{"rfilename": p} for p in sorted(repo.branches[rev])],
                                        **({"sdk": repo.sdk} if repo.sdk else {})})
            if kind == "tree":
                if rev not in repo.branches:
                    return self._error(404, "Revision not found", "RevisionNotFound", head)
                prefix = (unquote(sub).strip("/") + "/") if sub else ""
                files = sorted(p for p in repo.branches[rev] if p.startswith(prefix))
                recursive = parse_qs(url.query).get("recursive", ["false"])[0].lower() in ("true", "1")
                out, folders = [], set()
                for p in files:
                    rest = p[len(prefix):]
                    if not recursive and "/" in rest:
                        folders.add(prefix + rest.split("/")[0])
                        continue
                    data = repo.branches[rev][p]
                    out.append({"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": p})
                if recursive:
                    for p in files:
                        parts = p[len(prefix):].split("/")[:-1]
                        for i in range(1, len(parts) + 1):
                            folders.add(prefix + "/".join(parts[:i]))
                out += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in sorted(folders)]
                return self._json(200, out)
            return self._error(405, "method not allowed")

        def do_POST(self):
            url = urlsplit(self.path)
            state.requests.append((self.command, url.path))
            body = self._body()
            if url.path == "/api/validate-yaml":
                return self._json(200, {"errors": [], "warnings": []})
            if not self._authorised():
                return self._error(401, "Invalid credentials in Authorization header")
            if url.path == "/api/repos/create":
                p = json.loads(body or b"{}")
                typ = p.get("type") or "model"
                repo_id = f"{p['organization']}/{p['name']}" if p.get("organization") else p["name"]
                if "/" not in repo_id:
                    return self._error(400, "repo id must be namespace/name")
                created = state.create_repo(typ, repo_id, p.get("visibility") == "private", p.get("sdk"))
                prefix = {"model": "", "dataset": "datasets/", "space": "spaces/"}[typ]
                host = f"http://{self.headers.get('Host')}"
                if not created:
                    return self._json(409, {"error": "You already created this repo", "url": f"{host}/{prefix}{repo_id}"})
                return self._json(200, {"url": f"{host}/{prefix}{repo_id}", "name": repo_id})
            m = _API.match(url.path)
            if not m or m.group(4) not in ("preupload", "commit", "branch"):
                return self._error(404, f"unknown endpoint {url.path}")
            typ, ns, name, kind, rev, _sub = m.groups()
            repo = self._repo(typ, ns, name)
            if repo is None:
                return self._error(404, "Repository not found", "RepoNotFound")
            rev = unquote(rev)
            qs = parse_qs(url.query)
            create_pr = qs.get("create_pr", ["0"])[0] in ("1", "true")
            if kind == "branch":
                p = json.loads(body or b"{}")
                start = p.get("startingPoint") or "main"
                if rev in repo.branches:
                    return self._error(409, "Reference already exists")
                if start not in repo.branches:
                    return self._error(404, "Revision not found", "RevisionNotFound")
                with state.lock:
                    repo.branches[rev] = dict(repo.branches[start])
                    repo.heads[rev] = repo.heads[start]
                    state._mirror(repo, rev)
                return self._json(200, {})
            if rev not in repo.branches:
                return self._error(404, "Revision not found", "RevisionNotFound")
            if kind == "preupload":
                p = json.loads(body or b"{}")
                files = repo.branches[rev]
                return self._json(200, {"files": [
                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                     "oid": git_blob_sha1(files[f["path"]]) if f["path"] in files else None}
                    for f in p.get("files", [])]})
            # commit
            try:
                lines = [json.loads(x) for x in body.splitlines() if x.strip()]
                sha, pr = state.apply_commit(repo, rev, lines, create_pr)
            except (ValueError, KeyError, FileNotFoundError) as e:
                return self._error(400, f"bad commit: {e}")
            host = f"http://{self.headers.get('Host')}"
            prefix = {"models": "", "datasets": "datasets/", "spaces": "spaces/"}[typ]
            return self._json(200, {"commitUrl": f"{host}/{prefix}{repo.repo_id}/commit/{sha}", "commitOid": sha,
                                    "pullRequestUrl": f"{host}/{prefix}{repo.repo_id}/{pr}" if pr else None,
                                    "success": True})

    return Handler


class HubServer:
    """Context manager: ``with HubServer(tmp_path) as hub: hub.url, hub.state``."""

    def __init__(self, root: Path, token: str = TOKEN):
        self.state = HubState(root, token)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self.state))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def main() -> None:  # pragma: no cover - manual use: python tests/hub_server.py ROOT
    import sys
    import time

    with HubServer(Path(sys.argv[1] if len(sys.argv) > 1 else "hub_root")) as hub:
        print(hub.url, flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":  # pragma: no cover
    main()
