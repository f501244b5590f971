#!/usr/bin/env python
"""Push a benchaudit report folder to the Hugging Face Hub in one atomic commit.

    python scripts/push_report.py DIR --repo-id ORG/NAME [--private] [--revision BRANCH] [--create-pr]

Same as ``benchaudit push``. The token comes from HF_TOKEN or the login cache and is never printed;
HF_ENDPOINT selects another Hub. Exit code 2 with one ``error:`` line on bad input or a refused push.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="report folder written by `benchaudit audit --out DIR`")
    p.add_argument("--repo-id", required=True, help="target dataset repo ORG/NAME")
    p.add_argument("--private", action="store_true", help="create the repo private")
    p.add_argument("--revision", default=None, help="branch to commit to (created if missing)")
    p.add_argument("--create-pr", action="store_true", help="open a pull request instead of committing")
    p.add_argument("--message", default=None, help="commit message")
    a = p.parse_args(argv)
    from audit_hub.errors import BenchauditError
    from audit_hub.hub.publish import push_report

    try:
        res = push_report(a.folder, a.repo_id, private=a.private, revision=a.revision, create_pr=a.create_pr,
                          commit_message=a.message)
    except BenchauditError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if res["no_op"]:
        print(f"{res['repo_id']}@{res['revision']} already has this report (commit {res['commit'][:12]})")
    else:
        print(f"pushed {res['n_files']} file(s): {res['pr_url'] or res['commit_url']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
