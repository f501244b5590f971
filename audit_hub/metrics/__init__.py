"""The shared code behind the ``evaluate`` modules in ``metrics/<name>/`` and their offline install."""

#: The Hub namespace the metric modules are published under and loaded from by default:
#: ``evaluate.load("benchaudit/<name>")`` resolves the Space ``benchaudit/<name>``.
NAMESPACE = "benchaudit"


def space_url(name: str, namespace: str = NAMESPACE) -> str:
    """The Hub page of a metric module's Space."""
    return f"https://huggingface.co/spaces/{namespace}/{name}"
