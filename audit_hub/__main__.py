"""`python -m audit_hub` == `benchaudit`."""
import sys

from .cli import main

sys.exit(main())
