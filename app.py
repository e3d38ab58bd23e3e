"""Entry point for gunicorn: `gunicorn app:app`."""
from oomdoctor.web import create_app

app = create_app()
