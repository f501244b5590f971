"""`python -m audit_hub` == `benchaudit`."""
from .cli import console

console()
