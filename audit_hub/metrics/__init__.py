"""The shared code behind the ``evaluate`` modules in ``metrics/<name>/`` and their offline install."""
