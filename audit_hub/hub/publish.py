"""Publish a report folder to the Hugging Face Hub, publish the metric modules as Spaces, resolve Hub inputs.

* :func:`push_report`: ONE ``create_commit`` with the whole folder. Files are added (the client skips
  unchanged ones) and stale report files on the Hub (``data/*``, ``figures/*`` shards no longer in
  the folder) are deleted in the same commit, against the branch head read just before
  (``parent_commit``), so the repo moves from one complete report to the next or not at all.
  Pushing the same folder twice makes no new commit.
* :func:`push_metrics`: each ``metrics/<name>/`` folder becomes the Space ``<namespace>/<name>``
  so that ``evaluate.load("<namespace>/<name>")`` resolves from the Hub.
* :func:`resolve_hub_revision`: the commit sha of a Hub dataset at a branch/tag (recorded in the
  manifest for Hub inputs).

The token comes from the usual places (``HF_TOKEN``, then the login cache) via
``huggingface_hub.get_token``; it is never printed, and any message that might echo it is scrubbed.
The endpoint is ``HF_ENDPOINT`` read at call time (default https://huggingface.co).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from pathlib import Path

from ..errors import BenchauditError, InputError

# The files each kind of output must hold besides those its manifest lists (``manifest.json`` names the
# command that wrote the folder; an index of reports and the pruned set carry a ``kind``).
REQUIRED_FILES = {
    "audit": ("README.md", "manifest.json", "summary.json"),
    "audit/index": ("README.md", "manifest.json", "index.json"),
    "tst": ("README.md", "manifest.json", "summary.json"),
    "tst-llm": ("README.md", "manifest.json", "summary.json"),
    "prune": ("README.md", "manifest.json", "summary.json", "pruned_benchmark/manifest.json"),
    "prune/pruned_benchmark": ("README.md", "manifest.json", "summary.json"),
    "curate": ("README.md", "manifest.json", "summary.json"),
    "blind": ("README.md", "manifest.json", "run_config.json", "data/blind-00000-of-00001.parquet"),
}
REPORT_REQUIRED = REQUIRED_FILES["audit"]
# Remote paths an output owns: deleted when absent from the folder being pushed (fnmatch: '*' spans '/').
REPORT_MANAGED = ("data/*", "figures/*", "README.md", "summary.json", "manifest.json", "index.json", "run_config.json",
                  "circular_copies.parquet", "pruned_benchmark/*", "*/data/*", "*/figures/*", "*/README.md",
                  "*/summary.json", "*/manifest.json", "*/circular_copies.parquet")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_SKIP_FILES = ("__pycache__", ".ipynb_checkpoints", ".DS_Store")


class PublishError(BenchauditError):
    """A push failed (credentials, permissions, network, Hub refusal)."""


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def get_token(token: str | None = None) -> str:
    """The token to push with: the argument, else ``HF_TOKEN``, else the login cache. Never printed."""
    if token:
        return token
    from huggingface_hub import get_token as _hf_get_token

    tok = _hf_get_token()
    if not tok:
        raise PublishError("no Hugging Face token found: set HF_TOKEN or run `hf auth login` (a token with write "
                           "access is needed to push)")
    return tok


def check_repo_id(repo_id: str, what: str = "--repo-id") -> str:
    """Validate ``ORG/NAME`` (the Hub's rules: letters, digits, '-', '_', '.'; no '--' or '..')."""
    rid = (repo_id or "").strip()
    if (not _REPO_ID.match(rid) or "--" in rid or ".." in rid or rid.endswith((".git", "."))
            or rid.split("/")[1].startswith(".")):
        raise InputError(f"{what} must look like ORG/NAME (letters, digits, '-', '_', '.'; no '--' or '..'), "
                         f"got {repo_id!r}")
    return rid


def _api(token: str | None):
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint(), token=token)


def _scrub(msg: str, token: str | None) -> str:
    from ..scrub import scrub

    if token:
        msg = msg.replace(token, "***")
    return scrub(msg)


def _hub_error(e: Exception, repo_id: str, token: str | None, action: str) -> PublishError:
    """Turn a client exception into one clear line (status-specific advice)."""
    status = getattr(getattr(e, "response", None), "status_code", None)
    if status == 401:
        msg = (f"the Hub at {endpoint()} rejected the token while trying to {action} {repo_id} (401): check HF_TOKEN "
               "or `hf auth login`")
    elif status == 403:
        msg = f"the token has no write access to {repo_id} (403) while trying to {action} it"
    elif status == 404:
        msg = f"{repo_id} or the requested revision was not found while trying to {action} it (404)"
    elif status is not None:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        msg = f"the Hub refused to {action} {repo_id} (HTTP {status}): {first}"
    else:
        msg = f"cannot reach the Hub at {endpoint()} to {action} {repo_id}: {type(e).__name__}: {e}"
    return PublishError(_scrub(msg, token))


def _local_files(folder: Path) -> dict[str, Path]:
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if any(part in _SKIP_FILES or part.startswith(".") for part in rel.parts):
            continue
        if p.is_symlink() or not (p.is_dir() or p.is_file()):
            raise InputError(f"{rel.as_posix()} is a symlink or a special file; refusing to push it", file=str(folder))
        if not p.is_file():
            continue
        if p.suffix == ".pyc":
            continue
        out[rel.as_posix()] = p
    return out


def read_manifest(folder: str | os.PathLike) -> dict:
    """``folder/manifest.json`` as a dict: a regular file, at most 64 MiB, written by benchaudit; one line otherwise."""
    import json
    import stat

    mpath = Path(os.path.realpath(folder)) / "manifest.json"
    try:
        st = os.lstat(mpath)
        if not stat.S_ISREG(st.st_mode) or st.st_size > (64 << 20):
            raise InputError("manifest.json is not a regular file (or is too large); refusing to push",
                             file=str(folder))
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{folder} is not a benchaudit output folder: missing manifest.json (only a folder "
                         "written by a benchaudit command can be pushed)") from None
    except (OSError, ValueError, RecursionError) as e:
        raise InputError(f"cannot read manifest.json ({type(e).__name__}); refusing to push", file=str(folder)) from None
    if not isinstance(manifest, dict) or manifest.get("tool") != "benchaudit":
        raise InputError("manifest.json was not written by benchaudit; refusing to push", file=str(folder))
    return manifest


def output_kind(manifest: dict) -> tuple[str, str]:
    """(command, kind key of :data:`REQUIRED_FILES`) of a manifest; version 1 audit manifests have no
    ``command`` (their ``output_of``/command line names it)."""
    cmd = manifest.get("output_of") if isinstance(manifest.get("output_of"), str) else manifest.get("command")
    if not isinstance(cmd, str):
        cl = manifest.get("command_line") if isinstance(manifest.get("command_line"), list) else manifest.get("command")
        cmd = cl[1] if isinstance(cl, list) and len(cl) > 1 and isinstance(cl[1], str) else None
    kind = manifest.get("kind")
    key = f"{cmd}/{kind}" if isinstance(kind, str) else str(cmd)
    if key not in REQUIRED_FILES:
        from ..escape import show_id

        raise InputError(f"manifest.json names no output benchaudit can push (command {show_id(cmd)}"
                         + (f", kind {show_id(kind)}" if kind is not None else "") + "); refusing to push")
    return str(cmd), key


def check_report_folder(folder: str | os.PathLike) -> Path:
    """An output folder of any benchaudit command: the files its kind requires (manifest, card, summary or
    index or run configuration), and README.md with valid card YAML whose configs match its shards."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"output folder {folder} does not exist (write it with a benchaudit command's --out first)")
    cmd, key = output_kind(read_manifest(folder))
    missing = [f for f in REQUIRED_FILES[key] if not (folder / f).is_file()]
    if missing:
        raise InputError(f"{folder} is not a complete `benchaudit {cmd}` output: missing {', '.join(missing)}")
    from huggingface_hub import DatasetCard

    try:
        card = DatasetCard.load(folder / "README.md")
    except Exception as e:  # malformed YAML header
        raise InputError(f"README.md has an invalid dataset-card header: {e}", file=str(folder / "README.md")) from None
    for cfg in card.data.to_dict().get("configs") or []:
        for df in cfg.get("data_files") or []:
            pattern = df["path"] if isinstance(df, dict) else str(df)
            if ".." in str(pattern).split("/") or str(pattern).startswith("/") or not list(folder.glob(pattern)):
                raise InputError(f"the card's config {cfg.get('config_name')!r} points to {pattern} but no such file "
                                 "exists in the folder", file=str(folder / "README.md"))
    return folder


def report_files(folder: str | os.PathLike) -> dict[str, Path]:
    """The files a push may upload: exactly those ``manifest.json`` lists (plus the manifest itself), each a
    regular file physically inside ``folder`` whose sha256 matches the manifest. Anything else in the
    folder -- a symlink, a FIFO or device, a file the manifest does not list, a listed file that is
    missing, altered or outside the folder -- stops the push with one line naming the command that wrote
    the folder. A folder holding outputs with manifests of their own (an index of reports, the pruned
    set of ``prune``) has each of them checked against its own manifest too."""
    import stat

    from .folders import sha256_file

    root = Path(os.path.realpath(folder))
    manifest = read_manifest(folder)
    cmd, _key = output_kind(manifest)
    by = f"`benchaudit {cmd}`"
    outputs = manifest.get("outputs")
    if not isinstance(outputs, list) or not outputs:
        raise InputError(f"manifest.json (written by {by}) lists no output files; refusing to push", file=str(folder))
    listed: dict[str, str] = {}
    for rec in outputs:
        rel = rec.get("path") if isinstance(rec, dict) else None
        sha = rec.get("sha256") if isinstance(rec, dict) else None
        if not isinstance(rel, str) or not isinstance(sha, str) or rel.startswith("/") or ".." in rel.split("/") \
                or "\\" in rel or not rel:
            raise InputError(f"manifest.json has an invalid output entry {rec!r}; refusing to push",
                             file=str(folder))
        listed[rel] = sha
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for d in list(dirnames):
            if os.path.islink(os.path.join(dirpath, d)):
                rel = os.path.relpath(os.path.join(dirpath, d), root).replace(os.sep, "/")
                raise InputError(f"{rel} is a symlink; refusing to push (only regular files inside the folder "
                                 "are uploaded)", file=str(folder))
        for f in filenames:
            p = Path(dirpath) / f
            rel = p.relative_to(root).as_posix()
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                raise InputError(f"{rel} is a symlink; refusing to push (only regular files inside the folder are "
                                 "uploaded)", file=str(folder))
            if not stat.S_ISREG(st.st_mode):
                raise InputError(f"{rel} is not a regular file; refusing to push", file=str(folder))
            if rel != "manifest.json" and rel not in listed:
                raise InputError(f"{rel} is not listed in manifest.json; refusing to push (remove it, or rerun "
                                 f"{by})", file=str(folder))
            found[rel] = p
    for rel, sha in listed.items():
        p = found.get(rel)
        if p is None:
            raise InputError(f"{rel} is listed in manifest.json but missing (or not a regular file inside the "
                             "folder); refusing to push", file=str(folder))
        if sha256_file(p) != sha:
            raise InputError(f"{rel} does not match its sha256 in manifest.json (changed after {by} wrote it); "
                             "refusing to push", file=str(folder))
    for rel in sorted(found):
        if rel != "manifest.json" and rel.endswith("/manifest.json"):
            report_files(root / rel[: -len("/manifest.json")])
    return {rel: found[rel] for rel in sorted(found)}


def outputs_id(files: dict[str, Path]) -> str:
    """A 12-hex id of what a push would upload: the files' paths and contents, the manifest (its times) aside, so
    that a rerun of the same command has the id of its first run."""
    import hashlib

    from .folders import sha256_file

    h = hashlib.sha256()
    for rel in sorted(files):
        if rel != "manifest.json":
            h.update(f"{rel}\t{sha256_file(files[rel])}\n".encode())
    return h.hexdigest()[:12]


def _commit_folder(api, repo_id: str, repo_type: str, folder: Path, *, revision: str | None, create_pr: bool,
                   commit_message: str, managed: tuple[str, ...] | None, token: str,
                   files: dict[str, Path] | None = None) -> dict:
    """One commit: add every local file, delete managed remote files absent locally."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    branch = revision or "main"
    info = api.repo_info(repo_id, repo_type=repo_type, revision=branch)
    head = info.sha
    remote = [s.rfilename for s in (info.siblings or [])]
    local = files if files is not None else _local_files(folder)
    if not local:
        raise InputError(f"{folder} is empty; nothing to push")
    if create_pr:  # the pull request's title carries its content's id: the same outputs never open a second one
        tag = f"[outputs {outputs_id(local)}]"
        commit_message = f"{commit_message} {tag}"
        for d in api.get_repo_discussions(repo_id, repo_type=repo_type, discussion_type="pull_request",
                                          discussion_status="open"):
            if d.title.endswith(tag):
                return {"repo_id": repo_id, "repo_type": repo_type, "revision": branch, "commit": head,
                        "commit_url": None, "pr_url": d.url, "no_op": True, "open_pr": d.num,
                        "n_files": len(local), "deleted": []}
    stale = sorted(p for p in remote if p not in local and p != ".gitattributes"
                   and (managed is None or any(fnmatch.fnmatch(p, pat) for pat in managed)))
    ops = [CommitOperationDelete(path_in_repo=p) for p in stale]
    ops += [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(p)) for rel, p in local.items()]
    import logging

    # huggingface_hub logs "No files have been modified since last commit. Skipping to prevent empty commit." and
    # returns the head: said once, in this command's words (no_op), not in the library's
    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(max(level, logging.ERROR))
    try:
        ci = api.create_commit(repo_id, ops, commit_message=commit_message, repo_type=repo_type, revision=branch,
                               create_pr=create_pr, parent_commit=head)
    finally:
        hub_log.setLevel(level)
    # nothing changed: the hub made no commit (and so no pull request either), whatever was asked
    no_op = ci.oid == head and not ci.pr_url
    return {"repo_id": repo_id, "repo_type": repo_type, "revision": branch, "commit": ci.oid,
            "commit_url": ci.commit_url, "pr_url": ci.pr_url, "no_op": no_op,
            "n_files": len(local), "deleted": stale}


def push_report(folder: str | os.PathLike, repo_id: str, *, private: bool = False, revision: str | None = None,
                create_pr: bool = False, token: str | None = None, commit_message: str | None = None) -> dict:
    """Push a report folder as a dataset repo in one atomic commit; returns what happened.

    ``revision``: a branch (created from ``main`` if missing, unless ``create_pr``, in which case the
    pull request targets it). Returns ``{repo_id, revision, commit, commit_url, pr_url, no_op,
    n_files, deleted}``.
    """
    rid = check_repo_id(repo_id)
    folder = check_report_folder(folder)
    files = report_files(folder)
    tok = get_token(token)
    api = _api(tok)
    try:
        api.create_repo(rid, repo_type="dataset", private=private, exist_ok=True)
        if revision and revision != "main":
            if create_pr:
                api.repo_info(rid, repo_type="dataset", revision=revision)
            else:
                api.create_branch(rid, repo_type="dataset", branch=revision, exist_ok=True)
        msg = commit_message or _report_commit_message(folder)
        return _commit_folder(api, rid, "dataset", folder, revision=revision, create_pr=create_pr,
                              commit_message=msg, managed=REPORT_MANAGED, token=tok, files=files)
    except BenchauditError:
        raise
    except Exception as e:
        raise _hub_error(e, rid, tok, "push to") from None


def _report_commit_message(folder: Path) -> str:
    import json

    try:
        m = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        cmd = output_kind(m)[0]
        return (f"benchaudit {cmd} output ({m.get('benchaudit_version') or '?'}, "
                f"{m.get('finished_at') or 'unknown time'})")
    except (OSError, ValueError, InputError):
        return "benchaudit output"


def metric_folders(metrics_dir: str | os.PathLike) -> dict[str, Path]:
    """``{name: folder}`` for every ``<metrics_dir>/<name>/<name>.py``."""
    d = Path(metrics_dir)
    if not d.is_dir():
        raise InputError(f"metrics folder {d} does not exist")
    out = {p.name: p for p in sorted(d.iterdir()) if p.is_dir() and (p / f"{p.name}.py").is_file()}
    if not out:
        raise InputError(f"no metric modules in {d} (expected <name>/<name>.py)")
    return out


def push_metrics(namespace: str, *, metrics_dir: str | os.PathLike, names: list[str] | None = None,
                 private: bool = False, token: str | None = None,
                 on_progress: Callable[[str], None] | None = None) -> list[dict]:
    """Publish each metric folder of ``metrics_dir`` as the Space ``<namespace>/<name>`` (gradio SDK), one
    commit per Space (the command passes the checkout's ``metrics/`` or the packaged copy)."""
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$", namespace or "") or "--" in namespace:
        raise InputError(f"--namespace must be a Hub user or organisation name, got {namespace!r}")
    folders = metric_folders(metrics_dir)
    if names:
        unknown = sorted(set(names) - set(folders))
        if unknown:
            raise InputError(f"unknown metric(s) {unknown}; available: {sorted(folders)}")
        folders = {n: folders[n] for n in names}
    tok = get_token(token)
    api = _api(tok)
    out = []
    for name, folder in folders.items():
        rid = check_repo_id(f"{namespace}/{name}", "metric Space id")
        if on_progress:
            on_progress(name)
        try:
            api.create_repo(rid, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
            out.append(_commit_folder(api, rid, "space", folder, revision=None, create_pr=False,
                                      commit_message=f"benchaudit metric module {name}", managed=None, token=tok))
        except BenchauditError:
            raise
        except Exception as e:
            raise _hub_error(e, rid, tok, "publish the metric Space") from None
    return out


def resolve_hub_revision(repo_id: str, revision: str | None = None, repo_type: str = "dataset",
                         token: str | None = None) -> str:
    """Commit sha of ``repo_id`` at ``revision`` (branch, tag or sha; default ``main``).

    Raises :class:`InputError` with one clear line when the repo or revision does not exist or the
    Hub cannot be reached. A token is optional here (public repos resolve without one).
    """
    rid = check_repo_id(repo_id, "Hub dataset id")
    from huggingface_hub import get_token as _hf_get_token

    tok = token or _hf_get_token()
    try:
        info = _api(tok).repo_info(rid, repo_type=repo_type, revision=revision)
    except Exception as e:
        err = _hub_error(e, rid, tok, "resolve")
        raise InputError(f"cannot resolve {repo_type} {rid}@{revision or 'main'}: {err}") from None
    if not info.sha:
        raise InputError(f"the Hub returned no commit for {repo_type} {rid}@{revision or 'main'}")
    return str(info.sha)
