"""``benchaudit push`` and ``benchaudit push-metrics``: publish to the Hugging Face Hub.

Top-level imports stay light (typer, pathlib, typing); the implementation lives in
:mod:`audit_hub.hub.publish` and is imported inside the commands.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..metrics import NAMESPACE


def register(app: typer.Typer) -> None:
    @app.command("push")
    def push(
        folder: Path = typer.Argument(..., help="Output folder written by a benchaudit command (audit, work_dir audit, tst, prune, curate, blind) with --out DIR."),
        repo_id: str = typer.Option(..., "--repo-id", help="Target dataset repo ORG/NAME (created if missing)."),
        private: bool = typer.Option(False, "--private", help="Create the repo private (ignored if it exists)."),
        revision: str | None = typer.Option(None, "--revision",
                                               help="Branch to commit to (created from main if missing)."),
        create_pr: bool = typer.Option(False, "--create-pr", help="Open a pull request instead of committing."),
        message: str | None = typer.Option(None, "--message", "-m", help="Commit message."),
    ) -> None:
        """Push an output folder (audit, tst, prune, curate, blind, work_dir index) to the Hub as a dataset, in one atomic commit (token: HF_TOKEN or the login cache)."""
        from ..fmt import count
        from ..hub.publish import push_report

        res = push_report(folder, repo_id, private=private, revision=revision, create_pr=create_pr,
                          commit_message=message)
        if res.get("open_pr") is not None:
            typer.echo(f"{res['repo_id']}: the open pull request #{res['open_pr']} already proposes these outputs "
                       f"({res['pr_url']}); nothing to push, no second pull request opened")
            return
        if res["no_op"]:
            typer.echo(f"{res['repo_id']}@{res['revision']} already has this report (commit {res['commit'][:12]}); "
                       "nothing to push" + ("; no pull request opened (it would change nothing)" if create_pr else ""))
            return
        deleted = f", {count(len(res['deleted']), 'stale file')} removed" if res["deleted"] else ""
        typer.echo(f"pushed {count(res['n_files'], 'file')}{deleted}: {res['pr_url'] or res['commit_url']}")

    @app.command("push-metrics")
    def push_metrics_cmd(
        namespace: str = typer.Option(NAMESPACE, "--namespace",
                                      help="Hub user or organisation that will own the Spaces."),
        metrics_dir: Path | None = typer.Option(None, "--metrics-dir",
                                                   help="Folder of metric modules (default: the repo's metrics/)."),
        name: list[str] | None = typer.Option(None, "--name", help="Only this metric; repeatable."),
        private: bool = typer.Option(False, "--private", help="Create the Spaces private."),
    ) -> None:
        """Publish each metrics/<name>/ folder as the Space NAMESPACE/<name>, so evaluate.load("NAMESPACE/<name>") works."""
        from rich.console import Console

        from ..hub.publish import push_metrics
        from ..metrics.install import source_dir

        console = Console(stderr=True)
        with console.status("publishing metric Spaces") as status:
            res = push_metrics(namespace, metrics_dir=metrics_dir or source_dir(), names=list(name or []) or None, private=private,
                               on_progress=lambda n: status.update(f"publishing {namespace}/{n}"))
        for r in res:
            state = "unchanged" if r["no_op"] else "new commit"
            typer.echo(f"{r['repo_id']}: {state}; pin it with evaluate.load('{r['repo_id']}', "
                       f"revision='{r['commit']}')")
