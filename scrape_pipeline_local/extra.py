"""What the local stack needs beyond the runtime, checked before anything imports it.

The wheel always installs this package; its libraries come with the ``local`` extra. A command
that runs the local stack asks ``missing`` first, so an operator without the extra reads one
line naming what to install (exit 2), never a traceback from deep inside an import. Only the
standard library here: importing this module must work without the extra.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

INSTALL = "pip install 'scrape-pipeline[local]'"
# In a checkout: the install that both adds the extra and runs the checkout's own code.
CHECKOUT_INSTALL = "pip install -e '.[local]'"
# The import names of the `local` extra (fastapi, uvicorn, moto[server], aws-sam-translator).
MODULES = ("fastapi", "uvicorn", "moto", "flask", "samtranslator", "cfnlint")
# `local up` and `local demo` run the handlers as SAM deploys them: from a checkout.
CHECKOUT = Path(__file__).resolve().parents[1]
CHECKOUT_FILES = ("template.yaml", "functions")


def missing(command: str, *, checkout: bool = False) -> str | None:
    """Why ``command`` cannot run here, in one line, or None when it can.

    ``checkout``: the command also needs the repository's template.yaml and functions/. The line
    says everything missing at once: an installed wheel lacks both the extra and the checkout,
    and naming only the extra would send its reader back for a second try.
    """
    absent = [name for name in MODULES if importlib.util.find_spec(name) is None]
    outside = checkout and not all((CHECKOUT / name).exists() for name in CHECKOUT_FILES)
    if outside:
        needs = f", with the local stack ({', '.join(absent)} not installed)" if absent else ""
        return (
            f"{command} runs the handlers from a checkout of the repository (template.yaml, "
            f"functions/){needs}: run it there, installed with {CHECKOUT_INSTALL}"
        )
    if absent:
        return f"{command} needs the local stack ({', '.join(absent)} not installed): {INSTALL}"
    return None


def geonode_sim() -> int:
    """The ``geonode-sim`` script: the simulator, or the one line saying what it needs."""
    problem = missing("geonode-sim")
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    from scrape_pipeline_local.simulator.__main__ import main

    return main()
