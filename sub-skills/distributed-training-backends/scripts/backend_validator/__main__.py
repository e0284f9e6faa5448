"""``python -m backend_validator`` and the ``validate-backend-config`` console script
(installed by pyproject.toml for the pre-commit hooks); same CLI as validate_backend_config.py."""
import signal
import sys


def run() -> None:
    # A reader that stops early (`... | head`) ends us quietly, like any Unix filter.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    from .cli import main
    sys.exit(main())


if __name__ == "__main__":
    run()
