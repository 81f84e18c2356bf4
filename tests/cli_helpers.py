"""Running the CLI in-process from the tests, and its one-line error contract."""

import re

from mdtheory.cli import main


def run_main(capsys, *argv):
    """(exit code, stdout, stderr) of ``mdtheory ARGV``."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *patterns):
    """Exit code 2 and one line ``mdtheory: error: ...`` matching every pattern."""
    assert code == 2, err
    assert err.startswith("mdtheory: error: ") and err.count("\n") == 1, err
    for pat in patterns:
        assert re.search(pat, err), (pat, err)
