"""The console script's outermost layer: however a run ends, one line and a documented exit code.

The exit codes are listed once, in docs/usage.md ("Exit codes"). Nothing heavy is imported
before the guard is in place, so that a Ctrl-C while the program starts up is caught too; a
report that cannot be written to stdout (a full disk, a closed pipe) is said on stderr.
An error that escapes the command is a bug in commgroup-lint: it exits 2, never 1, which
CI reads as findings.
"""

from __future__ import annotations

import errno
import os
import sys

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process stopped by Ctrl-C


def main() -> None:
    """Run the command line; exit with its code, or 2 / 130 with one `error:` line."""
    sys.exit(_guarded())


def _guarded() -> int:
    try:
        import click

        from commgroup_lint.cli import main as command

        try:
            code = _code(command.main(prog_name="commgroup-lint", standalone_mode=False))
        except SystemExit as done:  # the commands end with sys.exit(code)
            code = _code(done.code)
        except click.ClickException as err:
            err.show()
            code = err.exit_code
        except click.Abort:  # click's form of a KeyboardInterrupt
            raise KeyboardInterrupt from None
        sys.stdout.flush()  # inside the guard: a full disk shows here, not in the interpreter's exit
        return code
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except MemoryError:
        return _fail("out of memory; check fewer files at once, or give the process more memory")
    except OSError as err:
        if _output_failed(err):
            return _fail(f"cannot write the report: {err.strerror or err}")
        return _fail(_internal(err))
    except Exception as err:  # noqa: BLE001 - a bug: one line, never a traceback
        return _fail(_internal(err))


def _code(value: object) -> int:
    """A command's return value or `SystemExit.code` as an exit status (None is 0; a message is
    an error, said as one)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    return _fail(str(value))


def _internal(err: BaseException) -> str:
    return f"internal error: {type(err).__name__}: {err} (please report this)"


def _output_failed(err: OSError) -> bool:
    """Whether `err` says the output could not be written (the commands report every failed
    write of a file of their own); if so stdout is pointed at the null device, so that the
    interpreter's own flush at exit does not fail again."""
    if err.errno not in _OUTPUT_ERRNOS:
        return False
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass
    return True


_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EPIPE, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _fail(message: str, code: int = EXIT_ERROR) -> int:
    try:
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return code
