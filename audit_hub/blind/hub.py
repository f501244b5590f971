"""Publish a blind-run folder as a Hub dataset (``--push-to-hub``): the same code path as ``benchaudit push``."""

from __future__ import annotations

from pathlib import Path


def push_blind_to_hub(out_dir: str | Path, repo_id: str, *, private: bool = False, token: str | None = None,
                      commit_message: str | None = None) -> str:
    """Push the complete blind output ``out_dir`` (card, merged data, run configuration, manifest) to the
    dataset ``repo_id`` in one commit, with the checks of every push (:func:`audit_hub.hub.publish.push_report`:
    only the files ``manifest.json`` lists, each matching its sha256). The token comes from ``token``,
    ``HF_TOKEN`` or the login cache; it is never printed. Returns the dataset URL."""
    from ..hub.publish import check_repo_id, endpoint, push_report

    rid = check_repo_id(repo_id, "--push-to-hub")
    push_report(out_dir, rid, private=private, token=token,
                commit_message=commit_message or "benchaudit blind predictions")
    return f"{endpoint()}/datasets/{rid}"
