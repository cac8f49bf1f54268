"""The shell lines ``local up`` prints and writes to its env file: the variables that point a
shell at the local stack, and a guard that keeps ``sam`` from deploying there.

The variables include ``AWS_ENDPOINT_URL`` and fake credentials, which every AWS tool honours:
in a shell that sourced them, ``sam deploy`` would quietly "deploy" to moto (creating
``aws-sam-cli-managed-default`` there). The lines therefore define a ``sam`` shell function
that refuses the subcommands that change a CloudFormation stack (deploy, sync, delete) with
one clear line, and passes every other one to the real ``sam``; ``local_stack_off`` unsets the
variables and both functions. A shell function, not a change to the variables, because the
point of the file is that everything else in that shell (the CLI, ``aws``, boto3 scripts)
reaches the local stack. A script started from that shell inherits the variables but not the
function: run deploys from a shell that never sourced the file.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

__all__ = ["GUARDED_SAM_COMMANDS", "OFF_FUNCTION", "shell_lines"]

# sam subcommands that create, change or delete a CloudFormation stack.
GUARDED_SAM_COMMANDS = ("deploy", "sync", "delete")
OFF_FUNCTION = "local_stack_off"


def shell_lines(variables: Mapping[str, str]) -> list[str]:
    """``export NAME=value`` for each variable, then the ``sam`` guard and ``local_stack_off``
    (one line each, so a copied block and a sourced file are the same; bash and zsh)."""
    exports = [f"export {name}={shlex.quote(value)}" for name, value in variables.items()]
    refused = (
        'echo "sam $1: refused: this shell points AWS tools at the local stack '
        "(AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL, fake credentials): it would $1 to moto, not AWS. "
        f'Run {OFF_FUNCTION} first, or use a shell that never sourced these lines." >&2'
    )
    guard = (
        f'sam() {{ case "${{1:-}}" in {"|".join(GUARDED_SAM_COMMANDS)}) {refused}; return 2;; '
        'esac; command sam "$@"; }'
    )
    off = (
        f"{OFF_FUNCTION}() {{ unset {' '.join(variables)}; unset -f sam {OFF_FUNCTION}; "
        'echo "local stack variables unset: AWS tools reach AWS again" >&2; }'
    )
    return [*exports, guard, off]
