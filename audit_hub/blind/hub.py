"""Publish a blind-run folder as a Hub dataset (thin wrapper over ``HfApi.upload_folder``)."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError

UPLOAD_PATTERNS = ["data/*.parquet", "README.md", "run_config.json"]


def push_blind_to_hub(out_dir: str | Path, repo_id: str, *, private: bool = False, token: str | None = None,
                      commit_message: str | None = None, api=None) -> str:
    """Upload ``data/``, ``README.md`` and ``run_config.json`` of ``out_dir`` to dataset ``repo_id``.

    The token comes from ``token``, the ``HF_TOKEN`` environment variable or the login cache (handled by
    ``huggingface_hub``); it is never printed. ``api`` lets tests pass a stand-in for ``HfApi``.
    Returns the dataset URL.
    """
    out_dir = Path(out_dir)
    if "/" not in repo_id or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise InputError(f"--push-to-hub expects ORG/NAME, got {repo_id!r}")
    if not (out_dir / "data").is_dir():
        raise InputError("nothing to publish: the merged data/ folder is missing", file=str(out_dir))
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    api.create_repo(repo_id=repo_id, repo_type="dataset", private=private, exist_ok=True)
    api.upload_folder(folder_path=str(out_dir), repo_id=repo_id, repo_type="dataset",
                      allow_patterns=UPLOAD_PATTERNS,
                      commit_message=commit_message or "benchaudit blind predictions")
    return f"https://huggingface.co/datasets/{repo_id}"
